package daemon

import (
	"net"
	"net/netip"
	"slices"

	"github.com/ovfwd/ovfwd/appliance/nlsync"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
)

// startKernelSync follows the kernel's routes, neighbours, links and
// addresses ([netlink]); kernel routes reach the route table in batches
// through the kernel route queue.
func (d *daemon) startKernelSync(c config.Netlink) error {
	d.kq = newKernelQueue()
	d.control.Add(1)
	go func() { defer d.control.Done(); d.kq.run(d.fib, d.stop) }()
	return d.startNetlink(c)
}

func (d *daemon) startNetlink(c config.Netlink) error {
	ifs := map[int]int{}
	for i, pt := range d.ports {
		if pt.ifindex != 0 {
			ifs[pt.ifindex] = i
		}
	}
	s, err := nlsync.Start(nlsync.Options{Routes: c.Routes, Table: c.Table, Neighbours: c.Neighbours, Ports: ifs, Logger: d.log}, &nlSink{d})
	if err != nil {
		return err
	}
	d.nl = s
	d.log.Info("netlink sync", "routes", c.Routes, "table", c.Table, "neighbours", c.Neighbours)
	return nil
}

// nlSink routes nlsync's reports to the route table and neighbours.
type nlSink struct{ d *daemon }

func (s *nlSink) KernelRoute(p netip.Prefix, nh fwd.NextHop, ok bool) {
	s.d.kq.put(p, nh, ok)
}

func (s *nlSink) KernelNeighbour(port int, ip netip.Addr, mac net.HardwareAddr) {
	s.d.neigh.KernelNeighbour(port, ip, mac)
}

func (s *nlSink) Link(port int, up bool) {
	pt := s.d.ports[port]
	if pt.up.Swap(up) != up {
		s.d.log.Warn("link state", "port", pt.cfg.Name, "up", up)
	}
	s.d.fib.setLink(port, up)
}

// Address keeps an AF_XDP port's kernel addresses and the engine's in
// step. The steering program hands ARP/ND to ovfwd, so an address only the
// kernel had could never be resolved: the engine must own it too (answer
// ARP/ND, route its subnet), and the steering program must pass traffic
// for it to the kernel.
func (s *nlSink) Address(port int, p netip.Prefix, added bool) {
	d := s.d
	pt := d.ports[port]
	if pt.xdp == nil {
		return
	}
	if err := pt.xdp.RefreshLocal(); err != nil {
		d.log.Warn("kernel addresses not refreshed in the steering program", "port", pt.cfg.Name, "err", err)
	}
	d.mu.Lock()
	router := d.cfg.Appliance.Mode == config.ModeRouter
	d.mu.Unlock()
	if !router || slices.Contains(pt.cfg.Addresses, p) {
		return // config addresses stay the engine's whatever the kernel does
	}
	pt.kernelMu.Lock()
	defer pt.kernelMu.Unlock()
	switch {
	case added && !pt.kernelAddrs[p]:
		if err := d.engine.AddAddress(port, p); err != nil {
			d.log.Warn("kernel address not given to the engine", "port", pt.cfg.Name, "addr", p, "err", err)
			return
		}
		pt.kernelAddrs[p] = true
		d.log.Info("address from the kernel", "port", pt.cfg.Name, "addr", p)
	case !added && pt.kernelAddrs[p]:
		delete(pt.kernelAddrs, p)
		if err := d.engine.RemoveAddress(port, p); err != nil {
			d.log.Warn("kernel address not taken from the engine", "port", pt.cfg.Name, "addr", p, "err", err)
			return
		}
		d.log.Info("address removed by the kernel", "port", pt.cfg.Name, "addr", p)
	}
}
