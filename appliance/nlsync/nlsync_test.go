package nlsync

import (
	"net"
	"net/netip"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

type recordSink struct {
	routes map[netip.Prefix]fwd.NextHop
	neigh  map[netip.Addr]net.HardwareAddr
	calls  int
}

func (r *recordSink) KernelRoute(p netip.Prefix, nh fwd.NextHop, ok bool) {
	r.calls++
	if ok {
		r.routes[p] = nh
	} else {
		delete(r.routes, p)
	}
}

func (r *recordSink) KernelNeighbour(port int, ip netip.Addr, mac net.HardwareAddr) {
	r.calls++
	if mac == nil {
		delete(r.neigh, ip)
	} else {
		r.neigh[ip] = mac
	}
}

func (r *recordSink) Link(port int, up bool)                       {}
func (r *recordSink) Address(port int, p netip.Prefix, added bool) {}

func newTestSync() (*Sync, *recordSink) {
	sink := &recordSink{routes: map[netip.Prefix]fwd.NextHop{}, neigh: map[netip.Addr]net.HardwareAddr{}}
	s := &Sync{o: Options{Table: 254, Ports: map[int]int{7: 0, 9: 1}}, sink: sink,
		routes: map[netip.Prefix]metrics{}, best: map[netip.Prefix]fwd.NextHop{}}
	return s, sink
}

func ipnet(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

func update(typ uint16, r netlink.Route) netlink.RouteUpdate {
	if r.Table == 0 {
		r.Table = 254
	}
	if r.Type == 0 {
		r.Type = unix.RTN_UNICAST
	}
	return netlink.RouteUpdate{Type: typ, Route: r}
}

func TestRouteTranslation(t *testing.T) {
	s, sink := newTestSync()
	p := netip.MustParsePrefix("198.18.70.0/24")
	s.route(update(unix.RTM_NEWROUTE, netlink.Route{Dst: ipnet("198.18.70.0/24"), Gw: net.ParseIP("198.18.51.1"), LinkIndex: 9, Priority: 100}))
	if nh := sink.routes[p]; nh.Port != 1 || nh.Via != netip.MustParseAddr("198.18.51.1") {
		t.Fatalf("route via gateway: %+v", nh)
	}
	// A lower metric wins; removing it brings the other back.
	s.route(update(unix.RTM_NEWROUTE, netlink.Route{Dst: ipnet("198.18.70.0/24"), LinkIndex: 7, Priority: 10}))
	if nh := sink.routes[p]; nh.Port != 0 || nh.Via.IsValid() {
		t.Fatalf("lower metric did not win: %+v", nh)
	}
	s.route(update(unix.RTM_DELROUTE, netlink.Route{Dst: ipnet("198.18.70.0/24"), LinkIndex: 7, Priority: 10}))
	if nh := sink.routes[p]; nh.Port != 1 {
		t.Fatalf("higher metric not restored: %+v", nh)
	}
	s.route(update(unix.RTM_DELROUTE, netlink.Route{Dst: ipnet("198.18.70.0/24"), Gw: net.ParseIP("198.18.51.1"), LinkIndex: 9, Priority: 100}))
	if _, ok := sink.routes[p]; ok || s.Routes() != 0 {
		t.Fatalf("route not withdrawn")
	}
	// Default route (nil Dst), IPv6, blackhole, ECMP.
	s.route(update(unix.RTM_NEWROUTE, netlink.Route{Family: unix.AF_INET6, Gw: net.ParseIP("2001:db8:51::1"), LinkIndex: 9}))
	if nh, ok := sink.routes[netip.MustParsePrefix("::/0")]; !ok || nh.Via != netip.MustParseAddr("2001:db8:51::1") {
		t.Errorf("IPv6 default: %+v %v", nh, ok)
	}
	s.route(update(unix.RTM_NEWROUTE, netlink.Route{Dst: ipnet("198.18.71.0/24"), Type: unix.RTN_BLACKHOLE}))
	if !sink.routes[netip.MustParsePrefix("198.18.71.0/24")].Blackhole {
		t.Errorf("blackhole not mirrored")
	}
	s.route(update(unix.RTM_NEWROUTE, netlink.Route{Dst: ipnet("198.18.72.0/24"),
		MultiPath: []*netlink.NexthopInfo{{LinkIndex: 7, Gw: net.ParseIP("198.18.50.1")}, {LinkIndex: 9, Gw: net.ParseIP("198.18.51.1")}}}))
	if nh := sink.routes[netip.MustParsePrefix("198.18.72.0/24")]; nh.Port != 0 || nh.Via != netip.MustParseAddr("198.18.50.1") {
		t.Errorf("ECMP first hop: %+v", nh)
	}
	// Ignored: other tables, other interfaces, local/broadcast types,
	// multicast and link-local prefixes, v4 via v6.
	before := sink.calls
	for _, r := range []netlink.Route{
		{Dst: ipnet("198.18.73.0/24"), LinkIndex: 9, Table: 100},
		{Dst: ipnet("198.18.73.0/24"), LinkIndex: 3},
		{Dst: ipnet("198.18.50.254/32"), LinkIndex: 7, Type: unix.RTN_LOCAL},
		{Dst: ipnet("ff00::/8"), LinkIndex: 7},
		{Dst: ipnet("fe80::/64"), LinkIndex: 7},
		{Dst: ipnet("198.18.74.0/24"), LinkIndex: 7, Gw: net.ParseIP("fe80::1")},
	} {
		s.route(update(unix.RTM_NEWROUTE, r))
	}
	if sink.calls != before {
		t.Errorf("%d ignorable routes reached the sink: %v", sink.calls-before, sink.routes)
	}
}

func TestNeighbourPins(t *testing.T) {
	s, sink := newTestSync()
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 0x77}
	ip := net.ParseIP("198.18.51.77")
	s.neigh(upd(netlink.NeighUpdate{Type: unix.RTM_NEWNEIGH, Neigh: netlink.Neigh{LinkIndex: 9, IP: ip, HardwareAddr: mac, State: unix.NUD_PERMANENT}}))
	a := netip.MustParseAddr("198.18.51.77")
	if sink.neigh[a].String() != mac.String() {
		t.Fatalf("permanent neighbour not pinned: %v", sink.neigh)
	}
	// Non-permanent states (a kernel resolution attempt) unpin.
	s.neigh(upd(netlink.NeighUpdate{Type: unix.RTM_NEWNEIGH, Neigh: netlink.Neigh{LinkIndex: 9, IP: ip, State: unix.NUD_INCOMPLETE}}))
	if _, ok := sink.neigh[a]; ok {
		t.Fatal("neighbour still pinned after the kernel demoted it")
	}
	// Multicast mappings (NOARP) and foreign interfaces are ignored.
	s.neigh(upd(netlink.NeighUpdate{Type: unix.RTM_NEWNEIGH, Neigh: netlink.Neigh{LinkIndex: 9, IP: net.ParseIP("ff02::16"), HardwareAddr: net.HardwareAddr{0x33, 0x33, 0, 0, 0, 0x16}, State: unix.NUD_NOARP}}))
	s.neigh(upd(netlink.NeighUpdate{Type: unix.RTM_NEWNEIGH, Neigh: netlink.Neigh{LinkIndex: 9, IP: net.ParseIP("ff02::16"), HardwareAddr: net.HardwareAddr{0x33, 0x33, 0, 0, 0, 0x16}, State: unix.NUD_PERMANENT}}))
	s.neigh(upd(netlink.NeighUpdate{Type: unix.RTM_NEWNEIGH, Neigh: netlink.Neigh{LinkIndex: 3, IP: ip, HardwareAddr: mac, State: unix.NUD_PERMANENT}}))
	if len(sink.neigh) != 0 {
		t.Fatal("neighbour of a foreign interface pinned")
	}
}

// What ovfwd's mirror wrote (its flag) is never an operator pin, whatever
// the order its echoes arrive in: the identity is the mark, not timing.
// An operator's write over it (the kernel clears the flag) is a pin.
func TestMirroredNeighbourNeverPinned(t *testing.T) {
	s, sink := newTestSync()
	ip := net.ParseIP("198.18.51.77")
	a := netip.MustParseAddr("198.18.51.77")
	for i := range 200 {
		mac := net.HardwareAddr{2, 0, 0, 0, byte(i >> 8), byte(i)}
		s.neigh(upd(netlink.NeighUpdate{Type: unix.RTM_NEWNEIGH, Neigh: netlink.Neigh{LinkIndex: 9, IP: ip, HardwareAddr: mac, State: unix.NUD_PERMANENT, Flags: MirrorFlag}}))
	}
	if len(sink.neigh) != 0 {
		t.Fatalf("mirrored entries pinned: %v", sink.neigh)
	}
	op := net.HardwareAddr{2, 0, 0, 0, 0, 0x99}
	s.neigh(upd(netlink.NeighUpdate{Type: unix.RTM_NEWNEIGH, Neigh: netlink.Neigh{LinkIndex: 9, IP: ip, HardwareAddr: op, State: unix.NUD_PERMANENT}}))
	if sink.neigh[a].String() != op.String() {
		t.Fatalf("operator's write not pinned: %v", sink.neigh)
	}
	// The mirror writing it again (the operator's pin gone) unpins.
	s.neigh(upd(netlink.NeighUpdate{Type: unix.RTM_NEWNEIGH, Neigh: netlink.Neigh{LinkIndex: 9, IP: ip, HardwareAddr: op, State: unix.NUD_PERMANENT, Flags: MirrorFlag}}))
	if _, ok := sink.neigh[a]; ok {
		t.Fatal("a mirrored entry left the operator's pin in place")
	}
}

// TestResyncKeepsRoutes: after a lost subscription the mirrored routes
// stay installed while the table is dumped again; only those the kernel
// no longer has are withdrawn, and a replayed route that did not change
// does not touch the sink.
func TestResyncKeepsRoutes(t *testing.T) {
	s, sink := newTestSync()
	kept, gone := ipnet("198.18.70.0/24"), ipnet("198.18.71.0/24")
	s.route(update(unix.RTM_NEWROUTE, netlink.Route{Dst: kept, LinkIndex: 9}))
	s.route(update(unix.RTM_NEWROUTE, netlink.Route{Dst: gone, LinkIndex: 7}))
	calls := sink.calls
	s.markStale()
	if len(sink.routes) != 2 || s.Routes() != 2 || sink.calls != calls {
		t.Fatalf("marking withdrew routes: sink %v, mirrored %d", sink.routes, s.Routes())
	}
	// The kernel has only kept now; the replay confirms it unchanged.
	s.sweep(map[netip.Prefix]bool{netip.MustParsePrefix("198.18.70.0/24"): true})
	s.route(update(unix.RTM_NEWROUTE, netlink.Route{Dst: kept, LinkIndex: 9}))
	if len(sink.routes) != 1 || s.Routes() != 1 {
		t.Fatalf("after the sweep: sink %v, mirrored %d", sink.routes, s.Routes())
	}
	if _, ok := sink.routes[netip.MustParsePrefix("198.18.70.0/24")]; !ok {
		t.Error("the route the kernel still has was withdrawn")
	}
	if sink.calls != calls+1 {
		t.Errorf("%d sink calls for one withdrawal and an unchanged replay", sink.calls-calls)
	}
	// A dump that failed (nil) withdraws what the replay has not confirmed.
	s.markStale()
	s.sweep(nil)
	if len(sink.routes) != 0 {
		t.Errorf("after a failed dump: %v", sink.routes)
	}
}

// upd is what parseNeigh makes of the kernel's message for u.
func upd(u netlink.NeighUpdate) neighUpdate {
	v := neighUpdate{typ: u.Type, ifindex: u.LinkIndex, state: uint16(u.State), flags: uint8(u.Flags)}
	v.ip, _ = netip.AddrFromSlice(u.IP)
	v.macLen = copy(v.mac[:], u.HardwareAddr)
	return v
}
