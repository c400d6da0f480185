package nat

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

// Out translates an IPv4 packet routed out of egress port port: pkt is
// the datagram from its IP header on (Parse-checked, trimmed to its total
// length), l4 the offset of its transport header (0 when there is none: a
// later fragment, or too deep to read). It returns Pass when no rule
// covers the packet, Handoff and the owning worker when another worker
// owns its source, Done when translated, or a Drop* verdict (counted).
func (t *Table) Out(pkt []byte, l4 int, port int) (Verdict, int) {
	return t.OutHint(pkt, l4, port, 0)
}

// OutHint is Out with the packet's hint from Prefetch and Touch (0:
// none), which spares the lookup when it names the session.
func (t *Table) OutHint(pkt []byte, l4 int, port int, hint uint64) (Verdict, int) {
	if l4 == ipv4MinHdrLen && t.outFast(pkt, 0, port, hint, 0) {
		return Done, 0
	}
	return t.out(pkt, l4, port, hint)
}

// OutFast is OutHint's fast path alone, for the worker: buf[x:] is an
// IPv4 datagram as Parse accepted it (the engine's parser: a TCP or UDP
// datagram that is not a fragment has its whole transport header, a
// shorter one is dropped as malformed). true when it translated the
// packet (Done); false: call OutHint.
func (t *Table) OutFast(buf []byte, x int, port int, hint uint64) bool {
	return t.outFast(buf, x, port, hint, 0)
}

// OutRouted is OutFast for a packet a router forwards: when it translates
// the packet it also takes one off the TTL (above 1: the caller checked),
// in the same IP checksum update as the address (RFC 1624 eqn. 3: the
// TTL's term, ~m + m' with m' = m - 1 in the wire-order word
// TTL|protocol, is 0xfffe). false: nothing changed, TTL included; call
// OutHint.
func (t *Table) OutRouted(buf []byte, x int, port int, hint uint64) bool {
	return t.outFast(buf, x, port, hint, 1)
}

// fastView is what the fast path reads of a packet: an option-less IPv4
// header and a transport header up to TCP's checksum (UDP's 8 bytes are
// within it).
const fastView = ipv4MinHdrLen + tcpCsumOff + 2

// outFast translates a TCP or UDP packet of the live session its hint
// names (Touch's id + 1: 0, or an id past the table, names none), the
// common case; false: out decides (another session, a fragment, IP
// options, expired, another rule). Any hint is safe, stale or of another kind: the record it
// names is this packet's session exactly when its key is the packet's (a
// table holds one live session a key; a free record's protocol is 0),
// and that the source is NAT'd and this worker owns it is implied by the
// session being in this worker's table. Everything is in wire order (see
// wireKey): the key is compared as the header holds it, both addresses in
// one word, both ports in another, and the checksums are updated without
// swaps.
//
// It reads and writes buf[x:x+fastView], one bounds check: the bytes
// past the transport header it uses may be past the datagram (a short
// UDP one) and are then neither read nor written. The header length says
// the transport header starts at byte 20; that the fields it edits are
// in the datagram is the caller's word (OutFast's: the worker's packets
// are Parse's, TestNATShortDatagram; OutHint's pkt ends the datagram, and
// the view is within it).
func (t *Table) outFast(buf []byte, x int, port int, hint uint64, ttl uint32) bool {
	sid := uint32(hint) - 1 // none: 2^32-1, past any table
	if int(sid) >= len(t.sess) || x < 0 || x > len(buf)-fastView {
		return false
	}
	s := &t.sess[sid]
	h := (*[fastView]byte)(buf[x : x+fastView])
	proto, ports := h[9], le.Uint32(h[ipv4MinHdrLen:]) // a free record's protocol is 0: no TCP or UDP packet matches it
	if le.Uint64(h[12:]) != s.addrs || ports != s.ports || proto != s.proto || h[0] != 0x45 ||
		le.Uint16(h[6:])&fragBitsWire != 0 || proto != protoUDP && proto != protoTCP {
		return false
	}
	age := t.now - s.last
	if age > t.tmin && age > t.timeout(s) {
		return false
	}
	if int(t.lone[s.rule]) != port { // -1 for a rule without a lone port: out matches it
		return false
	}
	if age != 0 { // a clean line costs no write-back when evicted: most packets of a second find it current
		s.last = t.now
	}
	// The address's difference is the session's; the transport's
	// pseudo-header also has the port's (RFC 1624 eqn. 3, one fold each).
	d := uint32(s.dOut)
	le.PutUint32(h[12:], s.out)
	h[8] -= uint8(ttl)
	le.PutUint16(h[ipCsumOff:], ^csum.Fold16(uint32(^le.Uint16(h[ipCsumOff:]))+d+ttl*0xfffe))
	d += csum.Diff16(uint16(ports), s.outPort)
	l := h[ipv4MinHdrLen:]
	if proto == protoTCP {
		le.PutUint16(l[tcpCsumOff:], ^csum.Fold16(uint32(^le.Uint16(l[tcpCsumOff:]))+d))
		if st := s.state | tcpState(l[13], stSynOut, stFinOut); st != s.state {
			s.state = st
		}
	} else if u := le.Uint16(l[udpCsumOff:]); u != 0 {
		u = ^csum.Fold16(uint32(^u) + d)
		if u == 0 {
			u = 0xffff
		}
		le.PutUint16(l[udpCsumOff:], u)
	}
	le.PutUint16(l, s.outPort)
	t.cnt[cOut]++
	return true
}

