package fwd

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/fwd/csum"
	"github.com/ovfwd/ovfwd/fwd/nat"
)

// How a packet entered routeIP.
const (
	rOrigin   = 1 << iota // built or answered by the appliance: no TTL decrement, no ICMP errors about it
	rInner                // came out of the tunnel: may not be decapsulated again
	rNoTunnel             // came out of Encap: may not enter the tunnel again
	rFromPeer             // came out of the tunnel's Decap: a peer sent it (client-to-client policy)
	rParsed               // from a port by way of routeFrame: its bytes are as Parse left them
	rFiltered             // the ACL let it through already (a NAT handoff): not again, its ingress is lost
)

// routeFrame is router mode's entry point for a received Ethernet frame.
func (w *Worker) routeFrame(t *tables, p *Packet) {
	if r := Parse(p); r != DropNone {
		w.drop(p, r)
		return
	}
	if p.Flags&FlagL3Only == 0 { // not a port without a link layer (a TUN-like backend)
		pc := &t.ports[p.InPort]
		if p.Flags&FlagQinQ != 0 || p.VLAN != pc.routerTag {
			w.drop(p, DropVLAN)
			return
		}
		if p.Flags&FlagARP != 0 {
			w.arpInput(t, p)
			return
		}
		// Parse checked the Ethernet header is there; a view of fixed
		// size costs one index check.
		e := (*[ethHdrLen]byte)(p.Buf[p.Off : int(p.Off)+ethHdrLen])
		if e[0]&1 == 0 && !sameMAC((*[6]byte)(e[:6]), &pc.mac) {
			w.drop(p, DropNotForUs)
			return
		}
		if p.Flags&(FlagIPv6|FlagICMP) == FlagIPv6|FlagICMP {
			if ty := p.Data()[p.L4Off]; ty == icmp6NeighborSolicit || ty == icmp6NeighborAdvert {
				w.ndInput(t, p)
				return
			}
		}
		if e[0]&1 != 0 {
			w.punt(p) // IP to a link broadcast/multicast group: the control plane's business
			return
		}
	}
	// Parked, to be looked up with the rest of the batch (fib.go): here,
	// not in a call, as this is every routed packet's path. p points into
	// w.rx, which stays as it is until routePending. Martians first
	// (martian.go), then the tunnel's datagrams (demux.go): one candidate
	// test in line, a call only for a candidate.
	f := &w.fib
	n := f.n
	if p.Flags&FlagIPv4 != 0 {
		h := ip4Hdr(p)
		if c := route4Candidate(t, h); c != 0 {
			if c&candMartian != 0 && martian4(t, h) {
				w.drop(p, DropMartian)
				return
			}
			if c&candDemux != 0 && w.demux4(t, p, h) {
				return
			}
		}
		if n >= f.max {
			w.routeIP(t, p, rParsed)
			return
		}
		f.dst4[f.n4&(MaxBatch-1)] = [4]byte(h[16:20])
		f.n4++
		if w.nat.Active() {
			// NAT's index line loads while the rest of the batch is
			// parsed; in line, as a call of its own costs a frame and
			// the header's re-derivation. Parsed: a TCP or UDP packet
			// has a transport header of 8 bytes or more after its IP
			// header, so nat.PrefetchLen bytes are there.
			var hint uint64
			if p.Flags&(FlagTCP|FlagUDP) != 0 {
				x := int(p.Off) + int(p.L3Off)
				hint = nat.PrefetchIPv4(w.nat, (*[nat.PrefetchLen]byte)(p.Buf[x:x+nat.PrefetchLen]))
			}
			f.natSlot[n&(MaxBatch-1)] = hint
		}
	} else {
		h := ip6Hdr(p)
		if martian6Candidate(t, h) {
			if martian6(t, h) {
				w.drop(p, DropMartian)
				return
			}
		}
		if n >= f.max {
			w.routeIP(t, p, rParsed)
			return
		}
		f.dst6[f.n6&(MaxBatch-1)] = [16]byte(h[24:40])
		f.n6++
		f.natSlot[n&(MaxBatch-1)] = 0
	}
	f.pend[n&(MaxBatch-1)] = p
	f.n = n + 1
}

// routeIP forwards a parsed IP packet (Ethernet or L3-only) by the FIB.
func (w *Worker) routeIP(t *tables, p *Packet, how uint8) {
	d := p.Data()
	l3 := d[p.L3Off:]
	v4 := p.Flags&FlagIPv4 != 0
	var ai uint32
	var ok bool
	if v4 {
		ai, ok = t.v4.Lookup([4]byte(l3[16:20]))
	} else {
		ai, ok = t.v6.Lookup([16]byte(l3[24:40]))
	}
	w.forwardIP(t, p, 0, how, ai, ok)
}

