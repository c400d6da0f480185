package daemon

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ovfwd/ovfwd/appliance/exctap"
	"github.com/ovfwd/ovfwd/config"
)

// startExceptionTAPs gives each port ovfwd owns outright (vfio, mlx5-sim:
// the kernel never sees their traffic) a TAP named ovx-<index> with the
// port's MAC, MTU and addresses, so the host stays reachable through the
// NIC: the engine punts frames for our addresses it does not answer itself
// (and copies of ARP/ND) to the TAP, and what the host writes to the TAP
// leaves through the port (Engine.Inject). AF_XDP ports need none: their
// steering program passes the host's traffic to the kernel.
func (d *daemon) startExceptionTAPs(cfg *config.Config) error {
	if cfg.Appliance.Mode != config.ModeRouter {
		return nil
	}
	for _, pt := range d.ports {
		if pt.choice.driver != config.DriverVFIO && pt.choice.driver != config.DriverMLX5Sim {
			continue
		}
		if d.taps == nil {
			d.taps = make(exctap.Ports, len(d.ports))
		}
		info := pt.fp.Info()
		name := exctap.Name(pt.index)
		tap, err := exctap.New(name, info.MAC, info.MTU)
		if err != nil {
			return fmt.Errorf("port %s: exception tap: %w", pt.cfg.Name, err)
		}
		d.taps[pt.index] = tap
		if err := addTAPAddresses(name, pt.cfg.Addresses); err != nil {
			return fmt.Errorf("port %s: exception tap %s: %w", pt.cfg.Name, name, err)
		}
		if err := d.engine.SetHostCopies(pt.index, true); err != nil {
			return err
		}
		tap.Start(d.engine, pt.index)
		d.log.Info("exception tap", "port", pt.cfg.Name, "tap", name, "addresses", pt.cfg.Addresses)
	}
	return nil
}

func addTAPAddresses(name string, addrs []netip.Prefix) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		nl, err := netlink.ParseAddr(a.String())
		if err != nil {
			return err
		}
		if a.Addr().Is6() {
			nl.Flags |= unix.IFA_F_NODAD // the engine already owns the address on the wire
		}
		if err := netlink.AddrAdd(link, nl); err != nil {
			return fmt.Errorf("address %s: %w", a, err)
		}
	}
	return nil
}

func (d *daemon) closeExceptionTAPs() {
	for _, t := range d.taps {
		if t != nil {
			_ = t.Close()
		}
	}
}
