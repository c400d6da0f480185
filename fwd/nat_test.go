package fwd_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/nat"
	"github.com/ovfwd/ovfwd/fwd/porttest"
)

// NAT rig: port 0 is the inside (198.18.0.0/24), port 1 the outside with
// outside address r1v4 (198.18.1.1); B (198.18.1.20) is "the internet".
var (
	cV4    = netip.MustParseAddr("198.18.0.11")
	inside = netip.MustParsePrefix("198.18.0.0/24")
)

func natConfig(eif bool) nat.Config {
	return nat.Config{
		Rules: []nat.Rule{{Name: "in", Sources: []netip.Prefix{inside}, Port: 1,
			Outside: []netip.Addr{r1v4.Addr()}, PortLo: 1024, PortHi: 32767}},
		MaxSessions: 1 << 17, BlockSize: 256, MaxBlocks: 4, EndpointIndependentFiltering: eif,
	}
}

func setNAT(t testing.TB, e *fwd.Engine, c nat.Config) {
	t.Helper()
	k, err := nat.Compile(c)
	must(t, err)
	e.SetNAT(k)
}

func natRig(t testing.TB, eif bool) *rig {
	r := newRig(t, rigOpt{})
	must(t, r.e.SetNeighbour(1, bV4, macB))
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(0, cV4, macC))
	setNAT(t, r.e, natConfig(eif))
	return r
}

func udpFrame(srcMAC, dstMAC net.HardwareAddr, src, dst netip.Addr, sp, dp uint16, payload string) []byte {
	return eth(dstMAC, srcMAC, 0x0800, ipv4(src, dst, 17, 64, true, udp(sp, dp, []byte(payload))))
}

// l4ports returns a checked IPv4 frame's addresses and transport ports.
func l4ports(t testing.TB, f []byte) (src, dst netip.Addr, sp, dp uint16) {
	t.Helper()
	hdr, l4 := checkIPv4(t, parseEth(t, f).l3)
	return netip.AddrFrom4([4]byte(hdr[12:16])), netip.AddrFrom4([4]byte(hdr[16:20])),
		binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
}

func TestNATRoundTrip(t *testing.T) {
	r := natRig(t, false)
	r.inject(0, udpFrame(macA, macR0, aV4, bV4, 5000, 53, "query"))
	r.poll()
	src, dst, sp, dp := l4ports(t, r.drainOne(1))
	if src != r1v4.Addr() || dst != bV4 || sp < 1024 || sp > 32767 || dp != 53 {
		t.Fatalf("left as %v:%d -> %v:%d", src, sp, dst, dp)
	}
	r.inject(1, udpFrame(macB, macR1, bV4, r1v4.Addr(), 53, sp, "answer"))
	r.poll()
	src, dst, sp2, dp2 := l4ports(t, r.drainOne(0))
	if src != bV4 || dst != aV4 || sp2 != 53 || dp2 != 5000 {
		t.Fatalf("returned as %v:%d -> %v:%d", src, sp2, dst, dp2)
	}
	// A stranger to the same outside port is filtered and counted.
	r.inject(1, udpFrame(macB, macR1, netip.MustParseAddr("198.18.1.30"), r1v4.Addr(), 53, sp, "x"))
	r.poll()
	r.expectNone(0)
	if r.drops(fwd.DropNAT) != 1 || r.e.NATStats().Drops[nat.DropNoSession] != 1 {
		t.Fatalf("filtered packet: drops %d, nat %+v", r.drops(fwd.DropNAT), r.e.NATStats())
	}
	// Traffic to the outside address outside the NAT range is ours (echo).
	r.inject(1, eth(macR1, macB, 0x0800, ipv4(bV4, r1v4.Addr(), 1, 64, false, icmpEcho(8, 77, 1, nil))))
	r.poll()
	if _, l4 := checkIPv4(t, parseEth(t, r.drainOne(1)).l3); l4[0] != 0 {
		t.Fatal("no echo reply from the outside address")
	}
	var evs []nat.Event
	r.e.NATEvents(func(e nat.Event) { evs = append(evs, e) })
	if len(evs) != 1 || !evs[0].Alloc || evs[0].Inside != aV4 || evs[0].Outside != r1v4.Addr() {
		t.Fatalf("events %+v", evs)
	}
	r.checkNoLeak()
}

