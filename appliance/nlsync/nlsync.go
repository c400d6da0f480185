package nlsync

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Sink receives the kernel's state, translated to engine ports.
type Sink interface {
	// KernelRoute installs (nh, true) or withdraws (_, false) the kernel's
	// best route for p.
	KernelRoute(p netip.Prefix, nh fwd.NextHop, ok bool)
	// KernelNeighbour pins ip to mac on port, or unpins it when mac is nil
	// (the kernel dropped it, or it is no longer permanent). Unpinning what
	// was never pinned must be a no-op: the kernel reports its own failed
	// resolution attempts on ovfwd's ports too.
	KernelNeighbour(port int, ip netip.Addr, mac net.HardwareAddr)
	// Link reports a port's link going up or down.
	Link(port int, up bool)
	// Address reports an address added to (or removed from) a port's
	// kernel interface. IPv6 link-local addresses are not reported.
	Address(port int, p netip.Prefix, added bool)
}

// Options choose what to mirror.
type Options struct {
	Routes     bool
	Table      int // kernel routing table (254 = main)
	Neighbours bool
	// Ports maps kernel interface indexes to engine port numbers; routes
	// and neighbours on other interfaces are ignored.
	Ports  map[int]int
	Logger *slog.Logger
}

// Sync is a running mirror.
type Sync struct {
	o    Options
	sink Sink
	ns   vnetns.NsHandle
	done chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	routes map[netip.Prefix]metrics // prefix → its kernel routes by metric
	best   map[netip.Prefix]fwd.NextHop
	stale  map[netip.Prefix]bool // mirrored before a lost subscription, not yet confirmed
}

// Start subscribes and replays the current state (existing routes,
// neighbours and link states) into sink before following changes. Links
// and addresses are always followed; routes and neighbours as Options say.
func Start(o Options, sink Sink) (*Sync, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sync{o: o, sink: sink, ns: vnetns.None(), done: make(chan struct{}),
		routes: map[netip.Prefix]metrics{}, best: map[netip.Prefix]fwd.NextHop{}}
	// Every subscription, first or renewed from another thread, is made
	// in the namespace Start was called in. The handle is only passed to
	// netlink (which then calls setns, needing CAP_SYS_ADMIN) when the
	// subscribing thread is elsewhere: never in the daemon, whose threads
	// all share one namespace, only in tests that run Start on a thread
	// locked into another.
	ns, err := vnetns.Get()
	if err != nil {
		return nil, fmt.Errorf("nlsync: current namespace: %w", err)
	}
	s.ns = ns
	err = follow(s, "links", func(ch chan<- netlink.LinkUpdate, done <-chan struct{}, onErr func(error)) error {
		return netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{Namespace: s.foreign(), ListExisting: true, ErrorCallback: onErr})
	}, s.link, nil)
	if err == nil {
		err = follow(s, "addresses", func(ch chan<- netlink.AddrUpdate, done <-chan struct{}, onErr func(error)) error {
			return netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{Namespace: s.foreign(), ErrorCallback: onErr})
		}, s.addr, nil)
	}
	if err == nil && o.Routes {
		err = follow(s, "routes", func(ch chan<- netlink.RouteUpdate, done <-chan struct{}, onErr func(error)) error {
			err := netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{
				Namespace: s.foreign(), ListExisting: true, ErrorCallback: onErr,
				// A full table arrives in one burst; a small buffer
				// overflows (ENOBUFS) and costs a resubscription.
				ReceiveBufferSize: routeRcvBuf, ReceiveBufferForceSize: true,
			})
			if err == nil {
				s.sweepStale()
			}
			return err
		}, s.route, s.markStale)
	}
	if err == nil && o.Neighbours {
		err = follow(s, "neighbours", s.subscribeNeigh, s.neigh, nil)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// foreign returns the namespace to subscribe in when the calling thread is
// not in it, and nil (subscribe right here, no setns) when it is. Callers
// hold their thread locked (follow does) so the answer stays true until
// the socket is open.
func (s *Sync) foreign() *vnetns.NsHandle {
	cur, err := vnetns.Get()
	if err != nil {
		return &s.ns // cannot tell: let netlink try to enter it
	}
	defer cur.Close()
	if cur.Equal(s.ns) {
		return nil
	}
	return &s.ns
}

const (
	// resubscribeEvery paces attempts to get a lost subscription back.
	resubscribeEvery = 200 * time.Millisecond
)

// routeRcvBuf is the route subscription's socket buffer (a variable so a
// test can make it overflow). A BGP daemon installs a 100 k-route feed at
// tens of thousands of routes a second, each notification ~1 KiB of
// buffer: 32 MiB rides out a reader stalled for about a second on a busy
// machine, where 8 MiB overflowed (appliance/testbed/scaleout).
var routeRcvBuf = 32 << 20

// follow subscribes and hands every update to handle, on one goroutine,
// until Close. netlink closes the channel when the socket fails (ENOBUFS
// after a burst the reader could not keep up with): then follow calls
// resync, if any, and subscribes again, replaying the current state, so a
// lost message costs a short re-dump instead of a stale FIB.
func follow[T any](s *Sync, what string, subscribe func(chan<- T, <-chan struct{}, func(error)) error, handle func(T), resync func()) error {
	onErr := func(err error) {
		select {
		case <-s.done: // Close shut the socket under the reader
		default:
			s.o.Logger.Warn("netlink subscription error", "what", what, "err", err)
		}
	}
	ch := make(chan T, 256)
	if err := lockedSubscribe(subscribe, ch, s.done, onErr); err != nil {
		return fmt.Errorf("nlsync: %s subscribe: %w", what, err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			for u := range ch {
				handle(u)
			}
			for {
				select {
				case <-s.done:
					return
				case <-time.After(resubscribeEvery):
				}
				s.o.Logger.Warn("netlink subscription lost; subscribing again", "what", what)
				if resync != nil {
					resync()
				}
				ch = make(chan T, 256)
				if err := lockedSubscribe(subscribe, ch, s.done, onErr); err == nil {
					break
				}
			}
		}
	}()
	return nil
}

// lockedSubscribe keeps the goroutine on one thread while subscribe checks
// and uses that thread's namespace.
func lockedSubscribe[T any](subscribe func(chan<- T, <-chan struct{}, func(error)) error, ch chan T, done <-chan struct{}, onErr func(error)) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return subscribe(ch, done, onErr)
}

