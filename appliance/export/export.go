package export

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Options are the [export] settings.
type Options struct {
	Device   string // the TUN device the routes lead to
	Table    int    // kernel routing table
	Protocol int    // rtm_protocol, 5..255
	Metric   int    // route priority
}

// Exporter keeps a kernel table's routes of one protocol equal to a set.
type Exporter struct {
	o Options

	mu        sync.Mutex
	h         *netlink.Handle
	tun       *os.File // the device lives as long as this descriptor
	link      int      // its ifindex
	installed map[netip.Prefix]bool
}

// Open makes an Exporter for the current network namespace: it creates
// the TUN device, removes every route of the protocol from the table (a
// previous run's) and reports how many it removed.
//
// The routes lead to the device, which is not persistent: when the
// process ends, however it ends, the kernel closes the descriptor,
// unregisters the device and deletes the routes through it, and the
// routing daemon withdraws them (Linux does not announce route deletions
// caused by a device going away for IPv4, but BIRD and FRR's zebra rescan
// or drop a vanished interface's routes themselves).
func Open(o Options) (*Exporter, int, error) {
	if o.Protocol < 5 || o.Protocol > 255 || o.Table <= 0 || o.Device == "" {
		return nil, 0, fmt.Errorf("export: device %q, protocol %d, table %d: want a device, protocol 5..255 and a table", o.Device, o.Protocol, o.Table)
	}
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, 0, fmt.Errorf("export: netlink: %w", err)
	}
	e := &Exporter{o: o, h: h, installed: map[netip.Prefix]bool{}}
	if err := e.openDevice(); err != nil {
		h.Close()
		return nil, 0, err
	}
	n, err := e.purge()
	if err != nil {
		e.tun.Close()
		h.Close()
		return nil, 0, err
	}
	return e, n, nil
}

// openDevice creates the non-persistent TUN device (tuntap.rst: TUNSETIFF
// without TUNSETPERSIST) and sets it up: the kernel takes routes only
// through a device that is up.
func (e *Exporter) openDevice() error {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("export: /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(e.o.Device)
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("export: device %q: %w", e.o.Device, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("export: device %s is in use (another ovfwd with the same [export] device?): %w", e.o.Device, err)
		}
		return fmt.Errorf("export: creating device %s: %w", e.o.Device, err)
	}
	e.tun = os.NewFile(uintptr(fd), "/dev/net/tun")
	l, err := e.h.LinkByName(e.o.Device)
	if err == nil {
		err = e.h.LinkSetUp(l)
	}
	if err != nil {
		e.tun.Close()
		return fmt.Errorf("export: device %s: %w", e.o.Device, err)
	}
	e.link = l.Attrs().Index
	return nil
}

// purge deletes every route of the protocol in the table.
func (e *Exporter) purge() (int, error) {
	filter := &netlink.Route{Table: e.o.Table, Protocol: netlink.RouteProtocol(e.o.Protocol)}
	n := 0
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := e.h.RouteListFiltered(fam, filter, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return n, fmt.Errorf("export: listing table %d: %w", e.o.Table, err)
		}
		for i := range rs {
			if err := e.h.RouteDel(&rs[i]); err != nil && !errors.Is(err, unix.ESRCH) {
				return n, fmt.Errorf("export: removing stale %v: %w", rs[i].Dst, err)
			}
			n++
		}
	}
	return n, nil
}

func (e *Exporter) route(p netip.Prefix) *netlink.Route {
	fam := unix.AF_INET
	if p.Addr().Is6() {
		fam = unix.AF_INET6
	}
	return &netlink.Route{
		Family: fam, Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
		LinkIndex: e.link, Scope: netlink.SCOPE_LINK,
		Table: e.o.Table, Protocol: netlink.RouteProtocol(e.o.Protocol), Priority: e.o.Metric,
	}
}

// Set makes the table hold exactly want (prefixes are masked): it adds
// what is missing and deletes what is no longer wanted. On error it keeps
// going and reports every failure; what failed is retried by the next Set.
func (e *Exporter) Set(want []netip.Prefix) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h == nil {
		return errors.New("export: closed")
	}
	keep := make(map[netip.Prefix]bool, len(want))
	for _, p := range want {
		keep[p.Masked()] = true
	}
	// Make before break: what is wanted goes in before what is not goes
	// out, so a drain that swaps a pool for its clients' host routes never
	// leaves them unannounced in between.
	var errs []error
	for p := range keep {
		if e.installed[p] {
			continue
		}
		// Replace, not add: a route a crashed run left (or an operator
		// added) with the same key is taken over rather than an error.
		if err := e.h.RouteReplace(e.route(p)); err != nil {
			errs = append(errs, fmt.Errorf("export: installing %v: %w", p, err))
			continue
		}
		e.installed[p] = true
	}
	for p := range e.installed {
		if keep[p] {
			continue
		}
		if err := e.h.RouteDel(e.route(p)); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("export: withdrawing %v: %w", p, err))
			continue
		}
		delete(e.installed, p)
	}
	return errors.Join(errs...)
}

// Installed is what the table holds now, sorted.
func (e *Exporter) Installed() []netip.Prefix {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]netip.Prefix, 0, len(e.installed))
	for p := range e.installed {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return out
}

// Device is the TUN device's name.
func (e *Exporter) Device() string { return e.o.Device }

// Close withdraws every exported route, removes the device and closes
// the socket.
func (e *Exporter) Close() error {
	err := e.Set(nil)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h != nil {
		e.h.Close()
		e.h = nil
		err = errors.Join(err, e.tun.Close())
	}
	return err
}
