package fwd_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

func udp4AtoB(ttl byte) []byte {
	return eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 17, ttl, true, udp(1000, 2000, []byte("hello, router"))))
}

func udp6AtoB(hop byte) []byte {
	return eth(macR0, macA, 0x86dd, ipv6(aV6, bV6, 17, hop, udp(1000, 2000, []byte("hello, router"))))
}

func TestARPResolutionHoldsAndReleases(t *testing.T) {
	r := newRig(t, rigOpt{})
	r.inject(0, udp4AtoB(64))
	r.inject(0, udp4AtoB(64))
	r.poll()
	// One ARP request for B on port 1, nothing else; both packets held.
	req := parseEth(t, r.drainOne(1))
	if req.etype != 0x0806 || !bytes.Equal(req.dst, bcast) || !bytes.Equal(req.src, macR1) {
		t.Fatalf("not a broadcast ARP from port 1: %+v", req)
	}
	a := req.l3
	if binary.BigEndian.Uint16(a[6:]) != 1 || !bytes.Equal(a[8:14], macR1) ||
		netip.AddrFrom4([4]byte(a[14:18])) != r1v4.Addr() || netip.AddrFrom4([4]byte(a[24:28])) != bV4 {
		t.Fatalf("bad ARP request % x", a[:28])
	}
	// B answers: the held packets leave at once, rewritten.
	r.inject(1, eth(macR1, macB, 0x0806, arp(2, macB, bV4, macR1, r1v4.Addr())))
	r.poll()
	out := r.drain(1)
	if len(out) != 2 {
		t.Fatalf("released %d packets, want 2", len(out))
	}
	for _, f := range out {
		p := parseEth(t, f)
		if !bytes.Equal(p.dst, macB) || !bytes.Equal(p.src, macR1) || p.etype != 0x0800 {
			t.Fatalf("bad L2 header % x", f[:14])
		}
		hdr, l4 := checkIPv4(t, p.l3)
		if hdr[8] != 63 {
			t.Fatalf("TTL %d, want 63", hdr[8])
		}
		if !bytes.HasSuffix(l4, []byte("hello, router")) {
			t.Fatalf("payload changed")
		}
	}
	// The control plane learns B and reports it.
	r.e.Service()
	ev := r.e.Events(nil)
	if len(ev) != 1 || ev[0].Kind != fwd.EventNeighbourLearned || ev[0].Addr != bV4 || ev[0].Port != 1 || !bytes.Equal(ev[0].MAC[:], macB) {
		t.Fatalf("events %+v", ev)
	}
	// Now traffic flows without another request.
	r.inject(0, udp4AtoB(64))
	r.poll()
	if p := parseEth(t, r.drainOne(1)); p.etype != 0x0800 {
		t.Fatalf("expected the IPv4 packet, got etype %#x", p.etype)
	}
	// After the reachable time without confirmation the entry expires.
	r.advance(31 * time.Second)
	r.e.Service()
	ev = r.e.Events(nil)
	if len(ev) != 1 || ev[0].Kind != fwd.EventNeighbourExpired || ev[0].Addr != bV4 {
		t.Fatalf("events after expiry %+v", ev)
	}
	r.checkNoLeak()
}

func TestUnresolvedNeighbourGivesUp(t *testing.T) {
	r := newRig(t, rigOpt{cfg: fwd.Config{NeighHold: 2}})
	must(t, r.e.SetNeighbour(0, aV4, macA))
	for range 3 {
		r.inject(0, udp4AtoB(64))
	}
	r.poll()
	if got := r.drops(fwd.DropNeighbourFull); got != 1 {
		t.Fatalf("neighbour_full drops %d, want 1 (hold is 2)", got)
	}
	if n := len(r.drain(1)); n != 1 {
		t.Fatalf("%d ARP requests, want 1", n)
	}
	for i := range 2 { // two retransmissions, one per second
		r.advance(time.Second)
		r.poll()
		if n := len(r.drain(1)); n != 1 {
			t.Fatalf("retransmit %d: %d frames", i, n)
		}
	}
	r.advance(time.Second)
	r.poll()
	r.expectNone(1)
	if got := r.drops(fwd.DropNeighbourFail); got != 2 {
		t.Fatalf("neighbour_fail drops %d, want 2", got)
	}
	// Each sender hears host unreachable, quoting its datagram's header.
	errs := r.drain(0)
	if len(errs) != 2 {
		t.Fatalf("%d ICMP errors, want 2", len(errs))
	}
	for _, f := range errs {
		_, icmp := checkIPv4(t, parseEth(t, f).l3)
		if icmp[0] != 3 || icmp[1] != 1 || netip.AddrFrom4([4]byte(icmp[8+16:8+20])) != bV4 {
			t.Fatalf("want host unreachable about B, got % x", icmp[:28])
		}
	}
	r.checkNoLeak()
}

