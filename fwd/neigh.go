package fwd

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

// Neighbour resolution (ARP, RFC 826; IPv6 ND, RFC 4861) on the data plane.
//
// Entries live in the engine's neighTable. A reply for an existing entry
// is applied in place with atomic stores; a new neighbour goes to the
// control plane through the worker's learn ring and appears at the next
// Service. Packets for an unresolved neighbour wait in the worker's own
// hold table (bounded per neighbour and in total); they leave as soon as
// this worker hears the answer, or at the first poll after the control
// plane publishes it, or are dropped after NeighProbes unanswered probes.
//
// A hostile LAN may send any ARP/ND it likes, so (glean.go has the rest):
//   - an entry is only made for an address we asked about (an answer) or
//     by a solicitation/request addressed to us (RFC 4861 §7.2.3, RFC 826);
//     an unsolicited advert for an unknown address makes nothing (§7.2.5);
//   - only an answer (an ARP reply to our address, a solicited NA) confirms
//     an entry, and forwarding uses confirmed entries only: one made from
//     a request is first asked about, like Linux's STALE → PROBE, so a
//     spoofed request cannot steer traffic;
//   - a confirmed entry (its address answered us) never moves on an
//     unsolicited message (counted as neighbour_refused): it keeps its MAC
//     while its owner answers the unicast refresh probes traffic sends, and
//     once it lapses (STALE) only an answer moves it. A host that really
//     changed its MAC is found when the old entry lapses, within
//     NeighReachable. Unconfirmed entries take a new MAC when the message
//     may override (ND's O flag; ARP).

const holdEntries = 32 // unresolved neighbours a worker waits for at once

type holdEntry struct {
	used      bool
	failing   bool // being given up on: new packets for it are dropped, not added
	is4       bool
	port      uint16
	probes    int
	lastProbe int64
	started   int64
	key       [16]byte
	n         int
	pkts      []Packet
}

type holdTable struct {
	e      []holdEntry
	active int
}

func (h *holdTable) init(entries, per int) {
	h.e = make([]holdEntry, entries)
	for i := range h.e {
		h.e[i].pkts = make([]Packet, per)
	}
}

// holdPacket parks p (already TTL-decremented, for port out) until key
// resolves, soliciting it when it is new.
func (w *Worker) holdPacket(t *tables, p *Packet, out int, key *[16]byte, v4 bool) {
	var free, oldest *holdEntry
	for i := range w.hold.e {
		he := &w.hold.e[i]
		if !he.used {
			if free == nil {
				free = he
			}
			continue
		}
		if he.port == uint16(out) && he.key == *key {
			if he.failing {
				w.drop(p, DropNeighbourFail)
				return
			}
			if he.n == len(he.pkts) {
				w.drop(p, DropNeighbourFull)
				return
			}
			he.pkts[he.n] = *p
			he.n++
			return
		}
		if oldest == nil || he.started < oldest.started {
			oldest = he
		}
	}
	// A new neighbour to ask about: its sender must have budget left.
	if !w.gleanBudget(t, p) {
		w.drop(p, DropGleanLimited)
		return
	}
	if free == nil {
		// Held packets are the first thing given up: the oldest attempt
		// loses its packets and its slot, but its question stays in
		// w.asked, so the answer still makes the entry.
		for j := range oldest.n {
			w.drop(&oldest.pkts[j], DropNeighbourFull)
		}
		oldest.used, oldest.n = false, 0
		w.hold.active--
		free = oldest
	}
	free.used, free.is4, free.port, free.key = true, v4, uint16(out), *key
	free.probes, free.lastProbe, free.started, free.n = 1, w.now, w.now, 1
	free.pkts[0] = *p
	w.hold.active++
	w.solicit(t, out, key, v4, 0)
}

// releaseHeld sends what waits for (port, key) now that it is at mac, and
// reports whether anything waited.
func (w *Worker) releaseHeld(t *tables, port uint16, key *[16]byte, mac uint64) bool {
	for i := range w.hold.e {
		he := &w.hold.e[i]
		if he.used && he.port == port && he.key == *key {
			w.flushHold(t, he, mac)
			return true
		}
	}
	return false
}

func (w *Worker) flushHold(t *tables, he *holdEntry, mac uint64) {
	for i := range he.n {
		w.output(t, &he.pkts[i], int(he.port), mac)
	}
	he.used, he.n = false, 0
	w.hold.active--
}

