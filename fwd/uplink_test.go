package fwd_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

var (
	siteB4 = netip.MustParsePrefix("198.18.64.0/20")
	siteB6 = netip.MustParsePrefix("2001:db8:64::/48")
	hostB4 = netip.MustParseAddr("198.18.64.5")
	hostB6 = netip.MustParseAddr("2001:db8:64::5")
)

type uplinked struct {
	id uint16
	ip []byte
}

func (r *rig) uplinked() []uplinked {
	var out []uplinked
	r.e.Uplinked(func(id uint16, ip []byte) { out = append(out, uplinked{id, append([]byte(nil), ip...)}) })
	return out
}

func uplinkRig(t *testing.T, mtu int) *rig {
	r := newRig(t, rigOpt{})
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(0, aV6, macA))
	nh := fwd.NextHop{Uplink: true, UplinkID: 3, UplinkMTU: mtu}
	must(t, r.e.AddRoute(siteB4, nh))
	must(t, r.e.AddRoute(siteB6, nh))
	return r
}

// A routed packet reaches the uplink's ring as its IP packet, TTL
// decremented; what the uplink injects back is routed out of a port.
func TestUplinkRoutesAndReturns(t *testing.T) {
	r := uplinkRig(t, 1400)
	for _, tc := range []struct {
		name     string
		out, ret []byte
		ttlOff   int
	}{
		{"ipv4", ipv4(aV4, hostB4, 17, 64, true, udp(1000, 53, []byte("to site b"))),
			ipv4(hostB4, aV4, 17, 60, true, udp(53, 1000, []byte("from site b"))), 8},
		{"ipv6", ipv6(aV6, hostB6, 17, 64, udp(1000, 53, []byte("to site b"))),
			ipv6(hostB6, aV6, 17, 60, udp(53, 1000, []byte("from site b"))), 7},
	} {
		et := uint16(0x0800)
		if tc.ttlOff == 7 {
			et = 0x86dd
		}
		r.inject(0, eth(macR0, macA, et, tc.out))
		r.poll()
		r.expectNone(0)
		r.expectNone(1)
		got := r.uplinked()
		if len(got) != 1 || got[0].id != 3 {
			t.Fatalf("%s: uplinked %d packets (want 1 for uplink 3): %+v", tc.name, len(got), got)
		}
		ip := got[0].ip
		if et == 0x0800 {
			checkIPv4(t, ip)
		} else {
			checkIPv6(t, ip)
		}
		if ip[tc.ttlOff] != 63 || !bytes.Equal(ip[tc.ttlOff+1:tc.ttlOff+2], tc.out[tc.ttlOff+1:tc.ttlOff+2]) ||
			!bytes.Equal(ip[20:], tc.out[20:]) {
			t.Fatalf("%s: uplinked packet % x, sent % x", tc.name, ip, tc.out)
		}

		must(t, r.e.InjectIP(tc.ret))
		r.poll()
		p := parseEth(t, r.drainOne(0))
		if !bytes.Equal(p.dst, macA) || !bytes.Equal(p.src, macR0) || p.etype != et {
			t.Fatalf("%s: returned frame to %v from %v type %#x", tc.name, p.dst, p.src, p.etype)
		}
		if et == 0x0800 {
			checkIPv4(t, p.l3)
		} else {
			checkIPv6(t, p.l3)
		}
		if p.l3[tc.ttlOff] != 59 || !bytes.Equal(p.l3[20:], tc.ret[20:]) {
			t.Fatalf("%s: returned packet % x, injected % x", tc.name, p.l3, tc.ret)
		}
	}
	if s := r.e.Stats(); s.Uplinked != 2 {
		t.Fatalf("Uplinked counter %d, want 2", s.Uplinked)
	}
	r.checkNoLeak()
}

// Over the uplink's MTU: IPv4 without DF is fragmented onto the ring,
// IPv4 with DF and IPv6 get ICMP "too big" naming the uplink's MTU.
func TestUplinkMTU(t *testing.T) {
	r := uplinkRig(t, 1300)
	big := make([]byte, 1400)
	for i := range big {
		big[i] = byte(i)
	}
	orig := ipv4(aV4, hostB4, 17, 64, false, udp(1, 2, big))
	r.inject(0, eth(macR0, macA, 0x0800, orig))
	r.poll()
	got := r.uplinked()
	if len(got) != 2 {
		t.Fatalf("%d fragments on the uplink, want 2", len(got))
	}
	// The engine sends the later fragments first.
	slices.SortFunc(got, func(a, b uplinked) int {
		return int(binary.BigEndian.Uint16(a.ip[6:])&0x1fff) - int(binary.BigEndian.Uint16(b.ip[6:])&0x1fff)
	})
	var payload []byte
	for i, f := range got {
		hdr, data := checkIPv4FragHeader(t, f.ip)
		if len(f.ip) > 1300 {
			t.Fatalf("fragment %d is %d bytes, over the uplink MTU", i, len(f.ip))
		}
		off := int(binary.BigEndian.Uint16(hdr[6:])&0x1fff) * 8
		if off != len(payload) {
			t.Fatalf("fragment %d at offset %d, want %d", i, off, len(payload))
		}
		payload = append(payload, data...)
	}
	if !bytes.Equal(payload, orig[20:]) {
		t.Fatal("fragments do not reassemble to the datagram")
	}

	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, hostB4, 17, 64, true, udp(1, 2, big))))
	r.poll()
	p := parseEth(t, r.drainOne(0))
	_, icmp := checkIPv4(t, p.l3)
	if icmp[0] != 3 || icmp[1] != 4 || binary.BigEndian.Uint16(icmp[6:]) != 1300 {
		t.Fatalf("want frag needed with MTU 1300, got % x", icmp[:8])
	}
	r.inject(0, eth(macR0, macA, 0x86dd, ipv6(aV6, hostB6, 17, 64, udp(1, 2, big))))
	r.poll()
	p = parseEth(t, r.drainOne(0))
	_, icmp = checkIPv6(t, p.l3)
	if icmp[0] != 2 || binary.BigEndian.Uint32(icmp[4:]) != 1300 {
		t.Fatalf("want packet too big with MTU 1300, got % x", icmp[:8])
	}
	if n := len(r.uplinked()); n != 0 {
		t.Fatalf("%d oversized packets reached the uplink", n)
	}
	if d := r.drops(fwd.DropTooBig); d != 2 {
		t.Fatalf("too_big drops %d, want 2", d)
	}
	r.checkNoLeak()
}