func TestNDResolutionHoldsAndReleases(t *testing.T) {
	r := newRig(t, rigOpt{})
	r.inject(0, udp6AtoB(64))
	r.poll()
	ns := parseEth(t, r.drainOne(1))
	want := []byte{0x33, 0x33, 0xff, 0, 0, 0x20}
	if ns.etype != 0x86dd || !bytes.Equal(ns.dst, want) {
		t.Fatalf("NS to %v etype %#x", ns.dst, ns.etype)
	}
	hdr, icmp := checkIPv6(t, ns.l3)
	if hdr[7] != 255 || netip.AddrFrom16([16]byte(hdr[24:40])) != solicitedNode(bV6) ||
		netip.AddrFrom16([16]byte(hdr[8:24])) != r1v6.Addr() {
		t.Fatalf("bad NS IPv6 header % x", hdr)
	}
	if icmp[0] != 135 || netip.AddrFrom16([16]byte(icmp[8:24])) != bV6 || icmp[24] != 1 || !bytes.Equal(icmp[26:32], macR1) {
		t.Fatalf("bad NS % x", icmp)
	}
	r.inject(1, eth(macR1, macB, 0x86dd, ipv6(bV6, r1v6.Addr(), 58, 255, nd(136, bV6, macB))))
	r.poll()
	p := parseEth(t, r.drainOne(1))
	if !bytes.Equal(p.dst, macB) || !bytes.Equal(p.src, macR1) {
		t.Fatalf("bad L2 header")
	}
	if hdr, _ := checkIPv6(t, p.l3); hdr[7] != 63 {
		t.Fatalf("hop limit %d", hdr[7])
	}
	r.e.Service()
	if ev := r.e.Events(nil); len(ev) != 1 || ev[0].Addr != bV6 {
		t.Fatalf("events %+v", ev)
	}
	r.checkNoLeak()
}

func TestAnswersARPAndNSForOwnAddresses(t *testing.T) {
	r := newRig(t, rigOpt{})
	r.inject(0, eth(bcast, macA, 0x0806, arp(1, macA, aV4, make([]byte, 6), r0v4.Addr())))
	r.poll()
	rep := parseEth(t, r.drainOne(0))
	a := rep.l3
	if !bytes.Equal(rep.dst, macA) || binary.BigEndian.Uint16(a[6:]) != 2 || !bytes.Equal(a[8:14], macR0) ||
		netip.AddrFrom4([4]byte(a[14:18])) != r0v4.Addr() || !bytes.Equal(a[18:24], macA) ||
		netip.AddrFrom4([4]byte(a[24:28])) != aV4 {
		t.Fatalf("bad ARP reply % x", a[:28])
	}
	// Not for us: no answer, counted.
	r.inject(0, eth(bcast, macA, 0x0806, arp(1, macA, aV4, make([]byte, 6), netip.MustParseAddr("198.18.0.99"))))
	r.poll()
	r.expectNone(0)
	if r.drops(fwd.DropNotForUs) != 1 {
		t.Fatal("ARP for another host not counted")
	}
	// Neighbour solicitation for our IPv6 address.
	r.inject(0, eth([]byte{0x33, 0x33, 0xff, 0, 0, 1}, macA, 0x86dd,
		ipv6(aV6, solicitedNode(r0v6.Addr()), 58, 255, nd(135, r0v6.Addr(), macA))))
	r.poll()
	na := parseEth(t, r.drainOne(0))
	hdr, icmp := checkIPv6(t, na.l3)
	if !bytes.Equal(na.dst, macA) || hdr[7] != 255 || netip.AddrFrom16([16]byte(hdr[8:24])) != r0v6.Addr() ||
		netip.AddrFrom16([16]byte(hdr[24:40])) != aV6 {
		t.Fatalf("bad NA header % x", hdr)
	}
	if icmp[0] != 136 || icmp[4]&0x40 == 0 || netip.AddrFrom16([16]byte(icmp[8:24])) != r0v6.Addr() ||
		icmp[24] != 2 || !bytes.Equal(icmp[26:32], macR0) {
		t.Fatalf("bad NA % x", icmp)
	}
	// An NS with a hop limit other than 255 is forged (RFC 4861 §7.1.1).
	r.inject(0, eth([]byte{0x33, 0x33, 0xff, 0, 0, 1}, macA, 0x86dd,
		ipv6(aV6, solicitedNode(r0v6.Addr()), 58, 64, nd(135, r0v6.Addr(), macA))))
	r.poll()
	r.expectNone(0)
	if r.drops(fwd.DropMalformed) != 1 {
		t.Fatal("NS with hop limit 64 not dropped as malformed")
	}
	// Both requesters were learned.
	r.e.Service()
	if n := len(r.e.Neighbours()); n != 2 {
		t.Fatalf("%d neighbours learned, want 2", n)
	}
	r.checkNoLeak()
}

