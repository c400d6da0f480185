package lpm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestLookupBatchMatchesLookup(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	t4, t6 := randTables(rng, 20000)
	for _, n := range []int{0, 1, 15, 16, 17, 100, 1000} {
		a4 := make([][4]byte, n)
		a6 := make([][16]byte, n)
		for i := range n {
			a4[i], a6[i] = randAddr(rng, 32).As4(), randAddr(rng, 128).As16()
		}
		vals := make([]uint32, n)
		oks := make([]bool, n)
		for i := range vals {
			vals[i], oks[i] = 12345, true // must be overwritten
		}
		checkBatch(t, fmt.Sprintf("batch of %d", n), t4, t6, a4, a6, vals, oks)
	}
	var empty *V4
	vals, oks := []uint32{7}, []bool{true}
	empty.LookupBatch([][4]byte{{1, 2, 3, 4}}, vals, oks)
	if vals[0] != 0 || oks[0] {
		t.Fatal("a nil table's batch lookup found something")
	}
	a4 := make([][4]byte, 64)
	vals, oks = make([]uint32, 64), make([]bool, 64)
	if n := testing.AllocsPerRun(100, func() { t4.LookupBatch(a4, vals, oks) }); n != 0 {
		t.Fatalf("LookupBatch allocates %v times per call", n)
	}
}

// Runs of one address (a flow's burst) take the first lane's answer; the
// lanes around them, and runs that end a batch, must still be right.
func TestLookupBatchRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	t4, t6 := randTables(rng, 5000)
	for round := range 200 {
		n := 1 + rng.IntN(200)
		a4, a6 := make([][4]byte, n), make([][16]byte, n)
		for i := range n {
			if i > 0 && rng.IntN(4) != 0 { // runs of varying length
				a4[i], a6[i] = a4[i-1], a6[i-1]
				continue
			}
			a4[i], a6[i] = randAddr(rng, 32).As4(), randAddr(rng, 128).As16()
		}
		checkBatch(t, fmt.Sprintf("round %d", round), t4, t6, a4, a6, make([]uint32, n), make([]bool, n))
	}
}

// randTables builds an IPv4 and an IPv6 table of n random prefixes each.
func randTables(rng *rand.Rand, n int) (*V4, *V6) {
	var b4 V4Builder
	var b6 V6Builder
	for range n {
		b4.Add(randPrefix(rng, 32), rng.Uint32())
		b6.Add(randPrefix(rng, 128), rng.Uint32())
	}
	return b4.Build(), b6.Build()
}

// checkBatch looks a4 and a6 up in one batch each (into vals and oks,
// whatever they hold) and compares every lane with Lookup.
func checkBatch(t *testing.T, what string, t4 *V4, t6 *V6, a4 [][4]byte, a6 [][16]byte, vals []uint32, oks []bool) {
	t.Helper()
	t4.LookupBatch(a4, vals, oks)
	for i, a := range a4 {
		if v, ok := t4.Lookup(a); v != vals[i] || ok != oks[i] {
			t.Fatalf("%s: v4 [%d] %v = %d,%v; Lookup says %d,%v", what, i, a, vals[i], oks[i], v, ok)
		}
	}
	t6.LookupBatch(a6, vals, oks)
	for i, a := range a6 {
		if v, ok := t6.Lookup(a); v != vals[i] || ok != oks[i] {
			t.Fatalf("%s: v6 [%d] %v = %d,%v; Lookup says %d,%v", what, i, a, vals[i], oks[i], v, ok)
		}
	}
}