// A packet too big for the egress MTU gets its ICMP error quoting what the
// client sent (untranslated); the TTL error likewise.
func TestNATErrorsQuoteTheOriginal(t *testing.T) {
	r := natRig(t, false)
	r.inject(0, udpFrame(macA, macR0, aV4, bV4, 5000, 53, string(make([]byte, 1600))))
	r.poll()
	f := r.drainOne(0)
	_, l4 := checkIPv4(t, parseEth(t, f).l3)
	q := l4[8:]
	if l4[0] != 3 || l4[1] != 4 || netip.AddrFrom4([4]byte(q[12:16])) != aV4 || binary.BigEndian.Uint16(q[20:]) != 5000 {
		t.Fatalf("frag-needed quotes % x", q[:24])
	}
	r.checkNoLeak()
}

// RFC 4787 REQ-9: a client reaches another client's mapping on the
// outside address; the packet arrives from the sender's mapping.
func TestNATHairpin(t *testing.T) {
	r := natRig(t, true)
	r.inject(0, udpFrame(macC, macR0, cV4, bV4, 6000, 3478, "stun"))
	r.inject(0, udpFrame(macA, macR0, aV4, bV4, 5000, 3478, "stun"))
	r.poll()
	out := r.drain(1)
	if len(out) != 2 {
		t.Fatalf("%d frames out", len(out))
	}
	_, _, cPort, _ := l4ports(t, out[0])
	_, _, aPort, _ := l4ports(t, out[1])
	r.inject(0, udpFrame(macA, macR0, aV4, r1v4.Addr(), 5000, cPort, "hello C"))
	r.poll()
	src, dst, sp, dp := l4ports(t, r.drainOne(0))
	if src != r1v4.Addr() || sp != aPort || dst != cV4 || dp != 6000 {
		t.Fatalf("hairpinned as %v:%d -> %v:%d (A's mapping %d)", src, sp, dst, dp, aPort)
	}
	if r.e.NATStats().Hairpinned != 1 {
		t.Fatal("hairpin not counted")
	}
	r.checkNoLeak()
}

// Two queues: whichever queue a packet arrives on, the worker owning the
// flow translates it.
func TestNATTwoWorkers(t *testing.T) {
	pool := porttest.NewPool(1, 1024, 0)
	p0 := porttest.New("p0", macR0, 1500, 2, pool)
	p1 := porttest.New("p1", macR1, 1500, 2, pool)
	now := int64(time.Hour)
	e, err := fwd.New(fwd.Config{Now: func() int64 { return now }}, []fwd.Port{p0, p1})
	must(t, err)
	must(t, e.AddAddress(0, r0v4))
	must(t, e.AddAddress(1, r1v4))
	must(t, e.SetNeighbour(1, bV4, macB))
	for i := range 40 {
		must(t, e.SetNeighbour(0, netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)}), macA))
	}
	setNAT(t, e, natConfig(false))
	ws := e.Workers()
	pollAll := func() {
		for range 2 { // a handed-off packet is routed on the owner's next poll
			for _, w := range ws {
				w.Poll()
			}
		}
	}
	drain := func(p *porttest.Port) (f [][]byte) {
		return append(p.Drain(0), p.Drain(1)...)
	}
	// 40 clients, each sending on queue 0 and queue 1 alternately, with the
	// same source port: 40 distinct mappings, one per client whatever the queue.
	mapped := map[uint16]netip.Addr{}
	for i := range 40 {
		a := netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)})
		for q := range 2 {
			p0.Inject(q, udpFrame(macA, macR0, a, bV4, 5000, 53, "q"))
			pollAll()
			f := drain(p1)
			if len(f) != 1 {
				t.Fatalf("client %v queue %d: %d frames out; stats %+v nat %+v", a, q, len(f), e.Stats(), e.NATStats())
			}
			_, _, sp, _ := l4ports(t, f[0])
			if prev, ok := mapped[sp]; ok && prev != a {
				t.Fatalf("port %d mapped to %v and %v", sp, prev, a)
			}
			mapped[sp] = a
		}
	}
	if len(mapped) != 40 {
		t.Fatalf("%d mappings for 40 clients", len(mapped))
	}
	// Returns on both queues reach the right client.
	for sp, a := range mapped {
		for q := range 2 {
			p1.Inject(q, udpFrame(macB, macR1, bV4, r1v4.Addr(), 53, sp, "a"))
			pollAll()
			f := drain(p0)
			if len(f) != 1 {
				t.Fatalf("return to %d on queue %d: %d frames", sp, q, len(f))
			}
			if _, dst, _, dp := l4ports(t, f[0]); dst != a || dp != 5000 {
				t.Fatalf("return to %d went to %v:%d, want %v:5000", sp, dst, dp, a)
			}
		}
	}
	if s := e.Stats(); s.Handoffs == 0 || s.Drops[fwd.DropHandoffFull] != 0 {
		t.Fatalf("handoffs %d, full %d", s.Handoffs, s.Drops[fwd.DropHandoffFull])
	}
	if s := e.NATStats(); s.Mappings != 40 || s.Sessions[nat.SessionsUDP] != 40 {
		t.Fatalf("nat stats %+v", s)
	}
}

