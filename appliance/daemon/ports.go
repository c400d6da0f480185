package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// port is one running port: its config, its backend and what the control
// plane knows about its link.
type port struct {
	cfg     config.Port
	index   int
	choice  choice
	fp      fwd.Port
	xdp     *afxdp.Port  // nil unless an AF_XDP backend
	closeFn func() error // releases the backend; nil: fp.Close
	modes   []string     // per queue, for backends other than AF_XDP
	ifindex int          // 0: no kernel interface (vfio, mlx5-sim), link state unknown
	up      atomic.Bool
	// added are the addresses ovfwd put on the kernel interface (and
	// removes at exit); addresses the interface already had stay.
	added []netip.Prefix
	// kernelAddrs are addresses an operator put on the kernel interface
	// that the engine took over (not in the config).
	kernelMu    sync.Mutex
	kernelAddrs map[netip.Prefix]bool
}

// openPort builds the backend c chose for p. queues is the queue count
// for backends that cannot ask a kernel device (0 in the config).
func openPort(p *config.Port, index int, c choice, vpnPort uint16, queues int, bridge bool, share *afxdp.Share, fast *afxdp.FastPath, log *slog.Logger) (*port, error) {
	pt := &port{cfg: *p, index: index, choice: c, kernelAddrs: map[netip.Prefix]bool{}}
	pt.up.Store(true)
	if p.Queues > 0 {
		queues = p.Queues
	}
	switch c.driver {
	case config.DriverAFXDP, config.DriverAFXDPCopy:
		return pt, pt.openAFXDP(vpnPort, share, fast, log)
	case config.DriverVFIO:
		pc := mlx5PortConfig(p, index, queues, bridge)
		fp, closeAll, err := openVFIO(p, pc, log)
		if err != nil {
			return nil, fmt.Errorf("port %s: %s: %w", p.Name, c.reason, err)
		}
		pt.fp, pt.closeFn = fp, closeAll
		pt.modes = mlx5Modes(pc, "vfio")
		for q, m := range pt.modes {
			log.Info("queue mode", "port", p.Name, "pci", p.PCI, "queue", q, "mode", m)
		}
		return pt, nil
	}
	if b, ok := registeredMLX5(c.driver); ok {
		pc := mlx5PortConfig(p, index, queues, bridge)
		fp, closeFn, err := openRegistered(b, p, pc, log)
		if err != nil {
			return nil, fmt.Errorf("port %s: %s: %w", p.Name, c.driver, err)
		}
		pt.fp, pt.closeFn = fp, closeFn
		pt.modes = mlx5Modes(pc, b.mode)
		for q, m := range pt.modes {
			log.Info("queue mode", "port", p.Name, "queue", q, "mode", m)
		}
		return pt, nil
	}
	return nil, fmt.Errorf("port %s: driver %q is not built into this program", p.Name, c.driver)
}

