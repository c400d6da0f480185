package daemon

import (
	"log/slog"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
)

// TestHealthWorkerStall: a worker whose heartbeat stops moving makes the
// data plane unhealthy after stall, and healthy again once it moves; a
// link down is reported while the workers run.
func TestHealthWorkerStall(t *testing.T) {
	t0 := time.Unix(1000, 0)
	beats := make([]heartbeat, 2)
	h := newHealth(time.Second, 2, t0)
	down := ""
	link := func() string { return down }
	step := func(at time.Duration, moveQ0, moveQ1 bool) string {
		if moveQ0 {
			beats[0].n.Add(1)
		}
		if moveQ1 {
			beats[1].n.Add(1)
		}
		return h.check(t0.Add(at), beats, link)
	}
	if r := step(100*time.Millisecond, true, true); r != "" {
		t.Fatalf("both workers beat: %q", r)
	}
	// Worker 1 stops; within stall it still counts as running.
	if r := step(900*time.Millisecond, true, false); r != "" {
		t.Errorf("worker 1 quiet for 0.8 s of a 1 s stall: %q", r)
	}
	r := step(1200*time.Millisecond, true, false)
	if r != "worker 1 stalled (no poll for over 1s)" {
		t.Errorf("worker 1 quiet for 1.1 s: %q", r)
	}
	if r := step(1300*time.Millisecond, true, true); r != "" {
		t.Errorf("worker 1 beats again: %q", r)
	}
	down = "port p0 link down"
	if r := step(1400*time.Millisecond, true, true); r != down {
		t.Errorf("link down: %q", r)
	}
}

// TestReadinessHoldDown: after a data-plane failure clears, the appliance
// stays not ready for worker_stall (no flapping announcements); drain and
// stop override; a new failure restarts the hold-down.
func TestReadinessHoldDown(t *testing.T) {
	s := newScaleOut(config.Export{WorkerStall: 3 * time.Second})
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	if r := s.readiness(at(0), ""); r != "" {
		t.Fatalf("healthy: %q", r)
	}
	if r := s.readiness(at(time.Second), "port p0 link down"); r != "port p0 link down" {
		t.Errorf("link down: %q", r)
	}
	if r := s.readiness(at(2*time.Second), ""); r != "recovering from: port p0 link down" {
		t.Errorf("1 s after the link came back: %q", r)
	}
	if r := s.readiness(at(4100*time.Millisecond), ""); r != "" {
		t.Errorf("3.1 s after: %q", r)
	}
	s.readiness(at(5*time.Second), "worker 0 stalled (no poll for over 3s)")
	if r := s.readiness(at(7*time.Second), ""); r != "recovering from: worker 0 stalled (no poll for over 3s)" {
		t.Errorf("after a stall: %q", r)
	}
	s.drain = &status.Drain{}
	if r := s.readiness(at(20*time.Second), ""); r != "draining" {
		t.Errorf("draining: %q", r)
	}
	s.stopping = true
	if r := s.readiness(at(21*time.Second), ""); r != "stopping" {
		t.Errorf("stopping: %q", r)
	}
}

// TestNotReadyUntilWorkersPoll: a daemon whose workers have not begun
// polling (a loaded machine that has not scheduled their threads yet) is
// not ready, and becomes ready at the first poll without a hold-down.
func TestNotReadyUntilWorkersPoll(t *testing.T) {
	d := &daemon{log: slog.New(slog.DiscardHandler), beats: make([]heartbeat, 2),
		so: newScaleOut(config.Export{WorkerStall: 3 * time.Second})}
	t0 := time.Unix(1000, 0)
	h := newHealth(d.so.cfg.WorkerStall, len(d.beats), t0)
	d.scaleOutStep(h, t0.Add(10*time.Millisecond))
	if got := d.so.notReady; got != "starting: worker 0 not polling yet" {
		t.Fatalf("no worker has polled: not_ready %q", got)
	}
	d.beats[0].n.Add(1)
	d.scaleOutStep(h, t0.Add(20*time.Millisecond))
	if got := d.so.notReady; got != "starting: worker 1 not polling yet" {
		t.Fatalf("worker 1 has not polled: not_ready %q", got)
	}
	d.beats[1].n.Add(1)
	d.scaleOutStep(h, t0.Add(30*time.Millisecond))
	if got := d.so.notReady; got != "" {
		t.Fatalf("both workers poll: not_ready %q", got)
	}
	// A worker that never starts is a stall once worker_stall passes.
	d2 := &daemon{log: d.log, beats: make([]heartbeat, 1), so: newScaleOut(config.Export{WorkerStall: time.Second})}
	h2 := newHealth(time.Second, 1, t0)
	d2.scaleOutStep(h2, t0.Add(1100*time.Millisecond))
	if got := d2.so.notReady; got != "worker 0 stalled (no poll for over 1s)" {
		t.Fatalf("worker never polled for 1.1 s: not_ready %q", got)
	}
}