// Reload: the same rule keeps its sessions; NAT off stops translating.
func TestNATReload(t *testing.T) {
	r := natRig(t, false)
	r.inject(0, udpFrame(macA, macR0, aV4, bV4, 5000, 53, "q"))
	r.poll()
	_, _, sp, _ := l4ports(t, r.drainOne(1))
	setNAT(t, r.e, natConfig(false)) // same rules, new pointer
	r.poll()
	r.inject(1, udpFrame(macB, macR1, bV4, r1v4.Addr(), 53, sp, "a"))
	r.poll()
	r.drainOne(0)
	r.e.SetNAT(nil)
	r.inject(0, udpFrame(macA, macR0, aV4, bV4, 5000, 53, "q"))
	r.poll()
	if src, _, _, _ := l4ports(t, r.drainOne(1)); src != aV4 {
		t.Fatalf("NAT off, left from %v", src)
	}
	r.checkNoLeak()
}

// FuzzRouterNAT feeds arbitrary frames, from the inside or the outside,
// through the router with NAT on and live sessions: no panic, no leaked
// buffer, and what leaves has valid checksums.
func FuzzRouterNAT(f *testing.F) {
	f.Add(udpFrame(macA, macR0, aV4, bV4, 5000, 53, "q"), false)
	f.Add(udpFrame(macB, macR1, bV4, r1v4.Addr(), 53, 1024, "a"), true)
	f.Add(eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 1, 2, false, icmpEcho(8, 9, 1, nil))), false)
	f.Add(eth(macR1, macB, 0x0800, ipv4(bV4, r1v4.Addr(), 1, 64, false, icmpEcho(0, 1024, 1, nil))), true)
	f.Add(eth(macR0, macA, 0x0800, ipv4(aV4, r1v4.Addr(), 17, 64, false, udp(5000, 1025, nil))), false)
	f.Fuzz(func(t *testing.T, frame []byte, outside bool) {
		if len(frame) > 2048 {
			return
		}
		frame = append([]byte(nil), frame...)
		port, mac := 0, macR0
		if outside {
			port, mac = 1, macR1
		}
		if len(frame) >= 14 {
			copy(frame, mac)
		}
		if len(frame) >= 34 && binary.BigEndian.Uint16(frame[12:]) == 0x0800 {
			if ihl := int(frame[14]&15) * 4; ihl >= 20 && 14+ihl <= len(frame) {
				frame[24], frame[25] = 0, 0
				binary.BigEndian.PutUint16(frame[24:], csum(frame[14:14+ihl], 0))
			}
		}
		r := newRig(t, rigOpt{poolBufs: 64, cfg: fwd.Config{MSSClamp: 1200}})
		must(t, r.e.SetNeighbour(1, bV4, macB))
		must(t, r.e.SetNeighbour(0, aV4, macA))
		c := natConfig(len(frame)%2 == 0)
		c.MaxSessions = 256
		setNAT(t, r.e, c)
		r.inject(0, udpFrame(macA, macR0, aV4, bV4, 5000, 53, "q"))
		r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 1, 64, false, icmpEcho(8, 9, 1, nil))))
		r.poll()
		r.drain(1)
		r.inject(port, frame)
		r.poll()
		r.e.Service()
		r.e.Punts(func(int, []byte) {})
		if len(frame) >= 14 && validIPv4(frame[14:]) {
			// A packet whose checksums were right leaves with right ones
			// (translated or not); ICMP errors about it are built whole.
			for i := range 2 {
				for _, f := range r.drain(i) {
					if p := parseEth(t, f); p.etype == 0x0800 {
						checkIPv4(t, p.l3)
					}
				}
			}
		}
		for range 6 {
			r.advance(time.Second)
			r.poll()
		}
		r.checkNoLeak()
	})
}