// forwardIP is routeIP once the FIB said adjacency ai (ok) for p; natHint
// is what NAT's Prefetch and Touch found for it (nat.go), or 0. One
// function, not stages in calls: it is every routed packet's path, and a
// call costs the spills of everything live across it (BenchmarkPoll and
// BenchmarkPollNATInstructions count them).
func (w *Worker) forwardIP(t *tables, p *Packet, natHint uint64, how uint8, ai uint32, ok bool) {
	l3 := ip4Hdr(p) // parsed: an IPv4 or IPv6 header is there
	parsed := how&rParsed != 0
	how &^= rParsed
	v4 := p.Flags&FlagIPv4 != 0
	if !ok {
		w.icmpError(t, p, errNoRoute, 0, how)
		w.drop(p, DropNoRoute)
		return
	}
	a := &t.adj[ai]
	switch a.kind {
	case adjLocal:
		if !w.natLocal(t, p, how) {
			w.localInput(t, p, how)
		}
		return
	case adjBlackhole:
		w.drop(p, DropNoRoute)
		return
	}
	if w.acl != nil && how&(rOrigin|rFiltered) == 0 && !w.aclPass(t, p, how) {
		return
	}
	ttl := l3[7] // IPv6 hop limit
	if v4 {
		ttl = l3[8]
	}
	if how&rOrigin == 0 && ttl <= 1 {
		w.icmpError(t, p, errTTL, 0, how)
		w.drop(p, DropTTLExceeded)
		return
	}
	// Before any header edit (MSS clamp, NAT) updates the checksum
	// incrementally: see finishPartialCsum. On a packet as Parse left it,
	// Parse has made its cheap first test (flagPseudoCsum).
	if how&rOrigin == 0 && p.Flags&(FlagTCP|FlagUDP) != 0 && p.Flags&FlagFrag == 0 &&
		(!parsed || p.Flags&flagPseudoCsum != 0) && finishPartialCsum(p) {
		w.cnt[cCsumPartial]++
	}
	if a.kind == adjTunnel {
		if t.tunnel == nil || how&rNoTunnel != 0 {
			w.drop(p, DropTunnel)
			return
		}
		// Peer to peer: the kernel never sees it, so no firewall on the
		// box could stop it; only this flag does (openvpn client-to-client).
		if how&rFromPeer != 0 && !t.clientToClient {
			w.drop(p, DropPeerToPeer)
			return
		}
		w.rewriteL3(p, how)
		toL3Only(p)
		p.Peer = a.peer
		w.toEncap(t, p)
		return
	}
	mtu := t.ports[a.port].mtu
	if a.kind == adjUplink {
		mtu = int(a.mtu)
	}
	if int(p.Len)-int(p.L3Off) > mtu {
		if v4 && binary.BigEndian.Uint16(l3[6:])&ipv4FlagDF == 0 {
			if !w.natOut(p, a, how, natHint) {
				return
			}
			w.rewriteL3(p, how)
			w.fragment4(t, p, a, mtu)
			return
		}
		if !v4 && how&rOrigin != 0 { // IPv6: only the source fragments (RFC 8200 §4.5)
			w.rewriteL3(p, how)
			w.fragment6(t, p, a, mtu)
			return
		}
		w.icmpError(t, p, errTooBig, mtu, how)
		w.drop(p, DropTooBig)
		return
	}
	// rewriteL3, spelled out (a call here costs the spills of everything
	// live across it). With NAT on, its stage (nat.go) does the TTL with
	// the translation: a packet of a session Prefetch and Touch found
	// (natHint: IPv4 only) in one call, anything else in natOutRouted.
	if w.nat.Active() {
		if natHint == 0 || how&rOrigin != 0 || a.kind == adjUplink ||
			!w.nat.OutRouted(p.Buf, int(p.Off)+int(p.L3Off), int(a.port), natHint) {
			if !w.natOutRouted(p, a, how, natHint) {
				return
			}
		}
	} else if how&rOrigin == 0 {
		decHop(l3, v4)
	}
	if w.lim.MSSClamp != 0 && p.Flags&FlagTCP != 0 {
		w.clampMSS(p)
	}
	// nextHop's common case in line, one call fewer per packet.
	if a.kind != adjUplink {
		var k neighWords
		switch {
		case a.kind == adjVia:
			k = wordsOf(&a.via)
		case v4:
			k = key4Words((*[4]byte)(l3[16:20]))
		default:
			k = wordsOf((*[16]byte)(ip6Hdr(p)[24:40]))
		}
		if n := w.cachedNeigh(a.port, k); n != nil {
			if mac := n.ready(w.now, int64(w.lim.NeighProbeBefore)); mac != 0 {
				w.output(t, p, int(a.port), mac)
				return
			}
		}
	}
	w.nextHop(t, p, a)
}