// out is Out's general path.
func (t *Table) out(pkt []byte, l4 int, port int, hint uint64) (Verdict, int) {
	k := t.k
	if k == nil || len(pkt) < ipv4MinHdrLen {
		return Pass, 0
	}
	src := binary.BigEndian.Uint32(pkt[12:])
	ri := k.match(src, port)
	if ri < 0 {
		return Pass, 0
	}
	if o := t.ownerIn(src); o != t.w {
		return Handoff, o
	}
	proto := pkt[9]
	if binary.BigEndian.Uint16(pkt[6:])&ipv4FragMask != 0 {
		return t.fragOut(pkt, src, proto)
	}
	if l4 < ipv4MinHdrLen || l4+icmpHdrLen > len(pkt) {
		return t.drop(DropUnsupported)
	}
	l := pkt[l4:]
	var ip, rp uint16
	switch proto {
	case protoTCP:
		if len(l) < tcpCsumOff+2 {
			return t.drop(DropMalformed)
		}
		ip, rp = binary.BigEndian.Uint16(l), binary.BigEndian.Uint16(l[2:])
	case protoUDP:
		ip, rp = binary.BigEndian.Uint16(l), binary.BigEndian.Uint16(l[2:])
	case protoICMP:
		switch l[0] {
		case icmpEchoRequest, icmpEchoReply:
			ip = binary.BigEndian.Uint16(l[4:])
		case icmpUnreachable, icmpTimeExceeded, icmpParamProblem, icmpSourceQuench:
			return t.errorOut(pkt, l4)
		default:
			return t.drop(DropUnsupported)
		}
	default:
		return t.drop(DropUnsupported)
	}
	key := skey{src, binary.BigEndian.Uint32(pkt[16:]), ip, rp, proto}
	var sid uint32
	var ok bool
	// Touch's id names the session unless an earlier packet of the batch
	// freed or moved it since: the key and liveness checks catch that.
	if id := uint32(hint); hint&probeSess != 0 && id != 0 && int(id) <= len(t.sess) && t.sess[id-1].key() == key && t.sess[id-1].m != 0 {
		sid, ok = id-1, true
	} else {
		sid, ok = t.findSession(key)
	}
	if ok && (t.expired(&t.sess[sid]) || t.sess[sid].rule != uint8(ri)) {
		t.freeSession(sid)
		t.cnt[cExpired]++
		ok = false
	}
	if !ok {
		mk := mkey{src, ip, proto, uint8(ri)}
		mi, found := t.findMapping(mk)
		if !found {
			var v Verdict
			if mi, v = t.newMapping(mk); v != Done {
				return t.drop(v)
			}
		}
		var v Verdict
		if sid, v = t.newSession(key, mi); v != Done {
			if !found {
				t.unmap(mi)
			}
			return t.drop(v)
		}
	}
	s := &t.sess[sid]
	s.last = t.now
	out, op := s.outside()
	// One difference for the address, folded once into each checksum it
	// is in (the transport's pseudo-header also has the port's).
	d := csum.Diff32(src, out)
	binary.BigEndian.PutUint32(pkt[12:], out)
	csum.FixDiff(pkt[ipCsumOff:], d)
	switch proto {
	case protoTCP:
		csum.FixDiff(l[tcpCsumOff:], d+csum.Diff16(ip, op))
		binary.BigEndian.PutUint16(l, op)
		s.state |= tcpState(l[13], stSynOut, stFinOut)
	case protoUDP:
		if c := l[udpCsumOff:]; binary.BigEndian.Uint16(c) != 0 {
			csum.FixDiff(c, d+csum.Diff16(ip, op))
			if binary.BigEndian.Uint16(c) == 0 {
				binary.BigEndian.PutUint16(c, 0xffff)
			}
		}
		binary.BigEndian.PutUint16(l, op)
	case protoICMP:
		csum.FixDiff(l[icmpCsumOff:], csum.Diff16(ip, op))
		binary.BigEndian.PutUint16(l[4:], op)
	}
	if binary.BigEndian.Uint16(pkt[6:])&ipv4FlagMF != 0 {
		t.record(fragOut, src, key.rem, binary.BigEndian.Uint16(pkt[4:]), proto, out)
	}
	t.cnt[cOut]++
	return Done, 0
}

