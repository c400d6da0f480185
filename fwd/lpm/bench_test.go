package lpm

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
)

// routesV4 returns n random IPv4 routes with a length mix like a full BGP
// table: 60% /24, 30% /16–/23, 5% /25–/32, 5% /8–/15; addresses uniform
// over 1.0.0.0–223.255.255.255.
func routesV4(n int, seed uint64) []netip.Prefix {
	rng := rand.New(rand.NewPCG(seed, 4))
	ps := make([]netip.Prefix, n)
	for i := range ps {
		var l int
		switch r := rng.IntN(100); {
		case r < 60:
			l = 24
		case r < 90:
			l = 16 + rng.IntN(8)
		case r < 95:
			l = 25 + rng.IntN(8)
		default:
			l = 8 + rng.IntN(8)
		}
		a := rng.Uint32()%(223<<24) + 1<<24
		ps[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), l).Masked()
	}
	return ps
}

// routesV6 returns n random IPv6 routes under 2000::/3: 80% /32–/64
// (mostly /48), 20% /128 hosts.
func routesV6(n int, seed uint64) []netip.Prefix {
	rng := rand.New(rand.NewPCG(seed, 6))
	ps := make([]netip.Prefix, n)
	for i := range ps {
		var b [16]byte
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		b[0] = 0x20 | b[0]&0x1f
		var l int
		switch r := rng.IntN(100); {
		case r < 40:
			l = 48
		case r < 80:
			l = 32 + rng.IntN(33)
		default:
			l = 128
		}
		ps[i] = netip.PrefixFrom(netip.AddrFrom16(b), l).Masked()
	}
	return ps
}

func buildV4(ps []netip.Prefix) *V4 {
	var b V4Builder
	for i, p := range ps {
		b.Add(p, uint32(i))
	}
	return b.Build()
}

func buildV6(ps []netip.Prefix) *V6 {
	var b V6Builder
	for i, p := range ps {
		b.Add(p, uint32(i))
	}
	return b.Build()
}

var sink uint32

func benchLookupV4(b *testing.B, n int) {
	t := buildV4(routesV4(n, 1))
	rng := rand.New(rand.NewPCG(9, 9))
	addrs := make([][4]byte, 1<<16)
	for i := range addrs {
		a := rng.Uint32()
		addrs[i] = [4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}
	}
	hits := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		v, ok := t.Lookup(addrs[i&(len(addrs)-1)])
		sink += v
		if ok {
			hits++
		}
	}
	b.ReportMetric(float64(hits)/float64(b.N), "hit-ratio")
}

// BenchmarkLookupBatchV4_1M is BenchmarkLookupV4_1M through LookupBatch
// with batches of 64, the data plane's burst size; ns/op is per address.
func BenchmarkLookupBatchV4_1M(b *testing.B) {
	t := buildV4(routesV4(1_000_000, 1))
	rng := rand.New(rand.NewPCG(9, 9))
	addrs := make([][4]byte, 1<<16)
	for i := range addrs {
		a := rng.Uint32()
		addrs[i] = [4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}
	}
	vals, oks := make([]uint32, 64), make([]bool, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 64 {
		off := i & (len(addrs) - 1)
		t.LookupBatch(addrs[off:off+64], vals, oks)
		sink += vals[0]
	}
}

func BenchmarkLookupV4_1k(b *testing.B) { benchLookupV4(b, 1000) }
func BenchmarkLookupV4_1M(b *testing.B) { benchLookupV4(b, 1_000_000) }

// v6Bench returns a 100 k route IPv6 table and 64 k destinations: half
// inside a route (random host bits), half random under 2000::/3.
func v6Bench() (*V6, [][16]byte) {
	ps := routesV6(100_000, 1)
	t := buildV6(ps)
	rng := rand.New(rand.NewPCG(9, 9))
	addrs := make([][16]byte, 1<<16)
	for i := range addrs {
		a := ps[rng.IntN(len(ps))].Addr().As16()
		for j := 8; j < 16; j++ {
			a[j] = byte(rng.Uint32())
		}
		if i%2 == 1 {
			for j := range a {
				a[j] = byte(rng.Uint32())
			}
			a[0] = 0x20 | a[0]&0x1f
		}
		addrs[i] = a
	}
	return t, addrs
}

func BenchmarkLookupV6_100k(b *testing.B) {
	t, addrs := v6Bench()
	hits := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		v, ok := t.Lookup(addrs[i&(len(addrs)-1)])
		sink += v
		if ok {
			hits++
		}
	}
	b.ReportMetric(float64(hits)/float64(b.N), "hit-ratio")
}