// validIPv4 reports whether b is an unfragmented IPv4 datagram whose
// header and transport checksums are right.
func validIPv4(b []byte) bool {
	if len(b) < 20 || b[0]>>4 != 4 {
		return false
	}
	ihl, n := int(b[0]&15)*4, int(binary.BigEndian.Uint16(b[2:]))
	if ihl < 20 || n < ihl || n > len(b) || csum(b[:ihl], 0) != 0 || binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
		return false
	}
	l4 := b[ihl:n]
	switch b[9] {
	case 1:
		return csum(l4, 0) == 0
	case 6, 17:
		if b[9] == 17 && len(l4) >= 8 && binary.BigEndian.Uint16(l4[6:]) == 0 {
			return false // no checksum: nothing to keep right
		}
		return csum(l4, pseudo(b[12:16], b[16:20], b[9], len(l4))) == 0
	}
	return true
}

// A UDP datagram in fragments: the first fragment's UDP length covers the
// whole datagram, more than the fragment holds; it is forwarded and
// translated, and so is the later fragment (by IP ID).
func TestNATFragmentedUDP(t *testing.T) {
	r := natRig(t, false)
	payload := make([]byte, 40)
	for i := range payload {
		payload[i] = byte(i)
	}
	whole := ipv4(aV4, bV4, 17, 64, false, udp(5000, 53, payload)) // 20 + 48 bytes
	first := append([]byte(nil), whole[:20+24]...)
	later := append(append([]byte(nil), whole[:20]...), whole[20+24:]...)
	fix := func(h []byte, fo uint16) {
		binary.BigEndian.PutUint16(h[2:], uint16(len(h)))
		binary.BigEndian.PutUint16(h[6:], fo)
		h[10], h[11] = 0, 0
		binary.BigEndian.PutUint16(h[10:], csum(h[:20], 0))
	}
	fix(first, 0x2000) // MF
	fix(later, 24/8)   // offset 24
	r.inject(0, eth(macR0, macA, 0x0800, first))
	r.inject(0, eth(macR0, macA, 0x0800, later))
	r.poll()
	out := r.drain(1)
	if len(out) != 2 {
		t.Fatalf("%d fragments forwarded, want 2 (drops: malformed %d, nat %d)", len(out), r.drops(fwd.DropMalformed), r.drops(fwd.DropNAT))
	}
	var re []byte
	for i, f := range out {
		ip := parseEth(t, f).l3
		if csum(ip[:20], 0) != 0 || netip.AddrFrom4([4]byte(ip[12:16])) != r1v4.Addr() {
			t.Fatalf("fragment %d: bad header or source % x", i, ip[:20])
		}
		re = append(re, ip[20:]...)
	}
	// Reassembled, the UDP checksum verifies with the outside address.
	if csum(re, pseudo(r1v4.Addr().AsSlice(), bV4.AsSlice(), 17, len(re))) != 0 {
		t.Fatal("reassembled UDP checksum wrong")
	}
	if s := r.e.NATStats(); s.FragmentsOut != 1 {
		t.Fatalf("later fragments translated: %d", s.FragmentsOut)
	}
}