func checkIPv4FragHeader(t *testing.T, ip []byte) (hdr, data []byte) {
	t.Helper()
	if ip[0] != 0x45 || csum(ip[:20], 0) != 0 || int(binary.BigEndian.Uint16(ip[2:])) != len(ip) {
		t.Fatalf("bad fragment header % x", ip[:20])
	}
	return ip[:20], ip[20:]
}

// A control plane that stops draining loses packets, counted, and no
// buffer.
func TestUplinkRingFullCountsDrops(t *testing.T) {
	r := newRig(t, rigOpt{poolBufs: 2048})
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.AddRoute(siteB4, fwd.NextHop{Uplink: true, UplinkID: 1, UplinkMTU: 1500}))
	frame := eth(macR0, macA, 0x0800, ipv4(aV4, hostB4, 17, 64, true, udp(1, 2, []byte("x"))))
	const sent = fwd.UplinkRingSlots + 100
	for i := 0; i < sent; i += 50 {
		for range min(50, sent-i) {
			r.inject(0, frame)
		}
		r.poll()
	}
	if d := r.drops(fwd.DropUplinkFull); d != 100 {
		t.Fatalf("uplink_full drops %d, want 100", d)
	}
	if n := len(r.uplinked()); n != fwd.UplinkRingSlots {
		t.Fatalf("drained %d, want %d", n, fwd.UplinkRingSlots)
	}
	r.checkNoLeak()
}

func TestUplinkRouteChecks(t *testing.T) {
	r := newRig(t, rigOpt{})
	for _, mtu := range []int{0, 1279, fwd.MaxUplinkPacket + 1} {
		if err := r.e.AddRoute(siteB4, fwd.NextHop{Uplink: true, UplinkMTU: mtu}); err == nil {
			t.Errorf("uplink MTU %d accepted", mtu)
		}
	}
}

// InjectIP refuses what is not IP; a malformed IP packet is dropped and
// counted by the worker.
func TestInjectIPBadPackets(t *testing.T) {
	r := newRig(t, rigOpt{})
	for _, b := range [][]byte{nil, make([]byte, 19), append([]byte{0x55}, make([]byte, 40)...), make([]byte, fwd.MaxUplinkPacket+1)} {
		if err := r.e.InjectIP(b); !errors.Is(err, fwd.ErrUplinkPacket) {
			t.Errorf("InjectIP(%d bytes) = %v", len(b), err)
		}
	}
	bad := ipv4(hostB4, aV4, 17, 64, true, udp(1, 2, nil))
	bad[0] = 0x4f // header longer than the packet
	must(t, r.e.InjectIP(bad))
	r.poll()
	r.expectNone(0)
	if d := r.drops(fwd.DropMalformed); d != 1 {
		t.Fatalf("malformed drops %d, want 1", d)
	}
	r.checkNoLeak()
}

// What an uplink injects may go on into the server's tunnel.
func TestInjectIPIntoTunnel(t *testing.T) {
	r := newRig(t, rigOpt{})
	client := netip.MustParseAddr("198.19.0.5")
	ft := &fakeTunnel{server: r0v4.Addr(), peers: map[uint32]netip.Addr{7: aV4}}
	r.e.SetTunnel(ft, 1194)
	must(t, r.e.AddRoute(netip.MustParsePrefix("198.19.0.0/24"), fwd.NextHop{Tunnel: true, Peer: 7}))
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.InjectIP(ipv4(hostB4, client, 17, 64, true, udp(53, 1000, []byte("hello")))))
	r.poll()
	if len(ft.encapCalls) != 1 {
		t.Fatalf("encap calls %v, want one", ft.encapCalls)
	}
	p := parseEth(t, r.drainOne(0))
	_, l4 := checkIPv4(t, p.l3)
	if binary.BigEndian.Uint16(l4[2:]) != 5000 {
		t.Fatalf("outer packet to port %d", binary.BigEndian.Uint16(l4[2:]))
	}
	r.checkNoLeak()
}

// The worker's side of an uplink, both ways, allocates nothing.
func TestUplinkZeroAllocs(t *testing.T) {
	r := uplinkRig(t, 1400)
	frame := eth(macR0, macA, 0x0800, ipv4(aV4, hostB4, 17, 64, true, udp(1, 2, make([]byte, 100))))
	ret := ipv4(hostB4, aV4, 17, 64, true, udp(2, 1, make([]byte, 100)))
	r.ports[0].SetSink(0, true)
	n := 0
	count := func(uint16, []byte) { n++ }
	r.poll()
	if a := testing.AllocsPerRun(200, func() {
		r.inject(0, frame)
		if err := r.e.InjectIP(ret); err != nil {
			t.Fatal(err)
		}
		r.w.Poll()
		r.e.Uplinked(count)
	}); a != 0 {
		t.Fatalf("%v allocs per packet each way", a)
	}
	if n < 200 || r.e.InjectStats().Sent < 200 {
		t.Fatalf("uplinked %d, injected %d; want ≥ 200 each", n, r.e.InjectStats().Sent)
	}
}
