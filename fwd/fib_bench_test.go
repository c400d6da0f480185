package fwd_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// BenchmarkFIBLookupPath forwards through a FIB of 1 M random IPv4 routes
// to 64 k random destinations (so the lookups' working set is the whole
// table, not a few cached paths), alternating the one-Lookup-per-packet
// path (single) with the one-LookupBatch-per-Rx-batch path (batch) in
// one process, three rounds each; smallfib is the same traffic through a
// FIB of a default route. ns/pkt and cpu-ns/pkt are per packet, 64 packets
// per Poll; cpu-ns/pkt (thread CPU time) is the steadier figure on a
// shared machine.
func BenchmarkFIBLookupPath(b *testing.B) {
	routes := millionRoutes()
	rng := rand.New(rand.NewPCG(7, 9))
	test := netip.MustParsePrefix("198.18.0.0/15")
	frames := make([][]byte, 0, 1<<16)
	for len(frames) < cap(frames) {
		a := rng.Uint32()
		dst := netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
		if !test.Contains(dst) {
			frames = append(frames, eth(macR0, macA, 0x0800, ipv4(aV4, dst, 17, 64, false, udp(1, 2, nil))))
		}
	}
	r := hotRig(b, fwd.ModeRouter, frames, fwd.Config{ICMPRate: 1 << 30, ICMPBurst: 1 << 20})
	// The same traffic through a FIB of a default route and the connected
	// ones: what a packet costs besides a large FIB's cache misses.
	must(b, r.e.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), fwd.NextHop{Port: 1, Via: bV4}))
	b.Run("smallfib", func(b *testing.B) { r.poll(); pollLoop(b, r, 64) })
	must(b, r.e.AddRoutes(routes))
	for round := 1; round <= 3; round++ {
		for _, single := range []bool{true, false} {
			name := "batch"
			if single {
				name = "single"
			}
			b.Run(fmt.Sprintf("%s/round%d", name, round), func(b *testing.B) {
				r.w.SetSingleLookup(single)
				r.poll()
				pollLoop(b, r, 64)
			})
		}
	}
}