// In translates an IPv4 packet addressed to an outside address back to the
// inside endpoint (arguments and results as Out). Packets to an outside
// address that are not NAT's (outside the port range, echo requests, the
// excluded port) Pass: they are the appliance's own.
func (t *Table) In(pkt []byte, l4 int) (Verdict, int) {
	k := t.k
	if k == nil || len(pkt) < ipv4MinHdrLen {
		return Pass, 0
	}
	dst := binary.BigEndian.Uint32(pkt[16:])
	oi := k.outsideIndex(dst)
	if oi < 0 {
		return Pass, 0
	}
	proto := pkt[9]
	if binary.BigEndian.Uint16(pkt[6:])&ipv4FragMask != 0 {
		return t.fragIn(pkt, proto)
	}
	if l4 < ipv4MinHdrLen || l4+icmpHdrLen > len(pkt) {
		return Pass, 0
	}
	l := pkt[l4:]
	var op, rp uint16
	switch proto {
	case protoTCP:
		if len(l) < tcpCsumOff+2 {
			return Pass, 0
		}
		op, rp = binary.BigEndian.Uint16(l[2:]), binary.BigEndian.Uint16(l)
	case protoUDP:
		op, rp = binary.BigEndian.Uint16(l[2:]), binary.BigEndian.Uint16(l)
	case protoICMP:
		switch l[0] {
		case icmpEchoReply:
			op = binary.BigEndian.Uint16(l[4:])
		case icmpUnreachable, icmpTimeExceeded, icmpParamProblem, icmpSourceQuench:
			return t.errorIn(pkt, l4, oi)
		default:
			return Pass, 0
		}
	default:
		return Pass, 0
	}
	o := &k.out[oi]
	if op < o.lo || op > o.hi || op == k.cfg.Exclude {
		return Pass, 0
	}
	if own := t.ownerOut(oi, op); own != t.w {
		if binary.BigEndian.Uint16(pkt[6:])&ipv4FlagMF != 0 {
			// The later fragments carry no port: remember where the
			// first went, for them (they tend to arrive on this queue
			// too: RSS hashes fragments by address).
			t.record(fragHand, binary.BigEndian.Uint32(pkt[12:]), dst, binary.BigEndian.Uint16(pkt[4:]), proto, uint32(own))
		}
		return Handoff, own
	}
	mi, ok := t.findOutside(okey{dst, op, proto})
	if !ok {
		return t.drop(DropNoSession)
	}
	src := binary.BigEndian.Uint32(pkt[12:])
	key := skey{t.maps[mi].ik.in, src, t.maps[mi].ik.port, rp, proto}
	sid, ok := t.findSession(key)
	if ok && t.expired(&t.sess[sid]) {
		t.freeSession(sid) // may free the mapping too
		t.cnt[cExpired]++
		if mi, ok = t.findOutside(okey{dst, op, proto}); !ok {
			return t.drop(DropNoSession)
		}
		ok = false
	}
	if !ok {
		if !k.cfg.EndpointIndependentFiltering {
			return t.drop(DropNoSession)
		}
		var v Verdict
		if sid, v = t.newSession(key, mi); v != Done {
			return t.drop(v)
		}
	}
	s := &t.sess[sid]
	s.last = t.now
	sk := s.key()
	in, ip := sk.in, sk.inPort // the mapping's inside endpoint
	d := csum.Diff32(dst, in)
	binary.BigEndian.PutUint32(pkt[16:], in)
	csum.FixDiff(pkt[ipCsumOff:], d)
	switch proto {
	case protoTCP:
		csum.FixDiff(l[tcpCsumOff:], d+csum.Diff16(op, ip))
		binary.BigEndian.PutUint16(l[2:], ip)
		s.state |= tcpState(l[13], stSynIn, stFinIn)
	case protoUDP:
		if c := l[udpCsumOff:]; binary.BigEndian.Uint16(c) != 0 {
			csum.FixDiff(c, d+csum.Diff16(op, ip))
			if binary.BigEndian.Uint16(c) == 0 {
				binary.BigEndian.PutUint16(c, 0xffff)
			}
		}
		binary.BigEndian.PutUint16(l[2:], ip)
	case protoICMP:
		csum.FixDiff(l[icmpCsumOff:], csum.Diff16(op, ip))
		binary.BigEndian.PutUint16(l[4:], ip)
	}
	if binary.BigEndian.Uint16(pkt[6:])&ipv4FlagMF != 0 {
		t.record(fragIn, src, dst, binary.BigEndian.Uint16(pkt[4:]), proto, in)
	}
	t.cnt[cIn]++
	return Done, 0
}