// Hosts that offload checksums send TCP/UDP with only the pseudo-header
// sum in the field: it is finished before NAT updates it, both ways.
func TestNATPartialChecksums(t *testing.T) {
	r := natRig(t, false)
	r.inject(0, eth(macR0, macA, 0x0800, partial(ipv4(aV4, bV4, 17, 64, true, udp(5000, 53, []byte("query"))))))
	r.poll()
	_, _, sp, _ := l4ports(t, r.drainOne(1)) // checks the UDP checksum
	r.inject(1, eth(macR1, macB, 0x0800, partial(ipv4(bV4, r1v4.Addr(), 6, 64, true, tcpSeg(80, sp, []byte("x"))))))
	r.inject(1, eth(macR1, macB, 0x0800, partial(ipv4(bV4, r1v4.Addr(), 17, 64, true, udp(53, sp, []byte("answer"))))))
	r.poll()
	f := r.drainOne(0) // the TCP one has no session: dropped
	if _, dst, _, dp := l4ports(t, f); dst != aV4 || dp != 5000 {
		t.Fatalf("answer to %v:%d", dst, dp)
	}
}

// TestNATPartialChecksumsEveryPath: an unfinished checksum is finished
// before every NAT rewrite of it, TCP and UDP: out (a flow's first packet
// through NAT's general hook, the next ones through the routed fast path,
// OutRouted), in (the reverse translation of replies from a host that
// offloads its checksums) and hairpinned (both translations in one pass).
// Each packet leaves with a checksum that verifies, and each is counted.
func TestNATPartialChecksumsEveryPath(t *testing.T) {
	r := natRig(t, true) // endpoint-independent filtering: A may reach C's mapping
	payload := make([]byte, 333)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	want := uint64(0)
	for _, proto := range []byte{6, 17} {
		seg := func(sp, dp uint16) []byte {
			if proto == 6 {
				return tcpSeg(sp, dp, payload)
			}
			return udp(sp, dp, payload)
		}
		aSrc, cSrc := 5000+uint16(proto), 6000+uint16(proto)
		var aPort uint16
		for i := range 3 {
			r.inject(0, eth(macR0, macA, 0x0800, partial(ipv4(aV4, bV4, proto, 64, true, seg(aSrc, 80)))))
			r.poll()
			src, _, sp, _ := l4ports(t, r.drainOne(1)) // checks the checksum
			if src != r1v4.Addr() || i > 0 && sp != aPort {
				t.Fatalf("proto %d out %d: left as %v:%d (mapping %d)", proto, i, src, sp, aPort)
			}
			aPort = sp
		}
		for i := range 3 {
			r.inject(1, eth(macR1, macB, 0x0800, partial(ipv4(bV4, r1v4.Addr(), proto, 64, true, seg(80, aPort)))))
			r.poll()
			if _, dst, _, dp := l4ports(t, r.drainOne(0)); dst != aV4 || dp != aSrc {
				t.Fatalf("proto %d in %d: returned to %v:%d", proto, i, dst, dp)
			}
		}
		r.inject(0, eth(macR0, macC, 0x0800, ipv4(cV4, bV4, proto, 64, true, seg(cSrc, 80))))
		r.poll()
		_, _, cPort, _ := l4ports(t, r.drainOne(1))
		r.inject(0, eth(macR0, macA, 0x0800, partial(ipv4(aV4, r1v4.Addr(), proto, 64, true, seg(aSrc, cPort)))))
		r.poll()
		if src, dst, sp, dp := l4ports(t, r.drainOne(0)); src != r1v4.Addr() || sp != aPort || dst != cV4 || dp != cSrc {
			t.Fatalf("proto %d hairpinned as %v:%d -> %v:%d", proto, src, sp, dst, dp)
		}
		want += 7
	}
	if got := r.e.Stats().CsumPartial; got != want {
		t.Fatalf("csum_partial %d, want %d", got, want)
	}
	r.checkNoLeak()
}