func TestEchoReplies(t *testing.T) {
	r := newRig(t, rigOpt{})
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(0, aV6, macA))
	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, r0v4.Addr(), 1, 5, false, icmpEcho(8, 7, 1, []byte("ping")))))
	r.inject(0, eth(macR0, macA, 0x86dd, ipv6(aV6, r0v6.Addr(), 58, 5, icmpEcho(128, 7, 1, []byte("ping6")))))
	r.poll()
	out := r.drain(0)
	if len(out) != 2 {
		t.Fatalf("%d replies", len(out))
	}
	p := parseEth(t, out[0])
	hdr, icmp := checkIPv4(t, p.l3)
	if !bytes.Equal(p.dst, macA) || icmp[0] != 0 || netip.AddrFrom4([4]byte(hdr[16:20])) != aV4 ||
		netip.AddrFrom4([4]byte(hdr[12:16])) != r0v4.Addr() || !bytes.HasSuffix(icmp, []byte("ping")) {
		t.Fatalf("bad echo reply % x", p.l3)
	}
	p = parseEth(t, out[1])
	hdr, icmp = checkIPv6(t, p.l3)
	if icmp[0] != 129 || netip.AddrFrom16([16]byte(hdr[24:40])) != aV6 || !bytes.HasSuffix(icmp, []byte("ping6")) {
		t.Fatalf("bad echo6 reply % x", p.l3)
	}
	r.checkNoLeak()
}

func TestTTLExpiredSendsTimeExceeded(t *testing.T) {
	r := newRig(t, rigOpt{})
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(0, aV6, macA))
	orig4 := udp4AtoB(1)
	r.inject(0, orig4)
	r.poll()
	p := parseEth(t, r.drainOne(0))
	hdr, icmp := checkIPv4(t, p.l3)
	if !bytes.Equal(p.dst, macA) || hdr[9] != 1 || netip.AddrFrom4([4]byte(hdr[12:16])) != r0v4.Addr() ||
		netip.AddrFrom4([4]byte(hdr[16:20])) != aV4 {
		t.Fatalf("bad ICMP IPv4 header % x", hdr)
	}
	if icmp[0] != 11 || icmp[1] != 0 {
		t.Fatalf("ICMP type/code %d/%d, want 11/0", icmp[0], icmp[1])
	}
	// The quote is the offending datagram as received, from its IP header.
	if !bytes.Equal(icmp[8:], orig4[14:]) {
		t.Fatalf("quote % x\nwant  % x", icmp[8:], orig4[14:])
	}
	r.expectNone(1)

	orig6 := udp6AtoB(1)
	r.inject(0, orig6)
	r.poll()
	p = parseEth(t, r.drainOne(0))
	hdr, icmp = checkIPv6(t, p.l3)
	if hdr[6] != 58 || icmp[0] != 3 || icmp[1] != 0 || netip.AddrFrom16([16]byte(hdr[24:40])) != aV6 ||
		!bytes.Equal(icmp[8:], orig6[14:]) {
		t.Fatalf("bad ICMPv6 time exceeded % x", p.l3)
	}
	if got := r.drops(fwd.DropTTLExceeded); got != 2 {
		t.Fatalf("ttl_exceeded drops %d", got)
	}
	if s := r.e.Stats(); s.ICMPSent != 2 {
		t.Fatalf("ICMPSent %d", s.ICMPSent)
	}
	r.checkNoLeak()
}

