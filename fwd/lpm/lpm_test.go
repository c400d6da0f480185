package lpm

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// ref is the naive reference: a map searched from the longest length down.
type ref map[netip.Prefix]uint32

func (r ref) lookup(a netip.Addr) (uint32, bool) {
	for l := a.BitLen(); l >= 0; l-- {
		if v, ok := r[netip.PrefixFrom(a, l).Masked()]; ok {
			return v, true
		}
	}
	return 0, false
}

// table is what V4 and V6 have in common, for tests over both families.
type table[T any] interface {
	Insert(netip.Prefix, uint32) T
	Delete(netip.Prefix) T
	Get(netip.Prefix) (uint32, bool)
	Len() int
	Walk(func(netip.Prefix, uint32) bool)
}

type family[T table[T]] struct {
	name   string
	bits   int
	lookup func(T, netip.Addr) (uint32, bool)
	build  func([]netip.Prefix, []uint32) T
}

var v4 = family[*V4]{
	name:   "v4",
	bits:   32,
	lookup: func(t *V4, a netip.Addr) (uint32, bool) { return t.Lookup(a.As4()) },
	build: func(ps []netip.Prefix, vs []uint32) *V4 {
		var b V4Builder
		for i, p := range ps {
			b.Add(p, vs[i])
		}
		return b.Build()
	},
}

var v6 = family[*V6]{
	name:   "v6",
	bits:   128,
	lookup: func(t *V6, a netip.Addr) (uint32, bool) { return t.Lookup(a.As16()) },
	build: func(ps []netip.Prefix, vs []uint32) *V6 {
		var b V6Builder
		for i, p := range ps {
			b.Add(p, vs[i])
		}
		return b.Build()
	},
}

// randAddr draws addresses from a small space (few distinct leading bits)
// so that prefixes overlap a lot and lookups hit them.
func randAddr(rng *rand.Rand, bits int) netip.Addr {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	b[0] = byte(rng.IntN(3)) // three /8s (or /8 of v6)
	if rng.IntN(2) == 0 {
		b[1] = byte(rng.IntN(4))
	}
	if bits == 32 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b)
}

func randPrefix(rng *rand.Rand, bits int) netip.Prefix {
	a := randAddr(rng, bits)
	var l int
	switch rng.IntN(5) {
	case 0:
		l = rng.IntN(bits + 1)
	case 1:
		l = rng.IntN(17)
	case 2:
		l = bits - rng.IntN(9)
	default:
		l = 8 * (1 + rng.IntN(bits/8)) // stride boundaries
	}
	return netip.PrefixFrom(a, l).Masked()
}

func checkAgainst[T table[T]](t *testing.T, f family[T], tab T, r ref, rng *rand.Rand, probes int) {
	t.Helper()
	if tab.Len() != len(r) {
		t.Fatalf("%s: Len = %d, reference has %d", f.name, tab.Len(), len(r))
	}
	for range probes {
		a := randAddr(rng, f.bits)
		v, ok := f.lookup(tab, a)
		wv, wok := r.lookup(a)
		if v != wv || ok != wok {
			t.Fatalf("%s: Lookup(%v) = %d,%v; reference %d,%v", f.name, a, v, ok, wv, wok)
		}
	}
	seen := 0
	tab.Walk(func(p netip.Prefix, v uint32) bool {
		seen++
		if wv, ok := r[p]; !ok || wv != v {
			t.Fatalf("%s: Walk yielded %v=%d; reference has %d,%v", f.name, p, v, wv, ok)
		}
		if got, ok := tab.Get(p); !ok || got != v {
			t.Fatalf("%s: Get(%v) = %d,%v after Walk yielded %d", f.name, p, got, ok, v)
		}
		return true
	})
	if seen != len(r) {
		t.Fatalf("%s: Walk yielded %d prefixes, reference has %d", f.name, seen, len(r))
	}
}