// TestNATTTLOnce: every packet of a flow leaves translated with its TTL one
// lower and its checksums right — the first through NAT's general hook,
// the rest through the fast path that folds the TTL into NAT's checksum
// update (nat.Table.OutRouted) — never decremented twice or not at all.
func TestNATTTLOnce(t *testing.T) {
	r := natRig(t, false)
	for i := range 4 {
		r.inject(0, udpFrame(macA, macR0, aV4, bV4, 5000, 53, "query"))
		r.poll()
		f := r.drainOne(1)
		hdr, _ := checkIPv4(t, parseEth(t, f).l3)
		if src, _, _, _ := l4ports(t, f); src != r1v4.Addr() {
			t.Fatalf("packet %d left untranslated (source %v)", i, src)
		}
		if hdr[8] != 63 {
			t.Fatalf("packet %d left with TTL %d, want 63", i, hdr[8])
		}
	}
	if s := r.e.NATStats(); s.SessionsCreated != 1 {
		t.Fatalf("sessions created %d, want 1", s.SessionsCreated)
	}
	r.checkNoLeak()
}

// TestNATLeavesVPNDatagramsChecksums: with NAT on, a VPN datagram for the
// tunnel (a client that offloads its checksums sends it unfinished) is
// not summed nor counted as csum_partial: NAT passes it, the tunnel
// decrypts it, and its outer checksum is never read. Before, natLocal
// finished every local TCP/UDP packet: one pass over each datagram, and
// a csum_partial count that no longer meant forwarded packets.
func TestNATLeavesVPNDatagramsChecksums(t *testing.T) {
	r := natRig(t, false)
	ft := &fakeTunnel{server: r0v4.Addr(), peers: map[uint32]netip.Addr{7: aV4},
		peerOfOuter: map[netip.Addr]uint32{aV4: 7}}
	r.e.SetTunnel(ft, 1194)
	inner := ipv4(netip.MustParseAddr("198.19.0.5"), bV4, 17, 64, false, udp(3333, 53, []byte("inner query")))
	r.inject(0, eth(macR0, macA, 0x0800, partial(ipv4(aV4, r0v4.Addr(), 17, 64, false, udp(5000, 1194, inner)))))
	r.poll()
	if len(ft.decapCalls) != 1 {
		t.Fatalf("decap calls %v, want 1", ft.decapCalls)
	}
	if n := r.e.Stats().CsumPartial; n != 0 {
		t.Fatalf("csum_partial %d for a VPN datagram, want 0", n)
	}
}

// TestNATShortDatagram: a datagram of an established flow too short for
// its transport header never reaches NAT's fast path, which edits the
// transport header's fields without checking the datagram's length
// (nat.Table.OutFast): the parser drops it as malformed, and nothing is
// translated or sent.
func TestNATShortDatagram(t *testing.T) {
	r := natRig(t, false)
	syn := ipv4(aV4, bV4, 6, 64, true, tcpSYN(40000, 80, 1460, 0))
	r.inject(0, eth(macR0, macA, 0x0800, syn))
	r.inject(0, udpFrame(macA, macR0, aV4, bV4, 5000, 53, "query"))
	r.poll()
	if n := len(r.drain(1)); n != 2 {
		t.Fatalf("%d frames out, want 2", n)
	}
	before, malformed := r.e.NATStats().Translated, r.drops(fwd.DropMalformed)
	pad := bytes.Repeat([]byte{0xee}, 40) // the frame goes on past the datagram
	for _, short := range [][]byte{
		ipv4(aV4, bV4, 17, 64, true, udp(5000, 53, nil)[:6]),         // the UDP checksum cut off
		ipv4(aV4, bV4, 6, 64, true, tcpSYN(40000, 80, 1460, 0)[:17]), // the TCP checksum cut in half
	} {
		r.inject(0, eth(macR0, macA, 0x0800, append(short, pad...)))
		r.poll()
		r.expectNone(1)
	}
	if n := r.e.NATStats().Translated - before; n != 0 {
		t.Fatalf("%d short datagrams translated", n)
	}
	if n := r.drops(fwd.DropMalformed) - malformed; n != 2 {
		t.Fatalf("%d dropped as malformed, want 2", n)
	}
	r.checkNoLeak()
}