func TestMTUOverflowSendsFragNeededAndPacketTooBig(t *testing.T) {
	r := newRig(t, rigOpt{mtu: []int{1500, 1280}})
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(0, aV6, macA))
	must(t, r.e.SetNeighbour(1, bV4, macB))
	must(t, r.e.SetNeighbour(1, bV6, macB))
	big := make([]byte, 1400)
	orig := eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 17, 64, true, udp(1, 2, big)))
	r.inject(0, orig)
	r.poll()
	r.expectNone(1)
	p := parseEth(t, r.drainOne(0))
	hdr, icmp := checkIPv4(t, p.l3)
	if icmp[0] != 3 || icmp[1] != 4 || binary.BigEndian.Uint16(icmp[6:]) != 1280 {
		t.Fatalf("want frag needed with MTU 1280, got % x", icmp[:8])
	}
	if n := int(binary.BigEndian.Uint16(hdr[2:])); n != 576 || !bytes.Equal(icmp[8:], orig[14:14+548]) {
		t.Fatalf("ICMP length %d (want 576) or quote wrong", n)
	}

	orig6 := eth(macR0, macA, 0x86dd, ipv6(aV6, bV6, 17, 64, udp(1, 2, big)))
	r.inject(0, orig6)
	r.poll()
	r.expectNone(1)
	p = parseEth(t, r.drainOne(0))
	hdr, icmp = checkIPv6(t, p.l3)
	if icmp[0] != 2 || binary.BigEndian.Uint32(icmp[4:]) != 1280 {
		t.Fatalf("want packet too big with MTU 1280, got % x", icmp[:8])
	}
	if len(hdr)+len(icmp) != 1280 || !bytes.Equal(icmp[8:], orig6[14:14+1280-48]) {
		t.Fatalf("ICMPv6 error is %d bytes (want 1280) or quote wrong", len(hdr)+len(icmp))
	}
	// A packet that fits passes.
	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 17, 64, true, udp(1, 2, big[:1200]))))
	r.poll()
	r.drainOne(1)
	if got := r.drops(fwd.DropTooBig); got != 2 {
		t.Fatalf("too_big drops %d", got)
	}
	r.checkNoLeak()
}

func TestNoRouteSendsUnreachable(t *testing.T) {
	r := newRig(t, rigOpt{})
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(0, aV6, macA))
	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, netip.MustParseAddr("198.19.9.9"), 17, 64, false, udp(1, 2, nil))))
	r.inject(0, eth(macR0, macA, 0x86dd, ipv6(aV6, netip.MustParseAddr("2001:db8:99::1"), 17, 64, udp(1, 2, nil))))
	r.poll()
	out := r.drain(0)
	if len(out) != 2 {
		t.Fatalf("%d errors", len(out))
	}
	if _, icmp := checkIPv4(t, parseEth(t, out[0]).l3); icmp[0] != 3 || icmp[1] != 0 {
		t.Fatalf("want net unreachable, got %d/%d", icmp[0], icmp[1])
	}
	if _, icmp := checkIPv6(t, parseEth(t, out[1]).l3); icmp[0] != 1 || icmp[1] != 0 {
		t.Fatalf("want ICMPv6 no route, got %d/%d", icmp[0], icmp[1])
	}
	// A static route fixes it; deleting it breaks it again.
	dst := netip.MustParsePrefix("198.19.9.0/24")
	must(t, r.e.AddRoute(dst, fwd.NextHop{Port: 1, Via: bV4}))
	must(t, r.e.SetNeighbour(1, bV4, macB))
	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, netip.MustParseAddr("198.19.9.9"), 17, 64, false, udp(1, 2, nil))))
	r.poll()
	if p := parseEth(t, r.drainOne(1)); !bytes.Equal(p.dst, macB) {
		t.Fatalf("routed via %v, want B", p.dst)
	}
	must(t, r.e.DeleteRoute(dst))
	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, netip.MustParseAddr("198.19.9.9"), 17, 64, false, udp(1, 2, nil))))
	r.poll()
	r.expectNone(1)
	if got := r.drops(fwd.DropNoRoute); got != 3 {
		t.Fatalf("no_route drops %d", got)
	}
	r.checkNoLeak()
}