// openAFXDP opens an AF_XDP port on the kernel interface p.IfName.
func (pt *port) openAFXDP(vpnPort uint16, share *afxdp.Share, fast *afxdp.FastPath, log *slog.Logger) error {
	p, c, index := &pt.cfg, pt.choice, pt.index
	if p.IfName == "" {
		return fmt.Errorf("port %s: %s needs ifname", p.Name, c.driver)
	}
	link, err := netlink.LinkByName(p.IfName)
	if err != nil {
		return fmt.Errorf("port %s: interface %s: %w", p.Name, p.IfName, err)
	}
	pt.ifindex = link.Attrs().Index
	// The kernel interface owns MTU and MAC on a shared NIC; ovfwd uses
	// what it has and says so when the file asks for something else.
	if m := link.Attrs().MTU; m != p.MTU {
		log.Warn("port MTU differs from the config; using the interface's (set it with ip link)", "port", p.Name, "ifname", p.IfName, "mtu", m, "config", p.MTU)
	}
	if p.MAC != nil && p.MAC.String() != link.Attrs().HardwareAddr.String() {
		log.Warn("port mac is not applied to AF_XDP ports; using the interface's", "port", p.Name, "mac", link.Attrs().HardwareAddr.String())
	}
	if a := p.AFXDP; a.FrameSize != 4096 || a.Frames != 4096 || a.RxRing != 2048 || a.TxRing != 2048 || a.FillRing != 2048 || a.CompRing != 2048 {
		// afxdp.Options has no ring or UMEM sizes yet; say so rather than
		// pretend the file took effect.
		log.Warn("[port.afxdp] frame and ring sizes are not applied yet; using the afxdp package's", "port", p.Name)
	}
	// The kernel keeps the port's addresses too: ARP/ND and forwarded
	// traffic go to ovfwd, but SSH, the VPN control channel and pings to
	// the box reach the kernel through the steering program's XDP_PASS.
	if err := pt.addKernelAddrs(link); err != nil {
		pt.removeKernelAddrs(log)
		return fmt.Errorf("port %s: %w", p.Name, err)
	}
	o := afxdp.Options{
		Queues:     p.Queues,
		NoZeroCopy: c.driver == config.DriverAFXDPCopy,
		VPNPort:    vpnPort,
		Pool:       uint16(index + 1), // when it cannot join share
		Share:      share,
		FastPath:   fast, // nil: no fast path in the steering program
		Index:      uint16(index),
		Logf:       func(format string, args ...any) { log.Debug(fmt.Sprintf(format, args...), "port", p.Name) },
	}
	switch p.AFXDP.XDPMode {
	case config.XDPNative:
		o.Attach = afxdp.ModeNative
	case config.XDPGeneric:
		o.Attach = afxdp.ModeGeneric
	}
	x, err := afxdp.Open(p.IfName, o)
	if err != nil {
		pt.removeKernelAddrs(log)
		return fmt.Errorf("port %s: %w", p.Name, err)
	}
	if p.AFXDP.ZeroCopy == config.On {
		for _, m := range x.Modes() {
			if !m.ZeroCopy {
				x.Close()
				pt.removeKernelAddrs(log)
				return fmt.Errorf("port %s: zerocopy = on but %s", p.Name, m)
			}
		}
	}
	pt.xdp, pt.fp = x, x
	for _, m := range x.Modes() {
		log.Info("queue mode", "port", p.Name, "ifname", p.IfName, "queue", m.Queue,
			"zerocopy", m.ZeroCopy, "xdp", m.Attach.String(), "why", m.Why)
	}
	return nil
}

func (pt *port) addKernelAddrs(link netlink.Link) error {
	have := map[netip.Prefix]bool{}
	if list, err := netlink.AddrList(link, unix.AF_UNSPEC); err == nil {
		for _, a := range list {
			if p, ok := prefixOf(a.IPNet); ok {
				have[p] = true
			}
		}
	}
	for _, p := range pt.cfg.Addresses {
		if have[p] {
			continue
		}
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD // usable at once; ovfwd answers ND for it anyway
		}
		if err := netlink.AddrAdd(link, a); err != nil {
			return fmt.Errorf("adding %v to %s: %w", p, pt.cfg.IfName, err)
		}
		pt.added = append(pt.added, p)
	}
	return nil
}

func (pt *port) removeKernelAddrs(log *slog.Logger) {
	link, err := netlink.LinkByName(pt.cfg.IfName)
	if err != nil {
		return
	}
	for _, p := range pt.added {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if err := netlink.AddrDel(link, a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			log.Warn("removing kernel address", "port", pt.cfg.Name, "addr", p, "err", err)
		}
	}
	pt.added = nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), bits), true
}

// close detaches the port's XDP program, releases its queues and takes
// back the kernel addresses ovfwd added. The workers must have stopped.
func (pt *port) close(log *slog.Logger) error {
	var err error
	switch {
	case pt.closeFn != nil:
		err = pt.closeFn()
	case pt.fp != nil:
		err = pt.fp.Close()
	}
	pt.removeKernelAddrs(log)
	return err
}