// OutsidePort reports whether dst is an outside address, and its rule's
// egress port: a packet from an inside client to it is hairpinned (Out
// with that port, then In).
func (t *Table) OutsidePort(dst [4]byte) (int, bool) {
	if t.k == nil {
		return 0, false
	}
	return t.k.Outside(dst)
}

func tcpState(flags uint8, syn, fin uint8) uint8 {
	var s uint8
	if flags&tcpSYN != 0 {
		s |= syn
	}
	if flags&tcpFIN != 0 {
		s |= fin
	}
	if flags&tcpRST != 0 {
		s |= stRst
	}
	return s
}

func (t *Table) drop(v Verdict) (Verdict, int) {
	t.cnt[cDrops+int(v)]++
	return v, 0
}

// unmap frees a mapping no session took.
func (t *Table) unmap(mi uint32) {
	m := &t.maps[mi]
	if m.refs != 0 {
		return
	}
	t.midx.remove(hashM(m.ik), mi)
	t.oidx.remove(hashO(m.ok), mi)
	t.unport(m)
	t.mfree = append(t.mfree, mi)
	t.cnt[cMappings]--
}

// quoted returns the header an ICMP error at pkt[l4:] quotes and its
// transport part (RFC 792: the IP header and at least 8 bytes), or false.
func quoted(pkt []byte, l4 int) (q, ql []byte, ok bool) {
	q = pkt[l4+icmpHdrLen:]
	if len(q) < ipv4MinHdrLen || q[0]>>4 != 4 {
		return nil, nil, false
	}
	ihl := int(q[0]&0x0f) * 4
	if ihl < ipv4MinHdrLen || len(q) < ihl+8 || binary.BigEndian.Uint16(q[6:])&ipv4FragMask != 0 {
		return nil, nil, false
	}
	return q, q[ihl:], true
}

// quotedPorts reads the quoted packet's source and destination ports (the
// echo identifier for both, for ICMP echo).
func quotedPorts(q, ql []byte) (sp, dp uint16, ok bool) {
	switch q[9] {
	case protoTCP, protoUDP:
		return binary.BigEndian.Uint16(ql), binary.BigEndian.Uint16(ql[2:]), true
	case protoICMP:
		if ql[0] == icmpEchoRequest || ql[0] == icmpEchoReply {
			return binary.BigEndian.Uint16(ql[4:]), 0, true
		}
	}
	return 0, 0, false
}