// markStale prepares a re-dump after a lost subscription: what is
// mirrored stays in the FIB (withdrawing it all made a full table's
// prefixes, the default route among them, unreachable for as long as the
// re-dump took), and only what the kernel no longer has once the new
// subscription is live is withdrawn (sweepStale).
func (s *Sync) markStale() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = make(map[netip.Prefix]bool, len(s.best))
	for p := range s.best {
		s.stale[p] = true
	}
	clear(s.routes) // the replay rebuilds the per-metric view
}

// sweepStale runs once a renewed subscription is live: a dump of the
// table says which marked prefixes the kernel still has; the others were
// deleted while nobody listened and are withdrawn. Deletions after the
// dump arrive on the subscription.
func (s *Sync) sweepStale() {
	s.mu.Lock()
	n := len(s.stale)
	s.mu.Unlock()
	if n == 0 {
		return
	}
	present, err := s.dumpTable()
	if err != nil {
		s.o.Logger.Warn("netlink route dump failed; withdrawing routes not replayed yet", "err", err)
	}
	s.sweep(present)
}

// sweep withdraws the stale prefixes not in present (nil: every stale
// prefix the replay has not confirmed yet).
func (s *Sync) sweep(present map[netip.Prefix]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.stale {
		if present[p] || len(s.routes[p]) > 0 {
			continue
		}
		if _, had := s.best[p]; had {
			delete(s.best, p)
			s.sink.KernelRoute(p, fwd.NextHop{}, false)
		}
	}
	s.stale = nil
}

