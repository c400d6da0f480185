package daemon

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/vpn"
)

// startWorkers runs the engine (appliance/runner): one worker per queue
// index pinned to the configured CPUs, or to every CPU this process may run
// on when the list is empty, assigned in order (wrapping when there are
// more queues than CPUs); and the control loop, which mirrors the
// neighbours the workers learn, hands punts to the exception TAPs and runs
// the VPN's and NAT's timers.
func (d *daemon) startWorkers(a config.Appliance) error {
	if ws := d.engine.Workers(); len(a.Workers) > 0 && len(a.Workers) != len(ws) {
		d.log.Warn("worker CPUs and queues differ; CPUs are reused in order", "cpus", len(a.Workers), "queues", len(ws))
	}
	interval := serviceInterval
	if d.taps != nil {
		interval = tapServiceInterval
	}
	d.beats = make([]heartbeat, len(d.engine.Workers()))
	nev := 0
	o := runner.Options{
		CPUs: a.Workers, Busy: a.Poll == config.PollBusy, Wake: d.wake, Interval: interval,
		Event: func(ev fwd.Event) { nev++; d.neigh.engineEvent(ev) },
		// Each worker's loop counter, for the control plane's stall check.
		Beat: func(q int) *atomic.Uint64 { return &d.beats[q].n },
		// AF_XDP ports' steering program already passes the box's own
		// traffic to the kernel; on ports ovfwd owns outright the workers'
		// punts go to the exception TAPs (Ports.Deliver ignores the rest).
		Punt: d.taps.Deliver,
	}
	var evs []vpn.Event
	var buf []byte
	if d.vpn != nil {
		buf = make([]byte, vpn.MaxControlPacket)
	}
	o.Tick = func() {
		d.neigh.flush()
		d.rateLog.flush()
		// A neighbour learned, moved or expired: its MAC changes in place,
		// so the tables' generation may not move.
		d.syncFast(nev > 0)
		nev = 0
		if d.vpn != nil {
			evs = d.vpn.service(time.Now(), evs, buf)
		}
		d.serviceNAT()
	}
	fports := make([]fwd.Port, len(d.ports))
	for i, pt := range d.ports {
		fports[i] = pt.fp
	}
	r, err := runner.Start(d.engine, fports, o)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	d.runner, d.cpus = r, r.CPUs()
	for q, cpu := range r.CPUs() {
		d.log.Info("worker", "queue", q, "cpu", cpu, "adaptive", !o.Busy)
		if err := r.NiceErrors()[q]; err != nil {
			// Best effort: the unit's LimitNICE (RLIMIT_NICE) allows it
			// without CAP_SYS_NICE; elsewhere the worker may keep nice 0.
			d.log.Warn("worker priority not raised", "queue", q, "nice", runner.WorkerNice, "err", err,
				"fix", "LimitNICE=-5 in the unit (as packaged), or CAP_SYS_NICE")
		}
	}
	return nil
}
