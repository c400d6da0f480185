package dp

import "testing"

// TestAdaptDecision drives the adaptive prefetch with given probe timings:
// off is chosen only when its fastest probe is cheaper by the margin, the
// choice holds for the window, and the next window probes again.
func TestAdaptDecision(t *testing.T) {
	for _, c := range []struct {
		name       string
		off, on    uint64 // cycles per 64-packet probe burst
		n          int
		wantOnDist bool
	}{
		{"off clearly cheaper (warm)", 900, 1000, 64, false},
		{"off within the margin", 990, 1000, 64, true},
		{"on cheaper (flushed)", 2000, 1000, 64, true},
		{"bursts too small to time", 100, 1000, adaptMinBurst - 1, true},
	} {
		q := &RxQueue{dist: 4, distOn: 4, adapt: prefetchAdapt{on: true, chosen: true}}
		for k := 0; k < adaptProbes; k++ {
			probe := q.adaptStart()
			if want := uint8(1 + k&1); probe != want {
				t.Fatalf("%s: burst %d probe %d, want %d", c.name, k, probe, want)
			}
			if (probe == 1) != (q.dist == 0) {
				t.Fatalf("%s: probe %d ran at distance %d", c.name, probe, q.dist)
			}
			dt := c.on
			if probe == 1 {
				dt = c.off
			}
			q.adaptEnd(probe, dt, c.n)
		}
		if got := q.dist == 4; got != c.wantOnDist {
			t.Errorf("%s: distance %d after the probes", c.name, q.dist)
		}
		for k := adaptProbes; k < adaptWindow; k++ {
			if q.adaptStart() != 0 {
				t.Fatalf("%s: burst %d timed outside the probes", c.name, k)
			}
			q.adaptEnd(0, 0, c.n)
			if got := q.dist == 4; got != c.wantOnDist {
				t.Fatalf("%s: burst %d changed the window's choice", c.name, k)
			}
		}
		if q.adaptStart() != 1 || q.dist != 0 {
			t.Errorf("%s: the next window does not probe again", c.name)
		}
	}
}

// TestFixedPrefetchDoesNotAdapt: FixedPrefetch (and distance 0) leave the
// distance alone.
func TestFixedPrefetchDoesNotAdapt(t *testing.T) {
	for _, o := range []RxOptions{{PrefetchDistance: 4, FixedPrefetch: true}, {PrefetchDistance: 0}} {
		q, err := newTestQueue(o)
		if err != nil {
			t.Fatal(err)
		}
		if q.adapt.on {
			t.Errorf("%+v: adapting", o)
		}
	}
	q, err := newTestQueue(RxOptions{PrefetchDistance: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !q.adapt.on || q.distOn != DefaultPrefetchDistance {
		t.Errorf("default options: adapting %v at %d", q.adapt.on, q.distOn)
	}
}

func newTestQueue(o RxOptions) (*RxQueue, error) {
	pages := make([][]byte, 17)
	for i := range pages {
		pages[i] = make([]byte, PageSize)
	}
	return NewRxQueue(&CQMem{Ring: make([]byte, 64*CQESize), LogSize: 6, DBRec: make([]byte, 8)},
		&RQMem{Ring: make([]byte, 4*RxWQESize), LogWQEs: 2, LogStrides: 3, LogStrideSize: 11, DBRec: make([]byte, 8),
			IOVA: 1 << 30, Pages: pages}, 1, o)
}