// errorIn translates an ICMP error about a packet NAT sent out (RFC 5508
// REQ-3): the quoted packet's source is the mapping; outer destination,
// quoted source and port, and every checksum they are in are rewritten.
func (t *Table) errorIn(pkt []byte, l4, oi int) (Verdict, int) {
	q, ql, ok := quoted(pkt, l4)
	if !ok {
		return Pass, 0
	}
	o := &t.k.out[oi]
	qsrc := binary.BigEndian.Uint32(q[12:])
	sp, dp, ok := quotedPorts(q, ql)
	if !ok || qsrc != o.addr || sp < o.lo || sp > o.hi || sp == t.k.cfg.Exclude {
		return Pass, 0
	}
	if own := t.ownerOut(oi, sp); own != t.w {
		return Handoff, own
	}
	proto := q[9]
	if proto == protoICMP {
		dp = 0
	}
	mi, ok := t.findOutside(okey{qsrc, sp, proto})
	if !ok {
		return t.drop(DropNoSession)
	}
	m := &t.maps[mi]
	sid, ok := t.findSession(skey{m.ik.in, binary.BigEndian.Uint32(q[16:]), m.ik.port, dp, proto})
	if !ok || t.expired(&t.sess[sid]) {
		return t.drop(DropNoSession)
	}
	csum.Set32(pkt[16:], m.ik.in, pkt[ipCsumOff:])
	t.rewriteQuoted(pkt[l4:], q, ql, 12, m.ik.in, 0, m.ik.port)
	t.cnt[cIn]++
	return Done, 0
}

// errorOut translates an ICMP error an inside host sends about a packet
// NAT delivered to it: the quoted destination is the inside endpoint.
func (t *Table) errorOut(pkt []byte, l4 int) (Verdict, int) {
	q, ql, ok := quoted(pkt, l4)
	if !ok {
		return t.drop(DropMalformed)
	}
	sp, dp, ok := quotedPorts(q, ql)
	if !ok {
		return t.drop(DropUnsupported)
	}
	proto := q[9]
	in, rp := dp, sp
	if proto == protoICMP {
		in, rp = sp, 0
	}
	sid, ok := t.findSession(skey{binary.BigEndian.Uint32(q[16:]), binary.BigEndian.Uint32(q[12:]), in, rp, proto})
	if !ok || t.expired(&t.sess[sid]) || binary.BigEndian.Uint32(q[16:]) != binary.BigEndian.Uint32(pkt[12:]) {
		return t.drop(DropNoSession)
	}
	m := &t.maps[t.sess[sid].m-1]
	csum.Set32(pkt[12:], m.ok.out, pkt[ipCsumOff:])
	t.rewriteQuoted(pkt[l4:], q, ql, 16, m.ok.out, 2, m.ok.port)
	t.cnt[cOut]++
	return Done, 0
}

// rewriteQuoted sets the quoted header's address at offset aoff and its
// port at transport offset poff (the echo identifier for ICMP) with the
// quoted checksums, then corrects the ICMP error's own checksum by the
// difference of the edited bytes (RFC 1624 over a range).
func (t *Table) rewriteQuoted(icmp, q, ql []byte, aoff int, addr uint32, poff int, port uint16) {
	ihl := len(q) - len(ql)
	region := q[:min(len(q), ihl+tcpCsumOff+2)]
	before := csum.Sum(0, region)
	old := binary.BigEndian.Uint32(q[aoff:])
	csum.Set32(q[aoff:], addr, q[ipCsumOff:])
	switch q[9] {
	case protoTCP:
		if len(ql) >= tcpCsumOff+2 {
			csum.Fix32(ql[tcpCsumOff:], old, addr)
			csum.Set16(ql[poff:], port, ql[tcpCsumOff:])
		} else {
			binary.BigEndian.PutUint16(ql[poff:], port)
		}
	case protoUDP:
		if binary.BigEndian.Uint16(ql[udpCsumOff:]) != 0 {
			csum.Fix32(ql[udpCsumOff:], old, addr)
			csum.Set16(ql[poff:], port, ql[udpCsumOff:])
		} else {
			binary.BigEndian.PutUint16(ql[poff:], port)
		}
	case protoICMP:
		csum.Set16(ql[4:], port, ql[icmpCsumOff:])
	}
	after := csum.Sum(0, region)
	c := uint32(^binary.BigEndian.Uint16(icmp[icmpCsumOff:])) + uint32(^csum.Fold16(before)) + uint32(csum.Fold16(after))
	binary.BigEndian.PutUint16(icmp[icmpCsumOff:], ^csum.Fold16(c))
}