// nextHop resolves the neighbour a packet for adjacency a goes to and
// sends it, or holds it until the neighbour answers.
func (w *Worker) nextHop(t *tables, p *Packet, a *adjacency) {
	if a.kind == adjUplink {
		w.toUplink(p, a)
		return
	}
	v4 := p.Flags&FlagIPv4 != 0
	out := int(a.port)
	var k neighWords
	switch {
	case a.kind == adjVia:
		k = wordsOf(&a.via)
	case v4:
		k = key4Words((*[4]byte)(ip4Hdr(p)[16:20]))
	default:
		k = wordsOf((*[16]byte)(ip6Hdr(p)[24:40]))
	}
	n := w.cachedNeigh(uint16(out), k)
	if n == nil {
		n = w.neighbourFor(uint16(out), k)
	}
	if n == nil {
		key := k.key()
		w.holdPacket(t, p, out, &key, v4)
		return
	}
	mac, exp := n.mac.Load(), n.expires.Load()
	if mac&neighValid == 0 || exp < w.now || !n.confirmed.Load() {
		key := k.key()
		w.holdPacket(t, p, out, &key, v4)
		return
	}
	if exp-w.now < int64(w.lim.NeighProbeBefore) {
		// Refresh a used entry before it expires, once per retransmit interval.
		if at := n.probeAt.Load(); at <= w.now && n.probeAt.CompareAndSwap(at, w.now+int64(w.lim.NeighRetrans)) {
			key := k.key()
			w.solicit(t, out, &key, v4, mac)
		}
	}
	w.output(t, p, out, mac)
}

// rewriteL3 does the per-hop header edits: TTL/hop limit and MSS clamp.
func (w *Worker) rewriteL3(p *Packet, how uint8) {
	if how&rOrigin == 0 {
		decHop(ip4Hdr(p), p.Flags&FlagIPv4 != 0)
	}
	if w.lim.MSSClamp != 0 && p.Flags&FlagTCP != 0 {
		w.clampMSS(p)
	}
}

// decHop takes one off the TTL or hop limit (above 1) of the IP header at
// l3. For IPv4 the checksum update is RFC 1624's eqn. 3 with m' = m -
// 0x100, where ~m + m' is the constant 0xfeff: HC' = HC + 0x100 with the
// end-around carry, never 0xffff (as the kernel's ip_decrease_ttl), and no
// dependence on the old TTL. Small enough to inline in the routed path.
func decHop(h *[ipv4MinHdrLen]byte, v4 bool) {
	if v4 {
		c := uint32(binary.BigEndian.Uint16(h[10:])) + 0x100
		binary.BigEndian.PutUint16(h[10:], uint16(c+(c+1)>>16))
		h[8]--
	} else {
		h[7]-- // the hop limit
	}
}

// toL3Only drops the link-layer header: data then starts at the IP header.
func toL3Only(p *Packet) {
	if p.L4Off != 0 {
		p.L4Off -= p.L3Off
	}
	p.Off += uint16(p.L3Off)
	p.Len -= uint16(p.L3Off)
	p.L3Off = 0
	p.Flags = p.Flags&^(FlagVLAN|FlagQinQ) | FlagL3Only
	p.VLAN = 0
}

// output writes the Ethernet header for port out in front of the IP header
// (reusing the old header's bytes and the headroom; the payload never
// moves) and queues the frame.
func (w *Worker) output(t *tables, p *Packet, out int, mac uint64) {
	pc := &t.ports[out]
	hl := ethHdrLen
	if pc.routerTag != 0 {
		hl += vlanTagLen
	}
	l3 := int(p.Off) + int(p.L3Off)
	s := l3 - hl
	if s < 0 || l3 > len(p.Buf) {
		w.drop(p, DropMalformed) // no headroom: a port broke the Headroom contract
		return
	}
	h := (*[ethHdrLen]byte)(p.Buf[s : s+ethHdrLen]) // fixed-size views: one index check each
	binary.BigEndian.PutUint32(h[0:], uint32(mac>>16))
	binary.BigEndian.PutUint16(h[4:], uint16(mac))
	*(*[6]byte)(h[6:12]) = pc.mac
	et := uint16(etherTypeIPv6)
	if p.Flags&FlagIPv4 != 0 {
		et = etherTypeIPv4
	}
	flags := p.Flags &^ (FlagVLAN | FlagQinQ | FlagL3Only)
	if pc.routerTag != 0 {
		binary.BigEndian.PutUint16(h[12:], etherTypeVLAN)
		tag := (*[vlanTagLen]byte)(p.Buf[s+ethHdrLen : l3])
		binary.BigEndian.PutUint16(tag[0:], pc.routerTag)
		binary.BigEndian.PutUint16(tag[2:], et)
		flags |= FlagVLAN
	} else {
		binary.BigEndian.PutUint16(h[12:], et)
	}
	l4 := p.L4Off
	if l4 != 0 {
		l4 = uint8(int(l4) - int(p.L3Off) + hl)
	}
	n := uint16(int(p.Off) + int(p.Len) - s)
	// The descriptor goes to the TX batch whole, then the fields that
	// change: a few wide moves. Its own fields were last stored when it was
	// received and parsed, before the batch's lookups, so the wide loads
	// do not wait on narrower stores still in flight (no store-to-load
	// forwarding across widths); fragments and ICMP errors, built just
	// before, may, on their slow path.
	if p.Pool == pc.pool {
		b := w.tx[out]
		i := len(b.Pkts)
		b.Pkts = b.Pkts[:i+1] // a full batch is flushed below, so there is room
		q := &b.Pkts[i]
		*q = *p
		q.Flags, q.L4Off, q.Len, q.Off, q.L3Off, q.VLAN, q.OutPort = flags, l4, n, uint16(s), uint8(hl), pc.routerTag, uint16(out)
		if i+1 == cap(b.Pkts) {
			w.flushTx(out)
		}
		return
	}
	p.Flags, p.L4Off, p.Len, p.Off, p.L3Off, p.VLAN = flags, l4, n, uint16(s), uint8(hl), pc.routerTag
	w.send(p, out)
}