// queueModes describes every queue for status.
func (pt *port) queueModes() []string {
	if pt.xdp == nil {
		return pt.modes
	}
	var out []string
	for _, m := range pt.xdp.Modes() {
		mode := "copy"
		if m.ZeroCopy {
			mode = "zero-copy"
		}
		mode += ", " + m.Attach.String() + " XDP"
		if m.Why != "" {
			mode += " (" + m.Why + ")"
		}
		out = append(out, mode)
	}
	return out
}

// mlx5Modes describes the queues of a userspace mlx5 port.
func mlx5Modes(pc mlx5.FwdPortConfig, backend string) []string {
	edge := "reuse"
	if pc.Tx.PadToEdge {
		edge = "nop"
	}
	var out []string
	for range max(pc.Queues, 1) {
		out = append(out, fmt.Sprintf("%s, striding RQ, prefetch distance %d, tx edge %s", backend, pc.Rx.PrefetchDistance, edge))
	}
	return out
}

// startPorts opens every [[port]] on the backend chosen for it and builds
// the engine over them. It returns the XDP fast path the AF_XDP ports'
// steering programs were built with (nil: none), for startFastPath.
func (d *daemon) startPorts(cfg *config.Config) (*afxdp.FastPath, error) {
	fns, err := mlx5.ListFunctions(mlx5.DefaultPaths)
	if err != nil {
		d.log.Debug("no PCI listing; auto ports use AF_XDP", "err", err)
	}
	var vpnPort uint16
	if cfg.VPN.Enabled {
		vpnPort = uint16(cfg.VPN.Port)
	}
	fports := make([]fwd.Port, 0, len(cfg.Ports))
	// AF_XDP ports share one UMEM per queue index, so the engine forwards
	// between them without a copy; its pool id is past every port's own.
	share := afxdp.NewShare(uint16(len(cfg.Ports)+1), len(cfg.Ports))
	fast, err := newFastPath(cfg.Appliance, d.log)
	if err != nil {
		return nil, err
	}
	for i := range cfg.Ports {
		pc := &cfg.Ports[i]
		c := choose(pc, fns)
		d.log.Info("port backend", "port", pc.Name, "driver", c.driver, "reason", c.reason)
		pt, err := openPort(pc, i, c, vpnPort, max(len(cfg.Appliance.Workers), 1), cfg.Appliance.Mode == config.ModeBridge, share, fast, d.log)
		if err != nil {
			if fast != nil {
				fast.Close()
			}
			return nil, err
		}
		d.ports = append(d.ports, pt)
		fports = append(fports, pt.fp)
	}
	if d.engine, err = fwd.New(engineConfig(cfg.Appliance, cfg.VPN.Enabled), fports); err != nil {
		return nil, err
	}
	for _, pt := range d.ports {
		if err := d.configurePort(cfg.Appliance.Mode, pt); err != nil {
			return nil, err
		}
	}
	return fast, nil
}

// configurePort gives the engine a port's addresses (router mode) or VLANs (bridge mode).
func (d *daemon) configurePort(mode string, pt *port) error {
	if mode == config.ModeBridge {
		if len(pt.cfg.VLANs) == 0 {
			return nil
		}
		v := fwd.PortVLAN{Untagged: 1}
		for _, id := range pt.cfg.VLANs {
			v.Tagged = append(v.Tagged, uint16(id))
		}
		return d.engine.SetPortVLAN(pt.index, v)
	}
	for _, a := range pt.cfg.Addresses {
		if err := d.engine.AddAddress(pt.index, a); err != nil {
			return fmt.Errorf("port %s: %w", pt.cfg.Name, err)
		}
	}
	return nil
}

func (d *daemon) portIndex(name string) (int, bool) {
	for i, pt := range d.ports {
		if pt.cfg.Name == name {
			return i, true
		}
	}
	return 0, false
}