// ---- fragments ----

// Later fragments carry no ports: the first fragment's translation is
// remembered by (source, destination, IP ID, protocol) in a small
// direct-mapped table (bounded; an overwritten or missing entry drops the
// later fragment, counted as frag_no_state).
const (
	fragSlots = 1024
	fragLife  = 15 // seconds, RFC 791's suggested reassembly timer
	fragOut   = 1
	fragIn    = 2
	fragHand  = 3 // addr is the worker the first fragment was handed to
)

type frag struct {
	src, dst uint32
	id       uint16
	proto    uint8
	dir      uint8
	addr     uint32
	until    uint32
}

func fragSlot(src, dst uint32, id uint16, proto, dir uint8) int {
	return int(mix64(uint64(src)<<32|uint64(dst))^mix32(uint32(id)<<16|uint32(proto)<<8|uint32(dir))) & (fragSlots - 1)
}

func (t *Table) record(dir uint8, src, dst uint32, id uint16, proto uint8, addr uint32) {
	t.frags[fragSlot(src, dst, id, proto, dir)] = frag{src, dst, id, proto, dir, addr, t.now + fragLife}
}

func (t *Table) lookupFrag(dir uint8, src, dst uint32, id uint16, proto uint8) (uint32, bool) {
	f := &t.frags[fragSlot(src, dst, id, proto, dir)]
	if f.dir != dir || f.src != src || f.dst != dst || f.id != id || f.proto != proto || int32(f.until-t.now) < 0 {
		return 0, false
	}
	return f.addr, true
}

func (t *Table) fragOut(pkt []byte, src uint32, proto uint8) (Verdict, int) {
	a, ok := t.lookupFrag(fragOut, src, binary.BigEndian.Uint32(pkt[16:]), binary.BigEndian.Uint16(pkt[4:]), proto)
	if !ok {
		return t.drop(DropFragNoState)
	}
	csum.Set32(pkt[12:], a, pkt[ipCsumOff:])
	t.cnt[cFragOut]++
	return Done, 0
}

func (t *Table) fragIn(pkt []byte, proto uint8) (Verdict, int) {
	src, dst, id := binary.BigEndian.Uint32(pkt[12:]), binary.BigEndian.Uint32(pkt[16:]), binary.BigEndian.Uint16(pkt[4:])
	a, ok := t.lookupFrag(fragIn, src, dst, id, proto)
	if !ok {
		if w, ok := t.lookupFrag(fragHand, src, dst, id, proto); ok {
			return Handoff, int(w)
		}
		return Pass, 0 // may be the appliance's own
	}
	csum.Set32(pkt[16:], a, pkt[ipCsumOff:])
	t.cnt[cFragIn]++
	return Done, 0
}

// Claims reports whether a TCP or UDP packet to an outside address is
// NAT's by its destination port (in the range, not the excluded one): the
// test for hairpinning a packet from an inside client.
func (t *Table) Claims(pkt []byte, l4 int) bool {
	if t.k == nil || len(pkt) < ipv4MinHdrLen || l4 < ipv4MinHdrLen || l4+4 > len(pkt) ||
		pkt[9] != protoTCP && pkt[9] != protoUDP || binary.BigEndian.Uint16(pkt[6:])&ipv4FragMask != 0 {
		return false
	}
	oi := t.k.outsideIndex(binary.BigEndian.Uint32(pkt[16:]))
	if oi < 0 {
		return false
	}
	op, o := binary.BigEndian.Uint16(pkt[l4+2:]), &t.k.out[oi]
	return op >= o.lo && op <= o.hi && op != t.k.cfg.Exclude
}