// serviceHold releases neighbours the control plane resolved, re-probes
// the others, and gives up on those that never answered.
func (w *Worker) serviceHold(t *tables) {
	nt := w.e.neigh.Load()
	for i := range w.hold.e {
		he := &w.hold.e[i]
		if !he.used {
			continue
		}
		if n := nt.lookup(he.port, &he.key); n != nil {
			if mac := n.mac.Load(); mac&neighValid != 0 && n.expires.Load() >= w.now && n.confirmed.Load() {
				w.flushHold(t, he, mac)
				continue
			}
		}
		if w.now-he.lastProbe < int64(w.lim.NeighRetrans) {
			continue
		}
		if he.probes >= w.lim.NeighProbes {
			// The errors sent below may route to this same neighbour;
			// failing keeps them from joining the entry being emptied.
			he.failing = true
			for j := range he.n {
				p := &he.pkts[j]
				if !w.fromUs(t, p) { // our own replies and errors get no error back
					w.icmpError(t, p, errHostUnreach, 0, 0)
				}
				w.drop(p, DropNeighbourFail)
			}
			he.used, he.failing, he.n = false, false, 0
			w.hold.active--
			continue
		}
		he.probes++
		he.lastProbe = w.now
		w.solicit(t, int(he.port), &he.key, he.is4, 0)
	}
}

// fromUs reports whether p's source is one of our addresses.
func (w *Worker) fromUs(t *tables, p *Packet) bool {
	l3 := p.Data()[p.L3Off:]
	var ai uint32
	var ok bool
	if p.Flags&FlagIPv4 != 0 {
		ai, ok = t.v4.Lookup([4]byte(l3[12:16]))
	} else {
		ai, ok = t.v6.Lookup([16]byte(l3[8:24]))
	}
	return ok && t.adj[ai].kind == adjLocal
}

// learnNeighbour applies "addr is at mac on port" from a received ARP or
// ND packet. forUs says the packet was a request or solicitation for one
// of our addresses (it may create an unconfirmed entry, which the kernel
// mirror gets but forwarding does not trust); answer says it replies to
// us (an ARP reply to our address, a solicited NA), the only thing that
// confirms an entry or releases held packets; override says the message
// may replace a cached address (ND's O flag; ARP always may).
func (w *Worker) learnNeighbour(t *tables, port uint16, key *[16]byte, is4 bool, mac []byte, forUs, answer, override bool) {
	m := packMAC(mac)
	asked := answer && w.askedFor(port, key)
	moved := false
	n := w.e.neigh.Load().lookup(port, key)
	if n != nil {
		if n.static {
			return
		}
		cur := n.mac.Load()
		switch {
		case cur == m:
			n.expires.Store(w.now + int64(w.lim.NeighReachable))
			if answer && !n.confirmed.Load() {
				n.confirmed.Store(true)
				w.reportConfirmed(port, key, is4, mac) // a mirror may trust it now
			}
			if n.confirmed.Load() {
				w.releaseHeld(t, port, key, m) // it may have lapsed while packets waited
			}
			return
		case cur&neighValid == 0 || override && !n.confirmed.Load() || answer && n.expires.Load() < w.now:
			// INCOMPLETE, never confirmed, or an answer for a lapsed
			// (STALE) entry: take the new address.
			n.mac.Store(m)
			n.expires.Store(w.now + int64(w.lim.NeighReachable))
			n.confirmed.Store(asked)
			moved = true
		default:
			// A confirmed entry: a different MAC is a claim, not an answer.
			// The entry keeps its MAC until it lapses (its owner stops
			// answering the refresh probes traffic sends), and then the
			// next resolution asks afresh. Shortening its life on every
			// claim instead let a storm make live traffic hang on probe
			// round trips (measured: lapses and 30 s TCP stalls).
			w.cnt[cNeighRefused]++
			return
		}
	}
	held := answer && w.releaseHeld(t, port, key, m) // an answer to a hold entry's solicitation
	// An answer nobody here asked for is the kernel's own resolution (it
	// shares the port's addresses, and its replies come to ovfwd): like a
	// request for us it makes an unconfirmed entry, for the kernel mirror.
	if n == nil && !asked && !held && !forUs && !answer {
		w.cnt[cNeighUnsolicited]++
		return
	}
	w.sendLearn(port, key, is4, mac, moved, asked || held)
}

// reportConfirmed tells the control plane an entry it has was confirmed
// in place (same MAC), for its event.
func (w *Worker) reportConfirmed(port uint16, key *[16]byte, is4 bool, mac []byte) {
	w.sendLearn(port, key, is4, mac, false, true)
}

func (w *Worker) sendLearn(port uint16, key *[16]byte, is4 bool, mac []byte, moved, confirmed bool) {
	s := w.learn.slot()
	if s == nil {
		w.cnt[cLearnDropped]++
		if !w.learnLost.Load() {
			w.learnLost.Store(true)
		}
		return
	}
	s.port, s.is4, s.moved, s.confirmed, s.addr = port, is4, moved, confirmed, *key
	copy(s.mac[:], mac)
	w.learn.publish()
}

