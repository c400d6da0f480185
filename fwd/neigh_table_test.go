package fwd

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

func testNeigh(i int) *neighbour {
	n := &neighbour{port: uint16(i % 3)}
	n.addr[0], n.addr[14], n.addr[15] = 0x20, byte(i>>8), byte(i)
	return n
}

// The table changed in place agrees with a map through inserts, replaces
// and deletes, rebuilding (putNeigh) when tombstones fill it.
func TestNeighTableInPlace(t *testing.T) {
	e := &Engine{neighs: map[neighKey]*neighbour{}}
	e.neigh.Store(buildNeighTable(nil))
	rng := rand.New(rand.NewPCG(1, 2))
	rebuilds := 0
	for i := range 20_000 {
		n := testNeigh(rng.IntN(300))
		k := neighKey{n.port, n.addr}
		before := e.neigh.Load()
		if rng.IntN(2) == 0 {
			e.putNeigh(k, n)
		} else {
			e.dropNeigh(k)
		}
		if e.neigh.Load() != before {
			rebuilds++
		}
		if i%97 != 0 {
			continue
		}
		nt := e.neigh.Load()
		for j := range 300 {
			m := testNeigh(j)
			if got, want := nt.lookup(m.port, &m.addr), e.neighs[neighKey{m.port, m.addr}]; got != want {
				t.Fatalf("op %d: lookup %d → %p, map has %p", i, j, got, want)
			}
		}
		if nt.used != len(e.neighs) || 2*(nt.used+nt.dead) > len(nt.slots) {
			t.Fatalf("op %d: %d used + %d dead of %d slots, %d entries", i, nt.used, nt.dead, len(nt.slots), len(e.neighs))
		}
	}
	// ~150 entries in 1,024 slots: a rebuild per few hundred deletions.
	if rebuilds == 0 || rebuilds > 200 {
		t.Errorf("%d rebuilds in 20,000 changes", rebuilds)
	}
}

// Workers look entries up while the control plane changes the table: an
// entry present throughout is always found, whatever comes and goes
// around it (run with -race too).
func TestNeighTableConcurrentLookup(t *testing.T) {
	e := &Engine{neighs: map[neighKey]*neighbour{}}
	e.neigh.Store(buildNeighTable(nil))
	stay := make([]*neighbour, 40)
	for i := range stay {
		stay[i] = testNeigh(1000 + i)
		e.putNeigh(neighKey{stay[i].port, stay[i].addr}, stay[i])
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var missed atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				n := stay[i%len(stay)]
				if e.neigh.Load().lookup(n.port, &n.addr) != n {
					missed.Add(1)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50_000 {
		n := testNeigh(rng.IntN(500))
		if rng.IntN(2) == 0 {
			e.putNeigh(neighKey{n.port, n.addr}, n)
		} else {
			e.dropNeigh(neighKey{n.port, n.addr})
		}
	}
	stop.Store(true)
	wg.Wait()
	if m := missed.Load(); m != 0 {
		t.Fatalf("%d lookups missed an entry present throughout", m)
	}
}

// Neighbours numbered in sequence (::1, ::2, ... of a /64; .1, .2, ...
// of a /24) spread over the table's slots and the glean buckets: the
// former hash gave every such IPv6 neighbour one home slot (a lookup
// walked them all) and one glean budget (a scanner starved its
// neighbours).
func TestNeighHashSpreads(t *testing.T) {
	for _, v4 := range []bool{false, true} {
		slots := map[uint64]int{}
		buckets := map[uint64]bool{}
		for i := range 256 {
			var a [16]byte
			if v4 {
				a = key4([]byte{198, 18, 1, byte(i)})
			} else {
				a[0], a[1], a[14], a[15] = 0x20, 0x01, byte(i>>8), byte(i)
			}
			h := neighHash(1, &a)
			slots[h&1023]++
			buckets[h%gleanBuckets] = true
		}
		worst := 0
		for _, n := range slots {
			worst = max(worst, n)
		}
		// 256 keys in 1,024 slots: a fair hash puts at most a few in one.
		if worst > 5 || len(buckets) < 128 {
			t.Errorf("v4 %v: %d keys share a home slot; %d of 256 glean buckets used", v4, worst, len(buckets))
		}
	}
}