// dumpTable lists the prefixes of the mirrored table the kernel has now.
func (s *Sync) dumpTable() (map[netip.Prefix]bool, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	rs, err := h.RouteListFiltered(unix.AF_UNSPEC, &netlink.Route{Table: s.o.Table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	present := make(map[netip.Prefix]bool, len(rs))
	for i := range rs {
		if p, _, err := s.translate(&rs[i]); err == nil {
			present[p] = true
		}
	}
	return present, nil
}

// handle opens a route socket in the mirrored namespace: right here when
// this thread is in it (no setns, which needs CAP_SYS_ADMIN), else by
// entering it (tests that run Start elsewhere).
func (s *Sync) handle() (*netlink.Handle, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cur, err := vnetns.Get(); err == nil {
		same := cur.Equal(s.ns)
		cur.Close()
		if same {
			return netlink.NewHandle(unix.NETLINK_ROUTE)
		}
	}
	return netlink.NewHandleAt(s.ns, unix.NETLINK_ROUTE)
}

// Close stops following. It does not withdraw what was mirrored.
func (s *Sync) Close() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.wg.Wait()
	if s.ns.IsOpen() {
		s.ns.Close()
	}
}

// Routes is how many kernel prefixes are mirrored.
func (s *Sync) Routes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.best)
}

func (s *Sync) link(u netlink.LinkUpdate) {
	a := u.Link.Attrs()
	port, ok := s.o.Ports[a.Index]
	if !ok {
		return
	}
	up := u.Header.Type != unix.RTM_DELLINK && a.Flags&net.FlagUp != 0 &&
		(a.OperState == netlink.OperUp || a.OperState == netlink.OperUnknown)
	s.sink.Link(port, up)
}

func (s *Sync) addr(u netlink.AddrUpdate) {
	port, ok := s.o.Ports[u.LinkIndex]
	if !ok {
		return
	}
	a, ok := netip.AddrFromSlice(u.LinkAddress.IP)
	if !ok {
		return
	}
	bits, _ := u.LinkAddress.Mask.Size()
	a = a.Unmap()
	if a.IsLinkLocalUnicast() {
		return
	}
	s.sink.Address(port, netip.PrefixFrom(a, bits), u.NewAddr)
}

// errSkip marks kernel routes ovfwd does not forward by (local, broadcast,
// multicast, link-local, other interfaces).
var errSkip = errors.New("skip")

func (s *Sync) route(u netlink.RouteUpdate) {
	if u.Table != s.o.Table {
		return
	}
	p, nh, err := s.translate(&u.Route)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch u.Type {
	case unix.RTM_NEWROUTE:
		s.routes[p] = s.routes[p].set(u.Priority, nh)
	case unix.RTM_DELROUTE:
		if m := s.routes[p].del(u.Priority); len(m) > 0 {
			s.routes[p] = m
		} else {
			delete(s.routes, p)
		}
	default:
		return
	}
	old, had := s.best[p]
	nb, has := s.routes[p].best()
	switch {
	case has && (!had || old != nb):
		s.best[p] = nb
		s.sink.KernelRoute(p, nb, true)
	case !has && had:
		delete(s.best, p)
		s.sink.KernelRoute(p, fwd.NextHop{}, false)
	}
}

// metrics are one prefix's kernel routes, one per metric; almost always
// just one, so a slice rather than a map per prefix (a full BGP table
// made those maps the mirror's largest cost, ~0.5 KiB a prefix).
type metrics []metricRoute

type metricRoute struct {
	metric int
	nh     fwd.NextHop
}

func (m metrics) set(metric int, nh fwd.NextHop) metrics {
	for i := range m {
		if m[i].metric == metric {
			m[i].nh = nh
			return m
		}
	}
	return append(m, metricRoute{metric, nh})
}

func (m metrics) del(metric int) metrics {
	for i := range m {
		if m[i].metric == metric {
			return append(m[:i], m[i+1:]...)
		}
	}
	return m
}

// best is the next hop of the lowest metric.
func (m metrics) best() (fwd.NextHop, bool) {
	if len(m) == 0 {
		return fwd.NextHop{}, false
	}
	b := m[0]
	for _, r := range m[1:] {
		if r.metric < b.metric {
			b = r
		}
	}
	return b.nh, true
}