func differential[T table[T]](t *testing.T, f family[T], empty T) {
	rng := rand.New(rand.NewPCG(1, uint64(f.bits)))
	tab := empty
	r := ref{}
	var live []netip.Prefix
	for step := range 6000 {
		switch op := rng.IntN(10); {
		case op < 6:
			p, v := randPrefix(rng, f.bits), rng.Uint32()
			tab = tab.Insert(p, v)
			if _, ok := r[p]; !ok {
				live = append(live, p)
			}
			r[p] = v
		case op < 9 && len(live) > 0:
			i := rng.IntN(len(live))
			p := live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			tab = tab.Delete(p)
			delete(r, p)
		default: // usually absent
			p := randPrefix(rng, f.bits)
			tab = tab.Delete(p)
			if _, ok := r[p]; ok {
				delete(r, p)
				live = slices.DeleteFunc(live, func(q netip.Prefix) bool { return q == p })
			}
		}
		if step%500 == 0 {
			checkAgainst(t, f, tab, r, rng, 2000)
		}
	}
	checkAgainst(t, f, tab, r, rng, 20000)

	// A builder fed the same prefixes makes an equivalent table.
	ps := make([]netip.Prefix, 0, len(r))
	vs := make([]uint32, 0, len(r))
	for p, v := range r {
		ps = append(ps, p)
		vs = append(vs, v)
	}
	checkAgainst(t, f, f.build(ps, vs), r, rng, 20000)

	// Path compression keeps one shape per set of prefixes, whatever the
	// history: the churned table is shaped like the one built from scratch.
	if got, want := shapeOf(tab), shapeOf(f.build(ps, vs)); got != want {
		t.Errorf("%s: after inserts and deletes the trie has %+v, built from scratch %+v", f.name, got, want)
	}

	// Deleting everything empties the table.
	for _, p := range live {
		tab = tab.Delete(p)
	}
	checkAgainst(t, f, tab, ref{}, rng, 1000)
}

type shape struct{ nodes, leaves int }

func shapeOf(tab any) shape {
	var count func(n *node) shape
	count = func(n *node) (s shape) {
		if n == nil {
			return s
		}
		if n.isLeaf() {
			return shape{leaves: 1}
		}
		s.nodes = 1
		for _, c := range n.children {
			cs := count(c)
			s.nodes += cs.nodes
			s.leaves += cs.leaves
		}
		return s
	}
	switch t := tab.(type) {
	case *V4:
		return count(t.root)
	case *V6:
		return count(t.root)
	}
	panic("not a table")
}

func TestDifferentialV4(t *testing.T) { differential(t, v4, nil) }
func TestDifferentialV6(t *testing.T) { differential(t, v6, nil) }

// snapshot records every answer of a table so a later change can be noticed.
func snapshot[T table[T]](f family[T], tab T, probes []netip.Addr) string {
	s := fmt.Sprint(tab.Len())
	tab.Walk(func(p netip.Prefix, v uint32) bool { s += fmt.Sprintf(" %v=%d", p, v); return true })
	for _, a := range probes {
		v, ok := f.lookup(tab, a)
		s += fmt.Sprintf(" %d/%v", v, ok)
	}
	return s
}