// arpInput answers ARP requests for our addresses and learns senders.
func (w *Worker) arpInput(t *tables, p *Packet) {
	d := p.Data()
	a := d[p.L3Off:]
	pc := &t.ports[p.InPort]
	op := binary.BigEndian.Uint16(a[6:])
	sha, spa, tpa := a[8:14], a[14:18], a[24:28]
	if sha[0]&1 != 0 {
		w.drop(p, DropMalformed)
		return
	}
	if pc.hostCopies {
		w.puntCopy(p) // before the request is rewritten into our reply
	}
	ours := pc.owns4(tpa)
	if pc.onLink4(spa) {
		key := key4(spa)
		w.learnNeighbour(t, p.InPort, &key, true, sha, ours && op == arpOpRequest, ours && op == arpOpReply, true)
	}
	if op != arpOpRequest || !ours {
		if op == arpOpRequest {
			w.drop(p, DropNotForUs)
		} else {
			w.release(p)
		}
		return
	}
	// Turn the request into the reply in place.
	var ip [4]byte
	copy(ip[:], tpa)
	copy(a[18:28], a[8:18]) // target := sender
	copy(a[8:14], pc.mac[:])
	copy(a[14:18], ip[:])
	binary.BigEndian.PutUint16(a[6:], arpOpReply)
	copy(d[0:6], a[18:24])
	copy(d[6:12], pc.mac[:])
	w.cnt[cReplies]++
	w.send(p, int(p.InPort))
}

// ndInput handles neighbour solicitations and advertisements.
func (w *Worker) ndInput(t *tables, p *Packet) {
	d := p.Data()
	ip, icmp := d[p.L3Off:], d[p.L4Off:]
	if ip[7] != ndHopLimit || icmp[1] != 0 || len(icmp) < ndNSLen ||
		csum.Fold(csum.Sum(csum.Pseudo(ip[8:24], ip[24:40], protoICMPv6, len(icmp)), icmp)) != 0 {
		w.drop(p, DropMalformed)
		return
	}
	want := byte(ndOptSourceLLAddr)
	if icmp[0] == icmp6NeighborAdvert {
		want = ndOptTargetLLAddr
	}
	var lladdr []byte
	for o := icmp[ndNSLen:]; len(o) > 0; {
		if len(o) < 2 || o[1] == 0 || int(o[1])*8 > len(o) {
			w.drop(p, DropMalformed)
			return
		}
		if o[0] == want {
			lladdr = o[2:8]
		}
		o = o[int(o[1])*8:]
	}
	if lladdr != nil && lladdr[0]&1 != 0 {
		w.drop(p, DropMalformed)
		return
	}
	pc := &t.ports[p.InPort]
	if pc.hostCopies {
		w.puntCopy(p) // before a solicitation is rewritten into our advert
	}
	target := icmp[8:24]
	if target[0] == 0xff {
		w.drop(p, DropMalformed)
		return
	}
	if icmp[0] == icmp6NeighborAdvert {
		key := [16]byte(target)
		switch {
		case lladdr != nil && pc.onLink6(target):
			// RFC 4861 §7.1.2: a solicited advert is unicast to us.
			answer := icmp[4]&ndNAFlagSolicited != 0 && ip[24] != 0xff
			w.learnNeighbour(t, p.InPort, &key, false, lladdr, false, answer, icmp[4]&ndNAFlagOverride != 0)
		case lladdr == nil && icmp[4]&ndNAFlagSolicited != 0:
			// RFC 4861 §7.2.5: a solicited advert without the target
			// link-layer option confirms the cached address. Linux answers
			// our unicast refresh probes this way, so without this the
			// entry would lapse every NeighReachable under traffic.
			if n := w.e.neigh.Load().lookup(p.InPort, &key); n != nil && !n.static && n.mac.Load()&neighValid != 0 {
				n.expires.Store(w.now + int64(w.lim.NeighReachable))
			}
		}
		w.release(p)
		return
	}
	ours := pc.owns6(target)
	src := ip[8:24]
	unspecified := [16]byte(src) == [16]byte{}
	if lladdr != nil && !unspecified && pc.onLink6(src) {
		key := [16]byte(src)
		w.learnNeighbour(t, p.InPort, &key, false, lladdr, ours, false, true)
	}
	if !ours || unspecified { // unspecified: someone's duplicate address detection
		w.drop(p, DropNotForUs)
		return
	}
	need := int(p.L4Off) + ndNSLen + 8
	if int(p.Off)+need > len(p.Buf) {
		w.drop(p, DropMalformed)
		return
	}
	var dstMAC [6]byte
	copy(dstMAC[:], d[6:12])
	if lladdr != nil {
		copy(dstMAC[:], lladdr)
	}
	p.Len = uint16(need)
	d = p.Data()
	ip, icmp = d[p.L3Off:], d[p.L4Off:]
	binary.BigEndian.PutUint16(ip[4:], ndNSLen+8)
	ip[7] = ndHopLimit
	copy(ip[24:40], ip[8:24])
	copy(ip[8:24], icmp[8:24])
	icmp[0], icmp[1] = icmp6NeighborAdvert, 0
	clear(icmp[2:8])
	icmp[4] = ndNAFlagRouter | ndNAFlagSolicited | ndNAFlagOverride
	icmp[24], icmp[25] = ndOptTargetLLAddr, 1
	copy(icmp[26:32], pc.mac[:])
	binary.BigEndian.PutUint16(icmp[2:], csum.Fold(csum.Sum(csum.Pseudo(ip[8:24], ip[24:40], protoICMPv6, ndNSLen+8), icmp[:ndNSLen+8])))
	copy(d[0:6], dstMAC[:])
	copy(d[6:12], pc.mac[:])
	w.cnt[cReplies]++
	w.send(p, int(p.InPort))
}