// translate maps a kernel route onto the engine's prefix and next hop.
func (s *Sync) translate(r *netlink.Route) (netip.Prefix, fwd.NextHop, error) {
	var p netip.Prefix
	if r.Dst == nil {
		switch r.Family {
		case unix.AF_INET:
			p = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		case unix.AF_INET6:
			p = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		default:
			return p, fwd.NextHop{}, errSkip
		}
	} else {
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		bits, _ := r.Dst.Mask.Size()
		if !ok {
			return p, fwd.NextHop{}, errSkip
		}
		p = netip.PrefixFrom(a.Unmap(), bits).Masked()
	}
	if a := p.Addr(); a.IsMulticast() || (a.IsLinkLocalUnicast() && p.Bits() >= 10) {
		return p, fwd.NextHop{}, errSkip
	}
	switch r.Type {
	case unix.RTN_BLACKHOLE, unix.RTN_UNREACHABLE, unix.RTN_PROHIBIT:
		return p, fwd.NextHop{Blackhole: true}, nil
	case unix.RTN_UNICAST:
	default:
		return p, fwd.NextHop{}, errSkip
	}
	link, gw := r.LinkIndex, r.Gw
	if len(r.MultiPath) > 0 { // ECMP: the engine takes one next hop; use the first
		link, gw = r.MultiPath[0].LinkIndex, r.MultiPath[0].Gw
	}
	port, ok := s.o.Ports[link]
	if !ok {
		return p, fwd.NextHop{}, errSkip
	}
	nh := fwd.NextHop{Port: port}
	if gw != nil {
		a, ok := netip.AddrFromSlice(gw)
		if !ok {
			return p, fwd.NextHop{}, errSkip
		}
		nh.Via = a.Unmap()
		if nh.Via.Is4() != p.Addr().Is4() { // RFC 5549 v4-via-v6: the engine cannot
			return p, fwd.NextHop{}, errSkip
		}
	}
	return p, nh, nil
}

// MirrorFlag and MirrorProtocol mark the kernel neighbours ovfwd's mirror
// writes (ndm_flags NTF_EXT_LEARNED, NDA_PROTOCOL): ovfwd is the external
// learner of those entries. The kernel keeps the flag only while writers
// ask for it (net/core/neighbour.c, neigh_update_flags), so an operator's
// `ip neigh replace … nud permanent` over a mirrored entry clears it and
// becomes a pin.
const (
	MirrorFlag     = unix.NTF_EXT_LEARNED
	MirrorProtocol = 245
)

// pinned is the neighbour state an operator sets by hand; anything else
// on ovfwd's ports was either mirrored there by ovfwd itself or is a
// kernel resolution attempt that cannot succeed (ovfwd consumes the ARP/ND
// replies), so it is not worth pinning in the engine. (NOARP entries are
// the kernel's multicast mappings, which the engine derives itself.)
const pinned = unix.NUD_PERMANENT

func (s *Sync) neigh(u neighUpdate) {
	port, ok := s.o.Ports[u.ifindex]
	if !ok || !u.ip.IsValid() {
		return
	}
	a := u.ip.Unmap()
	if !a.IsGlobalUnicast() && !a.IsLinkLocalUnicast() {
		return // multicast, loopback, unspecified: not next hops
	}
	ours := u.flags&MirrorFlag != 0
	if u.typ == unix.RTM_NEWNEIGH && u.state&pinned != 0 && !ours && u.macLen == 6 {
		mac := make(net.HardwareAddr, 6) // the sink keeps it; operator pins are rare
		copy(mac, u.mac[:])
		s.sink.KernelNeighbour(port, a, mac)
		return
	}
	// An entry ovfwd mirrored, deleted, demoted or (re)written: whatever
	// pin an operator had there is gone.
	if u.typ == unix.RTM_DELNEIGH || u.state&pinned == 0 || ours {
		s.sink.KernelNeighbour(port, a, nil)
	}
}
