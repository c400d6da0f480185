package fwd_test

import (
	"net/netip"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// martianRig routes everything by default routes out of port 1 to a
// resolved gateway, so a packet the engine does not drop leaves at once.
func martianRig(t *testing.T) *rig {
	r := newRig(t, rigOpt{})
	must(t, r.e.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), fwd.NextHop{Port: 1, Via: bV4}))
	must(t, r.e.AddRoute(netip.MustParsePrefix("::/0"), fwd.NextHop{Port: 1, Via: bV6}))
	must(t, r.e.SetNeighbour(1, bV4, macB))
	must(t, r.e.SetNeighbour(1, bV6, macB))
	return r
}

// Every martian class (martian.go), as a unicast frame to the router's
// MAC from a LAN host: dropped and counted, nothing forwarded; the same
// frames with ordinary addresses are forwarded.
func TestMartiansDropped(t *testing.T) {
	a4, a6 := netip.MustParseAddr, netip.MustParseAddr
	good4, good6 := a4("198.51.100.7"), a6("2001:db8:5::7")
	cases := []struct {
		name     string
		src, dst netip.Addr
	}{
		{"v4 dst limited broadcast", aV4, a4("255.255.255.255")},
		{"v4 dst multicast", aV4, a4("224.0.0.251")},
		{"v4 dst multicast top", aV4, a4("239.255.255.250")},
		{"v4 dst loopback", aV4, a4("127.0.0.1")},
		{"v4 dst this network", aV4, a4("0.1.2.3")},
		{"v4 src loopback", a4("127.0.0.1"), good4},
		{"v4 src this network", a4("0.0.0.0"), good4},
		{"v4 src multicast", a4("224.0.0.5"), good4},
		{"v4 src limited broadcast", a4("255.255.255.255"), good4},
		{"v4 src our address", r0v4.Addr(), good4},
		{"v4 src our other port's address", r1v4.Addr(), good4},
		{"v6 src link-local", a6("fe80::a"), good6},
		{"v6 dst link-local", aV6, a6("fe80::b")},
		{"v6 dst multicast", aV6, a6("ff0e::1")},
		{"v6 dst loopback", aV6, a6("::1")},
		{"v6 src loopback", a6("::1"), good6},
		{"v6 src unspecified", a6("::"), good6},
		{"v6 dst unspecified", aV6, a6("::")},
		{"v6 src multicast", a6("ff02::1"), good6},
	}
	frame := func(src, dst netip.Addr) []byte {
		if src.Is4() {
			return eth(macR0, macA, 0x0800, ipv4(src, dst, 17, 64, true, udp(1000, 2000, []byte("martian"))))
		}
		return eth(macR0, macA, 0x86dd, ipv6(src, dst, 17, 64, udp(1000, 2000, []byte("martian"))))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := martianRig(t)
			if c.src.Is4() {
				r.inject(0, frame(aV4, good4))
			} else {
				r.inject(0, frame(aV6, good6))
			}
			r.poll()
			if n := len(r.drain(1)); n != 1 {
				t.Fatalf("control: %d frames forwarded, want 1", n)
			}
			for range 3 {
				r.inject(0, frame(c.src, c.dst))
			}
			r.poll()
			if out := r.drain(1); len(out) != 0 {
				t.Fatalf("%v -> %v forwarded (%d frames)", c.src, c.dst, len(out))
			}
			if got := r.drops(fwd.DropMartian); got != 3 {
				t.Fatalf("martian drops %d, want 3 (drops %v)", got, r.e.Stats().Drops)
			}
			r.checkNoLeak()
		})
	}
}

// Not martians: class E and 255.x other than the limited broadcast are
// routed (RFC 1812 names only 255.255.255.255), and a neighbour's
// link-local source may reach one of our own addresses (it is not
// routed): an echo request to our global address is answered.
func TestMartianNeighbours(t *testing.T) {
	r := martianRig(t)
	for _, d := range []string{"240.0.0.1", "255.255.255.254", "223.255.255.255", "1.0.0.1", "126.255.255.255", "128.0.0.1"} {
		r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, netip.MustParseAddr(d), 17, 64, true, udp(1, 2, nil))))
	}
	r.poll()
	if n := len(r.drain(1)); n != 6 {
		t.Fatalf("%d of 6 ordinary IPv4 destinations forwarded", n)
	}
	ll := netip.MustParseAddr("fe80::a")
	must(t, r.e.SetNeighbour(0, ll, macA))
	r.inject(0, eth(macR0, macA, 0x86dd, ipv6(ll, r0v6.Addr(), 58, 64, icmpEcho(128, 1, 1, []byte("ping")))))
	r.poll()
	out := append(r.drain(0), r.drain(1)...)
	if len(out) != 1 || r.e.Stats().Replies != 1 {
		t.Fatalf("echo request from a link-local source to our address: %d replies (%+v)", len(out), r.e.Stats())
	}
	if got := r.drops(fwd.DropMartian); got != 0 {
		t.Fatalf("martian drops %d", got)
	}
}

// A client's packet out of the tunnel is checked too: to a loopback or
// multicast destination it is dropped as a martian, to an ordinary one
// routed.
func TestMartianFromTunnel(t *testing.T) {
	r := martianRig(t)
	client := netip.MustParseAddr("198.19.0.5")
	ft := &fakeTunnel{server: r0v4.Addr(), peers: map[uint32]netip.Addr{7: aV4},
		peerOfOuter: map[netip.Addr]uint32{aV4: 7}}
	r.e.SetTunnel(ft, 1194)
	must(t, r.e.AddRoute(netip.MustParsePrefix("198.19.0.0/24"), fwd.NextHop{Tunnel: true, Peer: 7}))
	must(t, r.e.SetNeighbour(0, aV4, macA))
	outer := func(dst string) []byte {
		inner := ipv4(client, netip.MustParseAddr(dst), 17, 64, false, udp(3333, 53, []byte("inner")))
		return eth(macR0, macA, 0x0800, ipv4(aV4, r0v4.Addr(), 17, 64, false, udp(5000, 1194, inner)))
	}
	r.inject(0, outer("127.0.0.1"))
	r.inject(0, outer("224.0.0.1"))
	r.inject(0, outer("198.51.100.1"))
	r.poll()
	if n := len(r.drain(1)); n != 1 {
		t.Fatalf("%d frames forwarded, want the one ordinary destination", n)
	}
	if got := r.drops(fwd.DropMartian); got != 2 {
		t.Fatalf("martian drops %d, want 2", got)
	}
}