func immutability[T table[T]](t *testing.T, f family[T], empty T) {
	rng := rand.New(rand.NewPCG(2, uint64(f.bits)))
	probes := make([]netip.Addr, 3000)
	for i := range probes {
		probes[i] = randAddr(rng, f.bits)
	}
	var ps []netip.Prefix
	var vs []uint32
	for range 400 {
		ps = append(ps, randPrefix(rng, f.bits))
		vs = append(vs, rng.Uint32())
	}
	for _, start := range []struct {
		name string
		tab  T
	}{{"built", f.build(ps, vs)}, {"inserted", func() T {
		tab := empty
		for i, p := range ps {
			tab = tab.Insert(p, vs[i])
		}
		return tab
	}()}} {
		old := start.tab
		before := snapshot(f, old, probes)
		tab := old
		for i := range 300 {
			if i%2 == 0 {
				tab = tab.Insert(randPrefix(rng, f.bits), rng.Uint32())
			} else {
				tab = tab.Delete(ps[rng.IntN(len(ps))])
			}
			tab = tab.Insert(ps[rng.IntN(len(ps))], rng.Uint32()) // overwrite
		}
		if snapshot(f, tab, probes) == before {
			t.Fatalf("%s %s: 600 updates changed nothing; the test is not testing", f.name, start.name)
		}
		if after := snapshot(f, old, probes); after != before {
			t.Fatalf("%s %s: old table changed by updates of its successors", f.name, start.name)
		}
	}
}

func TestImmutabilityV4(t *testing.T) { immutability(t, v4, nil) }
func TestImmutabilityV6(t *testing.T) { immutability(t, v6, nil) }

// A builder must not modify a table it already built.
func TestBuilderResetsAfterBuild(t *testing.T) {
	var b V4Builder
	b.Add(netip.MustParsePrefix("198.18.0.0/16"), 1)
	first := b.Build()
	b.Add(netip.MustParsePrefix("198.18.1.0/24"), 2)
	b.Add(netip.MustParsePrefix("198.18.0.0/16"), 3)
	second := b.Build()
	if v, _ := first.Lookup([4]byte{198, 18, 1, 1}); v != 1 || first.Len() != 1 {
		t.Fatalf("first table changed by later Adds: lookup %d, len %d", v, first.Len())
	}
	v1, _ := second.Lookup([4]byte{198, 18, 1, 1})
	v2, _ := second.Lookup([4]byte{198, 18, 2, 1})
	if v1 != 2 || v2 != 3 || second.Len() != 2 {
		t.Fatalf("second table: lookups %d, %d, len %d; want 2, 3, 2", v1, v2, second.Len())
	}
}

