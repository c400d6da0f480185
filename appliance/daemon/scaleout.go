package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ovfwd/ovfwd/appliance/export"
	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
)

// scaleOut is what running several appliances behind a routing daemon
// needs from one: readiness (serving, not draining, data plane healthy),
// the export of the routes it owns while ready, and drain.
type scaleOut struct {
	cfg  config.Export
	exp  *export.Exporter // nil when [export] is off
	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	started  bool
	stopping bool
	notReady string // "" when ready
	// holdUntil keeps the routes withdrawn for worker_stall after a
	// data-plane failure clears, so a box starved of CPU now and then, or
	// a flapping link, does not make the upstream flap too.
	holdUntil time.Time
	lastFail  string
	drain     *status.Drain
	evicted   bool   // the drain deadline passed and the clients were told to go
	expErr    string // the last export error, "" after a clean Set
}

func newScaleOut(c config.Export) *scaleOut {
	return &scaleOut{cfg: c, kick: make(chan struct{}, 1), done: make(chan struct{}), notReady: "starting"}
}

// poke makes the loop recompute at once (a peer came or went, drain).
func (s *scaleOut) poke() {
	if s == nil {
		return
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// startScaleOut runs once the appliance serves: it opens the export
// (removing a crashed run's routes) and starts the loop that keeps the
// exported routes equal to what the appliance owns while it is ready.
func (d *daemon) startScaleOut() error {
	s := d.so
	if s.cfg.Enabled {
		exp, stale, err := export.Open(export.Options{Device: s.cfg.Device, Table: s.cfg.Table, Protocol: s.cfg.Protocol, Metric: s.cfg.Metric})
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.exp = exp
		s.mu.Unlock()
		if stale > 0 {
			d.log.Warn("removed routes a previous run left in the export table", "routes", stale, "table", s.cfg.Table, "protocol", s.cfg.Protocol)
		}
		d.log.Info("route export", "device", s.cfg.Device, "table", s.cfg.Table, "protocol", s.cfg.Protocol, "metric", s.cfg.Metric, "worker_stall", s.cfg.WorkerStall)
	}
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	h := newHealth(s.cfg.WorkerStall, len(d.beats), time.Now())
	every := min(max(s.cfg.WorkerStall/4, 20*time.Millisecond), 250*time.Millisecond)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			d.scaleOutStep(h, time.Now())
			select {
			case <-s.done:
				return
			case <-tk.C:
			case <-s.kick:
			}
		}
	}()
	return nil
}

// scaleOutStep decides readiness, exports accordingly and enforces a
// drain's deadline.
func (d *daemon) scaleOutStep(h *health, now time.Time) {
	s := d.so
	failed := h.check(now, d.beats, d.linkDown)
	s.mu.Lock()
	reason := s.readiness(now, failed)
	if reason == "" {
		reason = starting(d.beats)
	}
	if reason != s.notReady {
		if reason == "" {
			d.log.Info("ready")
		} else {
			d.log.Warn("not ready", "reason", reason)
		}
		s.notReady = reason
	}
	evict := s.drain != nil && !s.evicted && !s.drain.Deadline.IsZero() && now.After(s.drain.Deadline)
	if evict {
		s.evicted = true
	}
	s.mu.Unlock()
	if evict && d.vpn != nil {
		d.log.Warn("drain deadline passed; telling the remaining clients to reconnect elsewhere")
		go d.vpn.srv.EvictAll()
	}
	if s.exp == nil {
		return
	}
	var want []netip.Prefix
	switch {
	case reason == "":
		want = d.owned()
	case reason == "draining" && d.vpn != nil:
		// The pools go, so the routing daemon sends new traffic
		// elsewhere; the clients still connected stay reachable through
		// their own host routes (and iroutes) until they leave.
		want = append(d.vpn.peerHostRoutes(), d.vpn.ownedIRoutes()...)
	}
	err := s.exp.Set(want)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	s.mu.Lock()
	if msg != s.expErr && msg != "" {
		d.log.Error("route export", "err", err)
	}
	s.expErr = msg
	s.mu.Unlock()
}

// readiness is why the appliance is not ready ("" when it is), given
// what the health check found now. Caller holds s.mu.
func (s *scaleOut) readiness(now time.Time, failed string) string {
	reason := failed
	switch {
	case failed != "":
		s.holdUntil, s.lastFail = now.Add(s.cfg.WorkerStall), failed
	case now.Before(s.holdUntil):
		reason = "recovering from: " + s.lastFail
	}
	switch {
	case s.stopping:
		reason = "stopping"
	case s.drain != nil:
		reason = "draining"
	}
	return reason
}

