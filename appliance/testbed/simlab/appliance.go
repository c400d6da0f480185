package simlab

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5/model/fullsim"
)

// Appliance is ovfwd's engine running on mlx5-sim ports whose cables are
// plugged into interfaces of a namespace.
type Appliance struct {
	Engine  *fwd.Engine
	Ports   []fwd.Port
	Devices []*fullsim.Device
	Wires   []*fullsim.Wire

	run       *runner.Runner
	closeOnce sync.Once
	closeErr  error
}

// PortMAC is model port i's MAC (locally administered).
func PortMAC(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x00, 0x5e, 0x51, 0x00, byte(i + 1)}
}

// StartAppliance brings up one model port per interface of ifnames in ns
// (fullsim.NewPort: bring-up, queues, RSS), plugs each into its interface,
// configures the engine from cfg (cfg.Queues model queues per port) and
// runs it as the daemon does (appliance/runner). On failure it undoes
// everything.
func StartAppliance(ns *netns.NS, ifnames []string, cfg lab.Config) (a *Appliance, err error) {
	a = &Appliance{}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.Close())
			a = nil
		}
	}()
	queues := max(cfg.Queues, 1)
	for i, ifn := range ifnames {
		p, dev, err := fullsim.NewPort(fmt.Sprintf("sim%d", i), PortMAC(i), 1500, queues)
		if err != nil {
			return a, fmt.Errorf("simlab: port %d: %w", i, err)
		}
		a.Ports = append(a.Ports, p)
		a.Devices = append(a.Devices, dev)
		var w *fullsim.Wire
		if err := ns.Do(func() (err error) { w, err = fullsim.AttachWire(dev, ifn); return }); err != nil {
			return a, err
		}
		a.Wires = append(a.Wires, w)
	}
	if a.Engine, err = lab.NewEngine(cfg, a.Ports); err != nil {
		return a, err
	}
	// Events have no kernel to go to here, nor do punted frames.
	a.run, err = runner.Start(a.Engine, a.Ports, runner.Options{})
	return a, err
}

// Punts is how many frames the engine handed to the control plane.
func (a *Appliance) Punts() uint64 {
	if a.run == nil {
		return 0
	}
	return a.run.Punts()
}

// Close stops the workers and the control loop, unplugs the wires, and
// closes the ports, which tears each model down and reports what it still
// held; errors the devices met while running are reported too.
func (a *Appliance) Close() error {
	a.closeOnce.Do(func() {
		var errs []error
		if a.run != nil {
			errs = append(errs, a.run.Stop(0))
		}
		for _, w := range a.Wires {
			errs = append(errs, w.Close())
		}
		for i, d := range a.Devices {
			if err := d.Err(); err != nil {
				errs = append(errs, fmt.Errorf("simlab: port %d: device errors: %w", i, err))
			}
		}
		for i, p := range a.Ports {
			if err := p.Close(); err != nil {
				errs = append(errs, fmt.Errorf("simlab: port %d: close: %w", i, err))
			}
		}
		a.closeErr = errors.Join(errs...)
	})
	return a.closeErr
}
