package fwd_test

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

// fibRig is a router rig with neighbours on both ports and the given
// static routes; single selects one FIB lookup per packet instead of one
// per batch.
func fibRig(t testing.TB, routes []fwd.Route, single bool) *rig {
	r := newRig(t, rigOpt{mode: fwd.ModeRouter, poolBufs: 4096,
		cfg: fwd.Config{ICMPRate: 1 << 30, ICMPBurst: 1 << 20}})
	must(t, r.e.SetNeighbour(1, bV4, macB))
	must(t, r.e.SetNeighbour(1, bV6, macB))
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(0, aV6, macA))
	must(t, r.e.AddRoutes(routes))
	r.w.SetSingleLookup(single)
	return r
}

// fibTestRoutes returns n random routes inside 198.18.0.0/15 and
// 2001:db8::/32 (lengths /15–/32 and /32–/128) to a gateway on either
// port or a blackhole.
func fibTestRoutes(rng *rand.Rand, n int) []fwd.Route {
	seen := map[netip.Prefix]bool{}
	var routes []fwd.Route
	for len(routes) < n {
		var p netip.Prefix
		nh := fwd.NextHop{Port: 1, Via: bV4}
		if rng.IntN(4) == 0 {
			a := netip.MustParseAddr("2001:db8::").As16()
			for i := 4; i < 16; i++ {
				a[i] = byte(rng.Uint32())
			}
			p = netip.PrefixFrom(netip.AddrFrom16(a), 32+rng.IntN(97)).Masked()
			nh.Via = bV6
			if rng.IntN(2) == 0 {
				nh = fwd.NextHop{Port: 0, Via: aV6}
			}
		} else {
			x := rng.Uint32()
			a := [4]byte{198, 18 | byte(x>>24)&1, byte(x >> 8), byte(x)}
			p = netip.PrefixFrom(netip.AddrFrom4(a), 15+rng.IntN(18)).Masked()
			if rng.IntN(2) == 0 {
				nh = fwd.NextHop{Port: 0, Via: aV4}
			}
		}
		if rng.IntN(10) == 0 {
			nh = fwd.NextHop{Blackhole: true}
		}
		if !seen[p] {
			seen[p] = true
			routes = append(routes, fwd.Route{Prefix: p, NextHop: nh})
		}
	}
	return routes
}

// fibTestFrame is a random frame for the router: mostly IPv4/IPv6 to
// random destinations in the test ranges (some to our own addresses, some
// with TTL 1), now and then an ARP request or a frame not for us.
func fibTestFrame(rng *rand.Rand) []byte {
	switch rng.IntN(20) {
	case 0:
		return eth(bcast, macA, 0x0806, arp(1, macA, aV4, bcast, r0v4.Addr()))
	case 1:
		return eth(macC, macA, 0x0800, ipv4(aV4, bV4, 17, 64, true, udp(1, 2, nil)))
	case 2:
		return eth(macR0, macA, 0x0800, ipv4(aV4, r0v4.Addr(), 1, 5, false, icmpEcho(8, 1, 1, nil)))
	}
	ttl := byte(64)
	if rng.IntN(10) == 0 {
		ttl = 1
	}
	if rng.IntN(3) == 0 {
		d := netip.MustParseAddr("2001:db8::").As16()
		d[5] = byte(rng.IntN(3)) // often inside 2001:db8::/48 or :1::/48
		for i := 8; i < 16; i++ {
			d[i] = byte(rng.Uint32())
		}
		return eth(macR0, macA, 0x86dd, ipv6(aV6, netip.AddrFrom16(d), 17, ttl, udp(1, 2, []byte{1, 2, 3})))
	}
	x := rng.Uint32()
	d := netip.AddrFrom4([4]byte{198, 18 | byte(x>>24)&1, byte(x >> 8), byte(x)})
	return eth(macR0, macA, 0x0800, ipv4(aV4, d, 17, ttl, true, udp(1, 2, []byte{1, 2, 3})))
}

// splitARPReplies separates ARP replies, which the router sends while it
// reads a batch, from every other frame, which it sends once the batch's
// lookups are done.
func splitARPReplies(frames [][]byte) [2][][]byte {
	var s [2][][]byte
	for _, f := range frames {
		k := 1
		if len(f) >= 22 && f[12] == 0x08 && f[13] == 0x06 && f[21] == 2 {
			k = 0
		}
		s[k] = append(s[k], f)
	}
	return s
}

// Looking up a batch's destinations together must forward exactly as
// looking up each packet on its own does: same frames out of each port in
// the same order and same counters. The one difference allowed is the
// documented one (fib.go): ARP replies to requests in a batch leave before
// the batch's routed packets.
func TestBatchLookupForwardsLikeSingle(t *testing.T) {
	for _, nroutes := range []int{300, 5000} { // per-route inserts; bulk rebuild
		rng := rand.New(rand.NewPCG(uint64(nroutes), 11))
		routes := fibTestRoutes(rng, nroutes)
		batch, single := fibRig(t, routes, false), fibRig(t, routes, true)
		var forwarded uint64
		for range 20 {
			n := 1 + rng.IntN(100) // sometimes more than one Rx batch
			for range n {
				f := fibTestFrame(rng)
				batch.inject(0, f)
				single.inject(0, f)
			}
			batch.advance(time.Millisecond)
			single.advance(time.Millisecond)
			batch.poll()
			single.poll()
			for port := range 2 {
				got, want := batch.drain(port), single.drain(port)
				forwarded += uint64(len(got))
				for kind, got := range splitARPReplies(got) {
					want := splitARPReplies(want)[kind]
					if len(got) != len(want) {
						t.Fatalf("%d routes: port %d sent %d frames (kind %d) batched, %d single", nroutes, port, len(got), kind, len(want))
					}
					for i := range got {
						if !bytes.Equal(got[i], want[i]) {
							t.Fatalf("%d routes: port %d frame %d (kind %d) differs:\nbatched % x\nsingle  % x", nroutes, port, i, kind, got[i], want[i])
						}
					}
				}
			}
		}
		for _, r := range []*rig{batch, single} { // let held packets for silent neighbours time out
			for range 10 {
				r.advance(time.Minute)
				r.poll()
				r.e.Service()
			}
		}
		bs, ss := batch.e.Stats(), single.e.Stats()
		if !reflect.DeepEqual(bs.Drops, ss.Drops) || !reflect.DeepEqual(bs.Ports, ss.Ports) {
			t.Fatalf("%d routes: counters differ:\nbatched %+v\nsingle  %+v", nroutes, bs, ss)
		}
		if forwarded == 0 || bs.Drops[fwd.DropNoRoute] == 0 || bs.Drops[fwd.DropTTLExceeded] == 0 {
			t.Fatalf("%d routes: the traffic missed a path: %d sent, drops %v", nroutes, forwarded, bs.Drops)
		}
		batch.checkNoLeak()
		single.checkNoLeak()
	}
}
