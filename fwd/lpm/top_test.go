package lpm

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// After every Insert and Delete the first level must be exactly what
// deriveChunk derives from the new trie (so updateTop re-derived every
// entry the change can affect), and every chunk outside the change's
// first octets must still be shared with the previous table. Every 50th
// step checks all chunks, which catches a chunk wrongly left shared.
func TestTopFollowsUpdates(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 16))
	var tab *V4
	var live []netip.Prefix
	for step := range 3000 {
		prev := tab
		var p netip.Prefix
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			p = live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			tab = tab.Delete(p)
		} else {
			p = randPrefix(rng, 32)
			if rng.IntN(4) == 0 { // anywhere, short prefixes included
				a := rng.Uint32()
				p = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), rng.IntN(33)).Masked()
			}
			tab = tab.Insert(p, rng.Uint32())
			live = append(live, p)
		}
		if tab.Len() == 0 {
			if tab.top != nil {
				t.Fatalf("step %d: empty table has a first level", step)
			}
			continue
		}
		a := p.Addr().As4()
		lo, hi := int(a[0]), int(a[0])
		if p.Bits() < 8 {
			hi = lo + 1<<(8-p.Bits()) - 1
		}
		if step%50 == 0 { // every chunk now and then (slow under -race), else the changed ones
			lo, hi = 0, 255
		}
		for c := lo; c <= hi; c++ {
			if want := deriveChunk(tab.root, byte(c)); *tab.top[c] != *want {
				for s := range want {
					if tab.top[c][s] != want[s] {
						t.Fatalf("step %d (%v): entry %d.%d = %+v, want %+v", step, p, c, s, tab.top[c][s], want[s])
					}
				}
			}
		}
		if prev == nil || prev.top == nil || tab == prev {
			continue
		}
		lo, hi = int(a[0]), int(a[0])
		if p.Bits() < 8 {
			hi = lo + 1<<(8-p.Bits()) - 1
		}
		for c := range tab.top {
			if (c < lo || c > hi) && tab.top[c] != prev.top[c] {
				t.Fatalf("step %d (%v): chunk %d was copied", step, p, c)
			}
		}
	}
}

// A first-level entry that holds a leaf rather than a node, and prefixes
// of exactly /16 and /8 beside longer ones.
func TestTopLeavesAndShortPrefixes(t *testing.T) {
	var tab *V4
	set := func(s string, v uint32) { tab = tab.Insert(netip.MustParsePrefix(s), v) }
	set("198.18.7.0/24", 1) // a leaf under the root's child slot 198
	check := func(addr string, want uint32, wantOK bool) {
		t.Helper()
		a := netip.MustParseAddr(addr).As4()
		v, ok := tab.Lookup(a)
		vals, oks := []uint32{0}, []bool{false}
		tab.LookupBatch([][4]byte{a}, vals, oks)
		if v != want || ok != wantOK || vals[0] != want || oks[0] != wantOK {
			t.Fatalf("%s: Lookup %d,%v, LookupBatch %d,%v; want %d,%v", addr, v, ok, vals[0], oks[0], want, wantOK)
		}
	}
	check("198.18.7.9", 1, true)
	check("198.18.8.9", 0, false)
	check("198.19.7.9", 0, false)
	set("198.0.0.0/8", 2)
	check("198.19.7.9", 2, true)
	check("198.18.7.9", 1, true)
	set("198.18.0.0/16", 3)
	check("198.18.8.9", 3, true)
	check("198.18.7.9", 1, true)
	set("0.0.0.0/0", 4)
	check("199.1.1.1", 4, true)
	set("198.18.7.128/25", 5)
	check("198.18.7.200", 5, true)
	check("198.18.7.1", 1, true)
	tab = tab.Delete(netip.MustParsePrefix("198.18.0.0/16"))
	check("198.18.8.9", 2, true)
	tab = tab.Delete(netip.MustParsePrefix("198.0.0.0/8"))
	check("198.18.8.9", 4, true)
	check("198.18.7.200", 5, true)
}
