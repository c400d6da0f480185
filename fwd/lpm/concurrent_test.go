package lpm

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
)

// Readers look up in whatever table they load while a writer publishes
// path-copied successors. Run under -race (make test does) this catches any
// update that writes to memory a published table still uses. Readers also
// check an invariant every table satisfies: 198.18.0.0/15 is never removed,
// so its addresses always match something at least that long.
func TestConcurrentReadersV4(t *testing.T) {
	var cur atomic.Pointer[V4]
	base := netip.MustParsePrefix("198.18.0.0/15")
	cur.Store((*V4)(nil).Insert(base, 15))

	const readers, updates = 2, 3000
	var wg sync.WaitGroup
	var stop atomic.Bool
	var bad atomic.Int64
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for !stop.Load() {
				tab := cur.Load()
				a := [4]byte{198, 18 + byte(rng.IntN(2)), byte(rng.Uint32()), byte(rng.Uint32())}
				if _, ok := tab.Lookup(a); !ok {
					bad.Add(1)
				}
				if v, ok := tab.Get(base); !ok || v != 15 {
					bad.Add(1)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(99, 7))
	var live []netip.Prefix
	for range updates {
		tab := cur.Load()
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			tab = tab.Delete(live[i])
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		} else {
			a := [4]byte{198, 18 + byte(rng.IntN(2)), byte(rng.Uint32()), byte(rng.Uint32())}
			p := netip.PrefixFrom(netip.AddrFrom4(a), 16+rng.IntN(17)).Masked()
			if p != base {
				tab = tab.Insert(p, rng.Uint32())
				live = append(live, p)
			}
		}
		cur.Store(tab)
	}
	stop.Store(true)
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d reads saw a table without 198.18.0.0/15", n)
	}
}