// BenchmarkLookupBatchV6_100k: ns/op is per address, batches of 64.
func BenchmarkLookupBatchV6_100k(b *testing.B) {
	t, addrs := v6Bench()
	vals, oks := make([]uint32, 64), make([]bool, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 64 {
		off := i & (len(addrs) - 1)
		t.LookupBatch(addrs[off:off+64], vals, oks)
		sink += vals[0]
	}
}

// sizeOf is the memory held by the trie under n: node headers plus slice
// capacities (allocator rounding not included).
func sizeOf(n *node) int {
	if n == nil {
		return 0
	}
	s := int(reflect.TypeFor[node]().Size()) + 4*cap(n.vals) + 8*cap(n.children)
	for _, c := range n.children {
		s += sizeOf(c)
	}
	return s
}

// BenchmarkBuildV4_1M reports the time to build a 1 M route table and the
// heap it occupies.
func BenchmarkBuildV4_1M(b *testing.B) {
	ps := routesV4(1_000_000, 1)
	b.ReportAllocs()
	for range b.N {
		buildV4(ps)
	}
	b.StopTimer()
	t := buildV4(ps)
	b.ReportMetric(float64(sizeOf(t.root)+topSize(t.top))/(1<<20), "MiB")
}

// topSize is the memory of a first level: the directory and its distinct
// chunks.
func topSize(t *top) int {
	s := int(reflect.TypeFor[top]().Size())
	for c := range t {
		if t[c] != &emptyChunk {
			s += int(reflect.TypeFor[topChunk]().Size())
		}
	}
	return s
}

func BenchmarkBuildV6_100k(b *testing.B) {
	ps := routesV6(100_000, 1)
	b.ReportAllocs()
	for range b.N {
		buildV6(ps)
	}
	b.StopTimer()
	b.ReportMetric(float64(sizeOf(buildV6(ps).root))/(1<<20), "MiB")
}

// BenchmarkInsertV4_1M measures one path-copying Insert (a fresh random
// route each time) into a 1 M route table; the table itself stays the same
// so every iteration copies from the same full-size nodes.
func BenchmarkInsertV4_1M(b *testing.B) {
	t := buildV4(routesV4(1_000_000, 1))
	more := routesV4(1<<16, 2)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		sink += uint32(t.Insert(more[i&(len(more)-1)], 7).Len())
	}
}

func BenchmarkDeleteV4_1M(b *testing.B) {
	ps := routesV4(1_000_000, 1)
	t := buildV4(ps)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		sink += uint32(t.Delete(ps[i%len(ps)]).Len())
	}
}

// BenchmarkLookupBatchV4Connected is the engine's BenchmarkPoll FIB: two
// connected /24s and the router's own /32 on each, a batch of 64 packets
// to hosts of one /24. Everything is in cache: this is the walk's own
// instruction cost per address (ns/op is per address).
func BenchmarkLookupBatchV4Connected(b *testing.B) {
	var bld V4Builder
	for i, p := range []string{"198.18.0.0/24", "198.18.1.0/24", "198.18.0.1/32", "198.18.1.1/32"} {
		bld.Add(netip.MustParsePrefix(p), uint32(i))
	}
	t := bld.Build()
	addrs := make([][4]byte, 64)
	for i := range addrs {
		addrs[i] = [4]byte{198, 18, 1, byte(20 + i%8)}
	}
	vals, oks := make([]uint32, 64), make([]bool, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i += 64 {
		t.LookupBatch(addrs, vals, oks)
		sink += vals[0]
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/addr")
}