func TestICMPRateLimit(t *testing.T) {
	r := newRig(t, rigOpt{cfg: fwd.Config{ICMPRate: 1, ICMPBurst: 2}})
	must(t, r.e.SetNeighbour(0, aV4, macA))
	for range 4 {
		r.inject(0, udp4AtoB(1))
	}
	r.poll()
	if n := len(r.drain(0)); n != 2 {
		t.Fatalf("%d ICMP errors in a burst of 4 with bucket 2", n)
	}
	r.advance(time.Second)
	r.inject(0, udp4AtoB(1))
	r.inject(0, udp4AtoB(1))
	r.poll()
	if n := len(r.drain(0)); n != 1 {
		t.Fatalf("%d ICMP errors after 1 s at 1/s", n)
	}
	if s := r.e.Stats(); s.ICMPLimited != 3 || s.Drops[fwd.DropTTLExceeded] != 6 {
		t.Fatalf("limited %d, ttl drops %d", s.ICMPLimited, s.Drops[fwd.DropTTLExceeded])
	}
	r.checkNoLeak()
}

func TestMSSClamp(t *testing.T) {
	for _, pad := range []int{0, 1} { // aligned and misaligned MSS value
		r := newRig(t, rigOpt{cfg: fwd.Config{MSSClamp: 1360}})
		must(t, r.e.SetNeighbour(1, bV4, macB))
		must(t, r.e.SetNeighbour(1, bV6, macB))
		r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 6, 64, true, tcpSYN(40000, 443, 1460, pad))))
		r.inject(0, eth(macR0, macA, 0x86dd, ipv6(aV6, bV6, 6, 64, tcpSYN(40000, 443, 1440, pad))))
		r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 6, 64, true, tcpSYN(40000, 443, 1200, pad))))
		r.poll()
		out := r.drain(1)
		if len(out) != 3 {
			t.Fatalf("pad %d: %d frames", pad, len(out))
		}
		for i, want := range []uint16{1360, 1340, 1200} {
			p := parseEth(t, out[i])
			var tcp []byte
			if p.etype == 0x0800 {
				_, tcp = checkIPv4(t, p.l3) // verifies the TCP checksum
			} else {
				_, tcp = checkIPv6(t, p.l3)
			}
			if got := binary.BigEndian.Uint16(tcp[20+pad+2:]); got != want {
				t.Fatalf("pad %d frame %d: MSS %d, want %d", pad, i, got, want)
			}
		}
		if s := r.e.Stats(); s.Clamped != 2 {
			t.Fatalf("clamped %d", s.Clamped)
		}
		r.checkNoLeak()
	}
}

func TestCrossPoolForwardCopies(t *testing.T) {
	r := newRig(t, rigOpt{separate: true})
	must(t, r.e.SetNeighbour(1, bV4, macB))
	r.inject(0, udp4AtoB(64))
	r.poll()
	p := parseEth(t, r.drainOne(1))
	if _, l4 := checkIPv4(t, p.l3); !bytes.HasSuffix(l4, []byte("hello, router")) {
		t.Fatal("payload lost in the copy")
	}
	if s := r.e.Stats(); s.Copies != 1 || s.Ports[0].RxPackets != 1 || s.Ports[1].TxPackets != 1 {
		t.Fatalf("stats %+v", s)
	}
	r.checkNoLeak()
	// Same pool: no copy.
	r = newRig(t, rigOpt{})
	must(t, r.e.SetNeighbour(1, bV4, macB))
	r.inject(0, udp4AtoB(64))
	r.poll()
	r.drainOne(1)
	if s := r.e.Stats(); s.Copies != 0 {
		t.Fatalf("copies %d on a shared pool", s.Copies)
	}
}

