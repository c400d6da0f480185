package dp

// Adaptive prefetch. The stride-ahead prefetch halves the driver's cost
// when packets arrive in DRAM (a NIC without DDIO, or lines evicted since
// the DMA) but only costs its instructions when they arrive in cache (DDIO,
// the model's warm runs). Whether a burst's lines were cached is not
// observable directly, so a queue measures: in every window of
// adaptWindow bursts the first adaptProbes bursts alternate off and on,
// each timed with the cycle counter (poll + delivery, the part the
// prefetch changes), and the rest of the window runs with whichever mode
// had the cheaper fastest burst per packet. "Off" must win by a margin:
// wrongly off costs up to 2× on DRAM-resident buffers, wrongly on a few
// percent. The probes at "off" cost a flushed queue about adaptProbes/2 ÷
// adaptWindow of a burst's miss time (≈ 0.4 %).
const (
	adaptWindow   = 256 // bursts per decision
	adaptProbes   = 4   // probe bursts per window: off, on, off, on
	adaptMinBurst = 16  // smaller bursts are not timed: per-burst costs dominate
	// off is chosen when its cycles per packet are below on's × 31/32.
	adaptMarginNum, adaptMarginDen = 31, 32
)

// prefetchAdapt is a queue's adaptive-prefetch state.
type prefetchAdapt struct {
	on     bool   // adapting (RxOptions: distance > 0 and not FixedPrefetch)
	burst  uint32 // bursts since the window started
	offMin uint64 // fastest probe burst's cycles per packet ×16, off; 0 = none yet
	onMin  uint64
	chosen bool // the window's choice: prefetch on
}

// adaptStart is called before a burst's poll: it sets the burst's distance
// and says whether to time it (1: off probe, 2: on probe, 0: no).
func (q *RxQueue) adaptStart() uint8 {
	a := &q.adapt
	k := a.burst
	if k >= adaptProbes {
		return 0
	}
	if k&1 == 0 {
		q.setDist(0)
		return 1
	}
	q.setDist(q.distOn)
	return 2
}

// adaptEnd records a probe burst of n packets that took dt cycles, and at
// the end of the probes picks the window's mode.
func (q *RxQueue) adaptEnd(probe uint8, dt uint64, n int) {
	a := &q.adapt
	if probe != 0 && n >= adaptMinBurst {
		c := dt * 16 / uint64(n)
		if probe == 1 && (a.offMin == 0 || c < a.offMin) {
			a.offMin = c
		}
		if probe == 2 && (a.onMin == 0 || c < a.onMin) {
			a.onMin = c
		}
	}
	a.burst++
	switch {
	case a.burst == adaptProbes:
		if a.offMin != 0 && a.onMin != 0 {
			a.chosen = a.offMin*adaptMarginDen >= a.onMin*adaptMarginNum
		}
		a.offMin, a.onMin = 0, 0
		if a.chosen {
			q.setDist(q.distOn)
		} else {
			q.setDist(0)
		}
	case a.burst == adaptWindow:
		a.burst = 0
	}
	if q.dist == 0 {
		q.Stats.PrefetchOffBursts++
	}
}

// setDist sets the stride-ahead distance of the next burst, and with it
// the CQE-line prefetch at poll start.
func (q *RxQueue) setDist(d int) {
	q.dist = d
	q.cq.pfCQE = d > 0 && q.lab.cqePrefetch()
}
