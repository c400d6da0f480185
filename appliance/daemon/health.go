package daemon

import (
	"fmt"
	"sync/atomic"
	"time"
)

// heartbeat is a worker's loop counter: the worker stores a new value
// after every poll, the control plane only reads it. Each sits on a cache
// line of its own so workers never share one.
type heartbeat struct {
	n atomic.Uint64
	_ [56]byte
}

// health tells whether the data plane runs: every worker's heartbeat
// advanced within stall, and every port with a kernel link is up. It is
// the control loop's alone.
type health struct {
	stall time.Duration
	seen  []uint64
	moved []time.Time // when seen last changed
}

func newHealth(stall time.Duration, workers int, now time.Time) *health {
	h := &health{stall: stall, seen: make([]uint64, workers), moved: make([]time.Time, workers)}
	for i := range h.moved {
		h.moved[i] = now
	}
	return h
}

// check samples the heartbeats at now and returns why the data plane is
// not healthy, or "" when it is. A worker counts as stalled once its
// heartbeat has not moved for longer than stall (an adaptive worker still
// beats every idle wait, ≤ 20 ms, when no packet comes).
func (h *health) check(now time.Time, beats []heartbeat, linkDown func() string) string {
	reason := ""
	for q := range beats {
		if q >= len(h.seen) {
			break
		}
		if n := beats[q].n.Load(); n != h.seen[q] {
			h.seen[q], h.moved[q] = n, now
			continue
		}
		if now.Sub(h.moved[q]) > h.stall && reason == "" {
			reason = fmt.Sprintf("worker %d stalled (no poll for over %v)", q, h.stall)
		}
	}
	if reason != "" {
		return reason
	}
	return linkDown()
}

// starting names the first worker that has not begun polling, or "".
// Until each has, frames the kernel hands its queues wait unread: the
// appliance is not serving yet. That is no failure (no hold-down follows
// it); a worker that never polls is reported stalled by check.
func starting(beats []heartbeat) string {
	for q := range beats {
		if beats[q].n.Load() == 0 {
			return fmt.Sprintf("starting: worker %d not polling yet", q)
		}
	}
	return ""
}