func TestRouterVLANAndMalformedDrops(t *testing.T) {
	r := newRig(t, rigOpt{})
	must(t, r.e.SetPortVLAN(1, fwd.PortVLAN{Tagged: []uint16{42}}))
	must(t, r.e.SetNeighbour(1, bV4, macB))
	r.inject(0, udp4AtoB(64))
	r.poll()
	if p := parseEth(t, r.drainOne(1)); p.vlan != 42 || p.etype != 0x0800 {
		t.Fatalf("egress VLAN %d etype %#x, want 42/IPv4", p.vlan, p.etype)
	}
	// Untagged frame on a tagged router port, and a wrong tag.
	r.inject(1, eth(macR1, macB, 0x0800, ipv4(bV4, aV4, 17, 64, false, udp(1, 2, nil))))
	r.inject(1, ethVLAN(macR1, macB, 7, 0x0800, ipv4(bV4, aV4, 17, 64, false, udp(1, 2, nil))))
	good := udp4AtoB(64)
	badSum := append([]byte{}, good...)
	badSum[14+10] ^= 0xff
	badLen := append([]byte{}, good...)
	binary.BigEndian.PutUint16(badLen[14+2:], 2000)
	r.inject(0, badSum)
	r.inject(0, badLen)
	r.inject(0, good[:20])
	r.inject(0, eth(macR0, macA, 0x88cc, make([]byte, 46))) // LLDP
	r.inject(0, eth(macC, macA, 0x0800, ipv4(aV4, bV4, 17, 64, false, udp(1, 2, nil))))
	r.poll()
	r.expectNone(1)
	r.expectNone(0)
	want := map[fwd.DropReason]uint64{fwd.DropVLAN: 2, fwd.DropMalformed: 3, fwd.DropUnsupported: 1, fwd.DropNotForUs: 1}
	s := r.e.Stats()
	for reason, n := range want {
		if s.Drops[reason] != n {
			t.Errorf("%v drops %d, want %d", reason, s.Drops[reason], n)
		}
	}
	r.checkNoLeak()
}

func TestIPv4FragmentsWithoutDF(t *testing.T) {
	r := newRig(t, rigOpt{mtu: []int{1500, 576}, separate: true})
	must(t, r.e.SetNeighbour(1, bV4, macB))
	payload := make([]byte, 1400)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	orig := ipv4(aV4, bV4, 17, 64, false, udp(1, 2, payload))
	// Give the original a copied option (type 0x82 "security", len 4) and a
	// non-copied one (record route 0x07, len 4) to check option copying.
	withOpts := append(append(append([]byte{}, orig[:20]...), 0x82, 4, 0, 0, 0x07, 4, 0, 0), orig[20:]...)
	withOpts[0] = 0x47
	binary.BigEndian.PutUint16(withOpts[2:], uint16(len(withOpts)))
	withOpts[10], withOpts[11] = 0, 0
	binary.BigEndian.PutUint16(withOpts[10:], csum(withOpts[:28], 0))
	r.inject(0, eth(macR0, macA, 0x0800, withOpts))
	r.poll()
	frags := r.drain(1)
	if len(frags) != 3 {
		t.Fatalf("%d fragments, want 3", len(frags))
	}
	got := make([]byte, len(withOpts)-28)
	seen := 0
	sawFirst := false
	for _, f := range frags {
		p := parseEth(t, f)
		if !bytes.Equal(p.dst, macB) {
			t.Fatal("fragment not sent to B")
		}
		ihl := int(p.l3[0]&15) * 4
		if csum(p.l3[:ihl], 0) != 0 {
			t.Fatal("bad fragment header checksum")
		}
		n := int(binary.BigEndian.Uint16(p.l3[2:]))
		if n > 576 || p.l3[8] != 63 {
			t.Fatalf("fragment of %d bytes (MTU 576) TTL %d", n, p.l3[8])
		}
		fo := binary.BigEndian.Uint16(p.l3[6:])
		off := int(fo&0x1fff) * 8
		if off == 0 {
			sawFirst = true
			if ihl != 28 {
				t.Fatalf("first fragment header %d bytes, want all options (28)", ihl)
			}
		} else if ihl != 24 || p.l3[20] != 0x82 {
			t.Fatalf("later fragment header %d bytes % x: want only the copied option", ihl, p.l3[20:ihl])
		}
		last := off+n-ihl == len(got)
		if (fo&0x2000 != 0) == last {
			t.Fatalf("MF flag wrong at offset %d", off)
		}
		copy(got[off:], p.l3[ihl:n])
		seen += n - ihl
	}
	if !sawFirst || seen != len(got) || !bytes.Equal(got, withOpts[28:]) {
		t.Fatal("fragments do not reassemble to the original datagram")
	}
	if s := r.e.Stats(); s.Fragmented != 1 || s.Copies != 1 {
		t.Fatalf("fragmented %d copies %d (only the first fragment crosses pools)", s.Fragmented, s.Copies)
	}
	r.checkNoLeak()
}
