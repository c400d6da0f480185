package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/fwd"
)

// Appliance is ovfwd's engine running on AF_XDP ports in a namespace.
type Appliance struct {
	Engine *fwd.Engine
	Ports  []*afxdp.Port

	mirror    *afxdp.NeighMirror
	installed map[mirrored]bool // kernel entries we made, removed again on Close
	stop      chan struct{}
	wg        sync.WaitGroup
	punts     atomic.Uint64
	mirrored  atomic.Uint64
	mirrorErr atomic.Uint64
	closeOnce sync.Once
}

type mirrored struct {
	ifindex int
	addr    netip.Addr
}

// StartAppliance opens the AF_XDP ports ifnames in ns, configures the
// engine from cfg and starts one worker per queue plus the control loop,
// which mirrors learned neighbours into the kernel.
func StartAppliance(ns *netns.NS, ifnames []string, cfg Config, logf func(string, ...any)) (a *Appliance, err error) {
	a = &Appliance{stop: make(chan struct{}), installed: map[mirrored]bool{}}
	defer func() {
		if err != nil {
			a.Close()
			a = nil
		}
	}()
	err = ns.Do(func() error {
		sh := afxdp.NewShare(uint16(len(ifnames)+1), len(ifnames)) // as the daemon does
		for i, ifn := range ifnames {
			p, err := afxdp.Open(ifn, afxdp.Options{Queues: 0, Pool: uint16(i + 1), Index: uint16(i), VPNPort: cfg.VPNPort, Share: sh, Logf: logf})
			if err != nil {
				return err
			}
			a.Ports = append(a.Ports, p)
		}
		var err error
		a.mirror, err = afxdp.NewNeighMirror()
		return err
	})
	if err != nil {
		return
	}
	ports := make([]fwd.Port, len(a.Ports))
	for i, p := range a.Ports {
		ports[i] = p
	}
	if a.Engine, err = NewEngine(cfg, ports); err != nil {
		return
	}
	for q, w := range a.Engine.Workers() {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); afxdp.RunWorker(w, a.Ports, q, a.stop) }()
	}
	a.wg.Add(1)
	go func() { defer a.wg.Done(); ServeEngine(a.Engine, a.stop, &a.punts, a.mirrorEvent) }()
	return a, nil
}

// NewEngine is the fwd engine over ports in cfg.Mode; in router mode it
// owns cfg.Ports[i].Addrs on ports[i].
func NewEngine(cfg Config, ports []fwd.Port) (*fwd.Engine, error) {
	e, err := fwd.New(fwd.Config{Mode: cfg.Mode}, ports)
	if err != nil {
		return nil, err
	}
	if cfg.Mode == fwd.ModeRouter {
		for i := range ports {
			for _, pfx := range cfg.Ports[i].Addrs {
				if err := e.AddAddress(i, pfx); err != nil {
					return nil, err
				}
			}
		}
	}
	return e, nil
}

// ServeEngine is e's control loop until stop closes: every 50 ms the
// periodic service (neighbour creation, probes, expiry), then each event
// to onEvent, then the punted frames, which are counted into punts and
// dropped.
func ServeEngine(e *fwd.Engine, stop <-chan struct{}, punts *atomic.Uint64, onEvent func(fwd.Event)) {
	tk := time.NewTicker(50 * time.Millisecond)
	defer tk.Stop()
	var evs []fwd.Event
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
		}
		e.Service()
		evs = e.Events(evs[:0])
		for _, ev := range evs {
			onEvent(ev)
		}
		punts.Add(uint64(e.Punts(func(int, []byte) {})))
	}
}

// mirrorEvent copies a learned or expired neighbour into the kernel (the kernel
// already gets the appliance's own traffic from the steering program).
func (a *Appliance) mirrorEvent(ev fwd.Event) {
	ifindex := a.Ports[ev.Port].Ifindex()
	var err error
	switch ev.Kind {
	case fwd.EventNeighbourLearned:
		if err = a.mirror.Set(ifindex, ev.Addr, ev.MAC); err == nil {
			a.installed[mirrored{ifindex, ev.Addr}] = true
		}
	case fwd.EventNeighbourExpired:
		err = a.mirror.Delete(ifindex, ev.Addr)
		delete(a.installed, mirrored{ifindex, ev.Addr})
	}
	if err != nil {
		a.mirrorErr.Add(1)
	} else {
		a.mirrored.Add(1)
	}
}

// Mirrored is how many neighbour events reached the kernel, and how many failed.
func (a *Appliance) Mirrored() (ok, failed uint64) { return a.mirrored.Load(), a.mirrorErr.Load() }

// Close stops the workers and the control loop, detaches the XDP programs
// and closes the sockets.
func (a *Appliance) Close() error {
	var errs []error
	a.closeOnce.Do(func() {
		close(a.stop)
		a.wg.Wait()
		for _, p := range a.Ports {
			errs = append(errs, p.Close())
		}
		if a.mirror != nil {
			// The kernel keeps permanent entries forever: take ours back,
			// or they would go stale once ovfwd no longer answers for them.
			for m := range a.installed {
				_ = a.mirror.Delete(m.ifindex, m.addr)
			}
			errs = append(errs, a.mirror.Close())
		}
	})
	return errors.Join(errs...)
}

// Modes describes every queue's AF_XDP and XDP mode.
func (a *Appliance) Modes() []string {
	var out []string
	for _, p := range a.Ports {
		for _, m := range p.Modes() {
			out = append(out, fmt.Sprintf("%s %s", p.Info().Name, m))
		}
	}
	return out
}