// localInput handles a packet addressed to one of our addresses.
func (w *Worker) localInput(t *tables, p *Packet, how uint8) {
	p.Flags |= FlagLocal
	if p.Flags&FlagFrag != 0 {
		// The host stack reassembles (behind an exception TAP; on AF_XDP
		// the steering program passes fragments to it directly). A
		// reassembled VPN datagram comes back through InjectReceived.
		w.cnt[cHostFragments]++
		w.punt(p)
		return
	}
	d := p.Data()
	l3 := d[p.L3Off:]
	switch {
	case p.Flags&FlagICMP != 0:
		icmp := d[p.L4Off:]
		if p.Flags&FlagIPv4 != 0 && icmp[0] == icmpEchoRequest {
			swap4(l3[12:16], l3[16:20])
			old := binary.BigEndian.Uint16(l3[8:])
			l3[8] = defaultHop
			csum.Fix16(l3[10:], old, binary.BigEndian.Uint16(l3[8:]))
			csum.Fix16(icmp[2:], uint16(icmpEchoRequest)<<8|uint16(icmp[1]), uint16(icmpEchoReply)<<8|uint16(icmp[1]))
			icmp[0] = icmpEchoReply
			w.cnt[cReplies]++
			w.routeIP(t, p, rOrigin|how&rNoTunnel)
			return
		}
		if p.Flags&FlagIPv6 != 0 && icmp[0] == icmp6EchoRequest {
			var tmp [16]byte
			copy(tmp[:], l3[8:24])
			copy(l3[8:24], l3[24:40])
			copy(l3[24:40], tmp[:])
			l3[7] = defaultHop
			// Swapping addresses leaves the pseudo-header sum unchanged.
			csum.Fix16(icmp[2:], uint16(icmp6EchoRequest)<<8|uint16(icmp[1]), uint16(icmp6EchoReply)<<8|uint16(icmp[1]))
			icmp[0] = icmp6EchoReply
			w.cnt[cReplies]++
			w.routeIP(t, p, rOrigin|how&rNoTunnel)
			return
		}
	case tunnelData(t, p, how):
		w.toDecap(t, p)
		return
	}
	// The host stack behind an exception TAP takes the frame as a NIC's,
	// so it gets a finished checksum, as a forwarded packet does.
	if p.Flags&(FlagTCP|FlagUDP) != 0 && finishPartialCsum(p) {
		w.cnt[cCsumPartial]++
	}
	w.punt(p)
}

// tunnelData reports whether local packet p is an outer VPN datagram, for
// the tunnel to decrypt: its own checksum is never read after that.
func tunnelData(t *tables, p *Packet, how uint8) bool {
	return p.Flags&FlagUDP != 0 && t.tunnel != nil && how&(rInner|rNoTunnel) == 0 &&
		binary.BigEndian.Uint16(p.Data()[int(p.L4Off)+2:]) == t.tunnelPort
}

// sameMAC compares in place, a word and a half-word: comparing [6]byte
// values copies them to the stack first and reads the copies back.
func sameMAC(a, b *[6]byte) bool {
	return binary.LittleEndian.Uint32(a[:]) == binary.LittleEndian.Uint32(b[:]) &&
		binary.LittleEndian.Uint16(a[4:]) == binary.LittleEndian.Uint16(b[4:])
}

func swap4(a, b []byte) {
	_, _ = a[3], b[3]
	a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3] = b[0], b[1], b[2], b[3], a[0], a[1], a[2], a[3]
}