func TestEdgeCasesV4(t *testing.T) {
	var tab *V4
	if _, ok := tab.Lookup([4]byte{1, 2, 3, 4}); ok || tab.Len() != 0 {
		t.Fatal("nil table is not empty")
	}
	if tab.Delete(netip.MustParsePrefix("1.0.0.0/8")) != nil {
		t.Fatal("Delete on nil table made a table")
	}
	tab = tab.Insert(netip.MustParsePrefix("0.0.0.0/0"), 100)
	tab = tab.Insert(netip.MustParsePrefix("198.18.0.0/15"), 15)
	tab = tab.Insert(netip.MustParsePrefix("198.18.7.9/16"), 16) // unmasked: stored as /16
	tab = tab.Insert(netip.MustParsePrefix("198.18.7.0/24"), 24)
	tab = tab.Insert(netip.MustParsePrefix("198.18.7.128/25"), 25)
	tab = tab.Insert(netip.MustParsePrefix("198.18.7.9/32"), 32)
	tab = tab.Insert(netip.MustParsePrefix("255.255.255.255/32"), 1)
	for _, c := range []struct {
		addr string
		want uint32
	}{
		{"8.8.8.8", 100}, {"0.0.0.0", 100}, {"198.19.0.1", 15}, {"198.18.0.1", 16},
		{"198.18.7.1", 24}, {"198.18.7.200", 25}, {"198.18.7.9", 32}, {"198.18.7.8", 24},
		{"198.18.7.127", 24}, {"198.18.7.128", 25}, {"255.255.255.255", 1}, {"255.255.255.254", 100},
	} {
		if v, ok := tab.Lookup(netip.MustParseAddr(c.addr).As4()); !ok || v != c.want {
			t.Errorf("Lookup(%s) = %d,%v; want %d", c.addr, v, ok, c.want)
		}
	}
	if v, ok := tab.Get(netip.MustParsePrefix("198.18.0.0/16")); !ok || v != 16 {
		t.Errorf("Get(198.18.0.0/16) = %d,%v; want 16", v, ok)
	}
	if _, ok := tab.Get(netip.MustParsePrefix("198.18.0.0/17")); ok {
		t.Error("Get of an absent prefix found it")
	}
	if tab.Len() != 7 {
		t.Errorf("Len = %d, want 7", tab.Len())
	}
	if same := tab.Insert(netip.MustParsePrefix("198.18.7.0/24"), 24); same != tab {
		t.Error("re-inserting an identical route made a new table")
	}
	for _, absent := range []string{"198.18.7.0/23", "10.0.0.0/8", "198.18.7.10/32", "198.18.7.0/25"} {
		if tab.Delete(netip.MustParsePrefix(absent)) != tab {
			t.Errorf("Delete(%s) of an absent prefix made a new table", absent)
		}
	}
	if tab.Insert(netip.MustParsePrefix("2001:db8::/32"), 1) != tab || tab.Insert(netip.Prefix{}, 1) != tab {
		t.Error("V4 accepted an IPv6 or invalid prefix")
	}
	noDefault := tab.Delete(netip.MustParsePrefix("0.0.0.0/0"))
	if _, ok := noDefault.Lookup([4]byte{8, 8, 8, 8}); ok || noDefault.Len() != 6 {
		t.Error("deleting /0 left it matching")
	}
	if v, ok := tab.Lookup([4]byte{8, 8, 8, 8}); !ok || v != 100 {
		t.Error("deleting /0 changed the old table")
	}
	hostGone := tab.Delete(netip.MustParsePrefix("198.18.7.9/32"))
	if v, _ := hostGone.Lookup([4]byte{198, 18, 7, 9}); v != 24 {
		t.Errorf("after deleting the /32, lookup = %d, want the /24's 24", v)
	}
	var n int
	tab.Walk(func(netip.Prefix, uint32) bool { n++; return n < 3 })
	if n != 3 {
		t.Errorf("Walk did not stop when fn returned false: %d calls", n)
	}
}

func TestEdgeCasesV6(t *testing.T) {
	var tab *V6
	tab = tab.Insert(netip.MustParsePrefix("::/0"), 1)
	tab = tab.Insert(netip.MustParsePrefix("2001:db8::/32"), 32)
	tab = tab.Insert(netip.MustParsePrefix("2001:db8:0:1::/64"), 64)
	tab = tab.Insert(netip.MustParsePrefix("2001:db8:0:1::1/128"), 128)
	tab = tab.Insert(netip.MustParsePrefix("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"), 2)
	for _, c := range []struct {
		addr string
		want uint32
	}{
		{"::", 1}, {"2001:db9::", 1}, {"2001:db8:1::", 32}, {"2001:db8:0:1::2", 64},
		{"2001:db8:0:1::1", 128}, {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 2},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", 1},
	} {
		if v, ok := tab.Lookup(netip.MustParseAddr(c.addr).As16()); !ok || v != c.want {
			t.Errorf("Lookup(%s) = %d,%v; want %d", c.addr, v, ok, c.want)
		}
	}
	if tab.Insert(netip.MustParsePrefix("198.18.0.0/15"), 1) != tab {
		t.Error("V6 accepted an IPv4 prefix")
	}
	if tab.Delete(netip.MustParsePrefix("2001:db8::1/128")) != tab {
		t.Error("Delete of an absent /128 made a new table")
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	t4, t6 := randTables(rng, 5000)
	a4, a6 := randAddr(rng, 32).As4(), randAddr(rng, 128).As16()
	var sink uint32
	if n := testing.AllocsPerRun(1000, func() {
		v, _ := t4.Lookup(a4)
		w, _ := t6.Lookup(a6)
		sink += v + w
		a4[3]++
		a6[15]++
	}); n != 0 {
		t.Fatalf("Lookup allocates %v times per call", n)
	}
	_ = sink
}
