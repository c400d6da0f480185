package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/appliance/nlsync"
	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/fwd"
)

// Appliance is ovfwd's engine running on AF_XDP ports in a namespace.
type Appliance struct {
	Engine *fwd.Engine
	Ports  []*afxdp.Port

	mirror    *nlsync.NeighMirror
	installed map[mirrored]bool // kernel entries we made, removed again on Close
	run       *runner.Runner
	mirrored  atomic.Uint64
	mirrorErr atomic.Uint64
	closeOnce sync.Once
}

type mirrored struct {
	ifindex int
	addr    netip.Addr
}

// StartAppliance opens the AF_XDP ports ifnames in ns, configures the
// engine from cfg and runs it as the daemon does (appliance/runner): one
// pinned worker per queue plus the control loop, which mirrors learned
// neighbours into the kernel.
func StartAppliance(ns *netns.NS, ifnames []string, cfg Config, logf func(string, ...any)) (a *Appliance, err error) {
	a = &Appliance{installed: map[mirrored]bool{}}
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
		a.mirror, err = nlsync.NewNeighMirror()
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
	a.run, err = runner.Start(a.Engine, ports, runner.Options{Event: a.mirrorEvent})
	return a, err
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

// mirrorEvent copies a learned or expired neighbour into the kernel (the kernel
// already gets the appliance's own traffic from the steering program).
func (a *Appliance) mirrorEvent(ev fwd.Event) {
	ifindex := a.Ports[ev.Port].Ifindex()
	var err error
	switch ev.Kind {
	case fwd.EventNeighbourLearned:
		if err = a.mirror.Set(ifindex, ev.Addr, ev.MAC[:], ev.Confirmed); err == nil {
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
		if a.run != nil {
			errs = append(errs, a.run.Stop(0))
		}
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