// linkDown names the first port whose kernel link is down, or "".
func (d *daemon) linkDown() string {
	for _, pt := range d.ports {
		if pt.ifindex != 0 && !pt.up.Load() {
			return fmt.Sprintf("port %s link down", pt.cfg.Name)
		}
	}
	return ""
}

// owned is what the appliance announces: its pools and the iroutes of
// the clients connected now.
func (d *daemon) owned() []netip.Prefix {
	d.mu.Lock()
	v := d.cfg.VPN
	d.mu.Unlock()
	var out []netip.Prefix
	for _, p := range []netip.Prefix{v.PoolV4, v.PoolV6} {
		if p.IsValid() {
			out = append(out, p.Masked())
		}
	}
	out = append(out, d.so.cfg.Routes...)
	if d.vpn != nil {
		out = append(out, d.vpn.ownedIRoutes()...)
	}
	return out
}

// stopScaleOut withdraws the exported routes first thing at shutdown, so
// the routing daemon moves traffic away while the tunnels are closed.
func (d *daemon) stopScaleOut() error {
	s := d.so
	if s == nil {
		return nil
	}
	s.mu.Lock()
	s.stopping = true
	started := s.started
	s.mu.Unlock()
	if started {
		close(s.done)
		s.wg.Wait()
	}
	if s.exp == nil {
		return nil
	}
	err := s.exp.Close()
	if err == nil {
		d.log.Info("exported routes withdrawn")
	}
	return err
}

// setDrain starts (or with cancel ends) draining: the exported routes are
// withdrawn, new clients are told to reconnect elsewhere, and the clients
// still connected when deadline passes (0: none) are told the same.
func (d *daemon) setDrain(deadline time.Duration, cancel bool) (status.Drain, error) {
	if d.vpn == nil {
		return status.Drain{}, errors.New("no VPN server to drain ([vpn] enabled = false)")
	}
	s := d.so
	s.mu.Lock()
	var out status.Drain
	switch {
	case cancel:
		s.drain, s.evicted = nil, false
		d.vpn.srv.SetDraining(false)
	case s.drain != nil:
		// Draining already: a new deadline replaces the old one.
		s.drain.Deadline = time.Time{}
		if deadline > 0 {
			s.drain.Deadline = time.Now().Add(deadline)
		}
		s.evicted = false
		out = *s.drain
	default:
		s.drain = &status.Drain{Since: time.Now()}
		if deadline > 0 {
			s.drain.Deadline = s.drain.Since.Add(deadline)
		}
		d.vpn.srv.SetDraining(true)
		out = *s.drain
	}
	s.mu.Unlock()
	if cancel {
		d.log.Info("drain cancelled")
	} else {
		d.log.Warn("draining", "deadline", out.Deadline)
	}
	s.poke()
	return out, nil
}

// scaleOutSnapshot fills readiness, drain and export into a snapshot.
func (d *daemon) scaleOutSnapshot(st *status.Snapshot) {
	s := d.so
	if s == nil {
		return
	}
	s.mu.Lock()
	st.Ready, st.NotReady = s.notReady == "", s.notReady
	if s.drain != nil {
		dr := *s.drain
		st.Drain = &dr
	}
	expErr, exp := s.expErr, s.exp
	s.mu.Unlock()
	if st.Drain != nil && st.VPN != nil {
		st.Drain.Peers = len(st.VPN.Peers)
	}
	if exp != nil {
		e := &status.Export{Table: s.cfg.Table, Protocol: s.cfg.Protocol, Error: expErr}
		for _, p := range exp.Installed() {
			e.Routes = append(e.Routes, p.String())
		}
		slices.Sort(e.Routes)
		st.Export = e
	}
}

// drainCommand carries out `ovfwd drain`.
func (d *daemon) drainCommand(r status.Request) status.Reply {
	cancel := r.Target == status.DrainCancel
	dr, err := d.setDrain(r.DrainDeadline(), cancel)
	if err != nil {
		return status.Reply{Error: err.Error()}
	}
	if cancel {
		return status.Reply{}
	}
	return status.Reply{Drain: &dr}
}