// dropsNamed reads an engine drop counter by name (zero on a tree
// without the reason, so the test reads the same there).
func dropsNamed(r *rig, name string) uint64 {
	s := r.e.Stats()
	for i := range s.Drops {
		if fwd.DropReason(i).String() == name {
			return s.Drops[i]
		}
	}
	return 0
}

// A VPN client's pool address (routed into the tunnel) arriving from a
// LAN port is someone else using it: it is not translated, gets no port
// block, and is counted (tunnel_source). The same source out of the
// tunnel is translated.
func TestNATPoolSourceFromPortDropped(t *testing.T) {
	r := natRig(t, false)
	pool := netip.MustParsePrefix("198.19.0.0/24")
	c := natConfig(false)
	c.Rules[0].Sources = append(c.Rules[0].Sources, pool)
	setNAT(t, r.e, c)
	ft := &fakeTunnel{server: r0v4.Addr(), peers: map[uint32]netip.Addr{7: aV4}, peerOfOuter: map[netip.Addr]uint32{aV4: 7}}
	r.e.SetTunnel(ft, 1194)
	must(t, r.e.AddRoute(pool, fwd.NextHop{Tunnel: true, Peer: 7}))
	client := netip.MustParseAddr("198.19.0.5")
	for i := range 5 {
		r.inject(0, udpFrame(macC, macR0, client, bV4, uint16(5000+i), 53, "spoofed"))
	}
	r.poll()
	r.expectNone(1)
	if s := r.e.NATStats(); s.SessionsCreated != 0 || s.BlocksAllocated != 0 {
		t.Fatalf("a pool source from the LAN was translated: %+v", s)
	}
	if got := dropsNamed(r, "tunnel_source"); got != 5 {
		t.Fatalf("tunnel_source drops %d, want 5", got)
	}
	inner := ipv4(client, bV4, 17, 64, false, udp(5000, 53, []byte("from the client")))
	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, r0v4.Addr(), 17, 64, false, udp(5000, 1194, inner))))
	r.poll()
	if src, _, _, _ := l4ports(t, r.drainOne(1)); src != r1v4.Addr() {
		t.Fatalf("the client's own packet left from %v", src)
	}
}

// A departing client's NAT state ends on every worker before the
// address is reused: ReleaseNATClient's done turns true once the worker
// polled, the sessions and blocks are gone, a block release is logged,
// and another inside host keeps its flows.
func TestReleaseNATClient(t *testing.T) {
	r := natRig(t, false)
	for i := range 3 {
		r.inject(0, udpFrame(macA, macR0, aV4, bV4, uint16(5000+i), 53, "q"))
	}
	r.inject(0, udpFrame(macC, macR0, cV4, bV4, 6000, 53, "q"))
	r.poll()
	if n := len(r.drain(1)); n != 4 {
		t.Fatalf("%d translated", n)
	}
	r.e.NATEvents(func(nat.Event) {})
	done := r.e.ReleaseNATClient(aV4)
	if done() {
		t.Fatal("done before any worker polled")
	}
	r.poll()
	if !done() {
		t.Fatal("not done after a poll")
	}
	r.poll()
	s := r.e.NATStats()
	if s.Sessions[nat.SessionsUDP] != 1 || s.SessionsReleased != 3 || s.Clients != 1 {
		t.Fatalf("after the release: %+v", s)
	}
	var rel []nat.Event
	r.e.NATEvents(func(e nat.Event) { rel = append(rel, e) })
	if len(rel) != 1 || rel[0].Alloc || rel[0].Inside != aV4 {
		t.Fatalf("events %+v, want aV4's block release", rel)
	}
	if !r.e.ReleaseNATClient(netip.MustParseAddr("2001:db8::1"))() {
		t.Fatal("an IPv6 address has no NAT state to wait for")
	}
}