// solicit sends an ARP request or a neighbour solicitation for key on
// port out: broadcast / solicited-node multicast, or unicast to known
// (a refresh probe) when known is a valid packed MAC.
func (w *Worker) solicit(t *tables, out int, key *[16]byte, v4 bool, known uint64) {
	pc := &t.ports[out]
	a := w.alloc(out)
	if a == nil {
		return
	}
	w.tmpSolicit = *a
	p := &w.tmpSolicit
	b := p.Buf[p.Off:]
	hl := ethHdrLen
	if pc.routerTag != 0 {
		hl += vlanTagLen
	}
	size := hl + ipv6HdrLen + ndNSLen + 8
	if v4 {
		size = max(hl+arpLen, 60) // pad to the Ethernet minimum
	}
	if len(b) < size {
		w.release(p)
		return
	}
	b = b[:size]
	clear(b)
	copy(b[6:12], pc.mac[:])
	if pc.routerTag != 0 {
		binary.BigEndian.PutUint16(b[12:], etherTypeVLAN)
		binary.BigEndian.PutUint16(b[14:], pc.routerTag)
	}
	if v4 {
		src, ok := pc.src4([4]byte(key[12:16]))
		if !ok {
			w.release(p)
			return
		}
		if known&neighValid != 0 {
			unpackMAC(known, b[0:6])
		} else {
			copy(b[0:6], broadcastMAC[:])
		}
		binary.BigEndian.PutUint16(b[hl-2:], etherTypeARP)
		r := b[hl:]
		binary.BigEndian.PutUint16(r[0:], arpHrdEthernet)
		binary.BigEndian.PutUint16(r[2:], etherTypeIPv4)
		r[4], r[5] = ethAddrLen, 4
		binary.BigEndian.PutUint16(r[6:], arpOpRequest)
		copy(r[8:14], pc.mac[:])
		copy(r[14:18], src[:])
		copy(r[24:28], key[12:16])
	} else {
		src, ok := pc.src6(*key)
		if !ok {
			w.release(p)
			return
		}
		binary.BigEndian.PutUint16(b[hl-2:], etherTypeIPv6)
		ip := b[hl : hl+ipv6HdrLen]
		icmp := b[hl+ipv6HdrLen:]
		binary.BigEndian.PutUint32(ip, 6<<28)
		binary.BigEndian.PutUint16(ip[4:], ndNSLen+8)
		ip[6], ip[7] = protoICMPv6, ndHopLimit
		copy(ip[8:24], src[:])
		if known&neighValid != 0 {
			copy(ip[24:40], key[:])
			unpackMAC(known, b[0:6])
		} else { // solicited-node multicast group ff02::1:ffXX:XXXX and its MAC 33:33:ff:XX:XX:XX
			ip[24], ip[25], ip[35], ip[36] = 0xff, 0x02, 0x01, 0xff
			copy(ip[37:40], key[13:16])
			b[0], b[1], b[2] = 0x33, 0x33, 0xff
			copy(b[3:6], key[13:16])
		}
		icmp[0] = icmp6NeighborSolicit
		copy(icmp[8:24], key[:])
		icmp[24], icmp[25] = ndOptSourceLLAddr, 1
		copy(icmp[26:32], pc.mac[:])
		binary.BigEndian.PutUint16(icmp[2:], csum.Fold(csum.Sum(csum.Pseudo(ip[8:24], ip[24:40], protoICMPv6, ndNSLen+8), icmp)))
	}
	w.noteAsked(uint16(out), key)
	p.Len = uint16(size)
	p.Flags = FlagParsed
	w.cnt[cSolicits]++
	w.send(p, out)
}

var broadcastMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
