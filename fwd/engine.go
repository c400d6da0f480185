package fwd

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/fwd/lpm"
	"github.com/ovfwd/ovfwd/fwd/nat"
)

// Mode selects what the engine does with frames.
type Mode uint8

const (
	ModeRouter Mode = iota // L3: route IPv4/IPv6 between ports
	ModeBridge             // L2: learn MACs and switch frames between ports
)

// Config tunes an Engine. Zero values take the documented defaults.
type Config struct {
	Mode  Mode
	Batch int // packets per Rx/Tx call, ≤ MaxBatch; default 64

	// MSSClamp, when non-zero, lowers the MSS option of TCP SYNs crossing
	// the router to MSSClamp for IPv4 and MSSClamp-20 for IPv6 (the same
	// path MTU).
	MSSClamp uint16

	// ICMPRate is the ICMP/ICMPv6 error rate per worker in messages per
	// second (token bucket, refilled once per poll); default 100, negative
	// disables ICMP errors. ICMPBurst is the bucket depth; default 50.
	ICMPRate  int
	ICMPBurst int

	// Neighbours (ARP and ND): an answer is trusted for NeighReachable
	// (default 30 s); a used entry is refreshed by a unicast probe in its
	// last NeighProbeBefore (default 5 s); an unresolved neighbour is asked
	// every NeighRetrans (default 1 s), NeighProbes times (default 3), while
	// up to NeighHold packets (default 4) wait for it.
	NeighReachable   time.Duration
	NeighProbeBefore time.Duration
	NeighRetrans     time.Duration
	NeighProbes      int
	NeighHold        int
	// NeighTable bounds the neighbour entries (default 16384). When it is
	// full, a new confirmed entry (an answer to our question) evicts
	// unconfirmed entries first, then those nearest to expiry; a new
	// unconfirmed one (a request to us) evicts only unconfirmed entries,
	// or is not made (NeighTableFull); static entries are never evicted.
	NeighTable int
	// Glean limits (glean.go): a sender (input port and source address)
	// may start GleanSourceRate resolutions of unknown neighbours a second,
	// GleanSourceBurst at once (defaults 50 and 64); an input port as a
	// whole GleanPortRate, GleanPortBurst at once (defaults 500 and 256).
	GleanSourceRate  int
	GleanSourceBurst int
	GleanPortRate    int
	GleanPortBurst   int

	// Bridge: forwarding database size (entries, default 65536) and MAC
	// aging (default 300 s).
	BridgeTable int
	BridgeAging time.Duration

	// Now, if set, is the engine's clock in nanoseconds (tests drive time
	// with it). Workers read it once per poll, never per packet.
	Now func() int64
}

func (c *Config) setDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Batch, 64)
	c.Batch = min(c.Batch, MaxBatch)
	def(&c.ICMPRate, 100)
	def(&c.ICMPBurst, 50)
	defD(&c.NeighReachable, 30*time.Second)
	defD(&c.NeighProbeBefore, 5*time.Second)
	defD(&c.NeighRetrans, time.Second)
	def(&c.NeighProbes, 3)
	def(&c.NeighHold, 4)
	def(&c.NeighTable, 16384)
	def(&c.GleanSourceRate, 50)
	def(&c.GleanSourceBurst, 64)
	def(&c.GleanPortRate, 500)
	def(&c.GleanPortBurst, 256)
	def(&c.BridgeTable, 1<<16)
	defD(&c.BridgeAging, 300*time.Second)
	if c.Now == nil {
		start := time.Now()
		c.Now = func() int64 { return int64(time.Since(start)) + int64(time.Hour) }
	}
}

// NextHop says where a route sends packets.
type NextHop struct {
	Port      int        // egress port (not used for Tunnel, Uplink or Blackhole)
	Via       netip.Addr // gateway; invalid: the destination is on Port's link
	Tunnel    bool       // into the tunnel, to Peer
	Peer      uint32
	Blackhole bool // drop silently
	// Uplink hands the routed IP packets to the control plane, tagged
	// UplinkID, through Engine.Uplinked (a site-to-site client tunnel the
	// data plane does not run itself). Packets over UplinkMTU are
	// fragmented (IPv4 without DF) or answered with ICMP "too big".
	Uplink    bool
	UplinkID  uint16
	UplinkMTU int // 1280..MaxUplinkPacket
}

// PortVLAN is a port's VLAN membership. Bridge mode: untagged frames
// belong to Untagged (0: untagged frames are dropped) and leave untagged;
// Tagged VLANs pass with their tag. Router mode: the port sends and expects
// the tag Tagged[0], or no tag when Tagged is empty.
type PortVLAN struct {
	Untagged uint16
	Tagged   []uint16
}

// Engine is the packet engine: ports, tables and workers. Its methods are
// safe from any goroutine; only the Workers touch packets.
type Engine struct {
	cfg     Config
	ports   []Port
	pools   []uint16 // pools[i] = ports[i].Info().Pool
	workers []*Worker
	macs    *macTable

	tables atomic.Pointer[tables]
	neigh  atomic.Pointer[neighTable]
	limits atomic.Pointer[Limits] // SetLimits; workers copy it per poll
	nat    atomic.Pointer[nat.Compiled]
	acl    atomic.Pointer[ACL]

	mu       sync.Mutex // serialises the control plane
	static   map[netip.Prefix]NextHop
	adjIndex map[adjacency]uint32
	neighs   map[neighKey]*neighbour
	events   []Event
	evDrops  uint64

	neighFull, neighEvicted uint64
	victims                 []*neighbour    // makeRoom's scratch
	neighGen                atomic.Uint64   // moves when an entry comes or goes (FastGen)
	asked                   []atomic.Uint64 // glean.go
}

// New builds an engine over ports. Worker q serves queue q of every port;
// there are as many workers as the smallest queue count.
func New(cfg Config, ports []Port) (*Engine, error) {
	cfg.setDefaults()
	if len(ports) == 0 || len(ports) >= injectReceived { // port indices stay below the inject ring's markers
		return nil, errors.New("fwd: need 1..65533 ports")
	}
	e := &Engine{cfg: cfg, ports: ports, static: map[netip.Prefix]NextHop{},
		adjIndex: map[adjacency]uint32{}, neighs: map[neighKey]*neighbour{},
		asked: make([]atomic.Uint64, askedSlots)}
	e.limits.Store(cfg.limits())
	t := &tables{mart: newMartianTables(nil, false)}
	queues := 1 << 30
	for i, p := range ports {
		info := p.Info()
		if len(info.MAC) != 6 {
			return nil, fmt.Errorf("fwd: port %d (%s): MAC must be 6 bytes", i, info.Name)
		}
		if info.MTU < ipv4MinMTU {
			return nil, fmt.Errorf("fwd: port %d (%s): MTU %d too small", i, info.Name, info.MTU)
		}
		if info.BufSize > 0 && info.BufSize < Headroom+ethHdrLen+2*vlanTagLen+info.MTU {
			return nil, fmt.Errorf("fwd: port %d (%s): buffers of %d bytes cannot hold headroom and an MTU %d frame", i, info.Name, info.BufSize, info.MTU)
		}
		pc := portConf{mtu: info.MTU, pool: info.Pool, pvid: 1}
		copy(pc.mac[:], info.MAC)
		pc.member = new([64]uint64)
		t.ports = append(t.ports, pc)
		e.pools = append(e.pools, info.Pool)
		queues = min(queues, max(info.Queues, 1))
	}
	e.tables.Store(t)
	e.neigh.Store(buildNeighTable(nil))
	e.macs = newMACTable(cfg.BridgeTable, uint32(cfg.BridgeAging/time.Second))
	for q := range queues {
		e.workers = append(e.workers, newWorker(e, q))
	}
	for _, w := range e.workers {
		w.nat = nat.NewTable(w.q, len(e.workers))
	}
	return e, nil
}

// Workers returns one worker per queue index.
func (e *Engine) Workers() []*Worker { return e.workers }

// update publishes a modified copy of the tables. Caller holds e.mu.
func (e *Engine) update(fn func(t *tables) error) error {
	old := e.tables.Load()
	t := *old
	t.ports = append([]portConf(nil), old.ports...)
	if err := fn(&t); err != nil {
		return err
	}
	t.mart = newMartianTables(t.ports, t.tunnel != nil)
	e.tables.Store(&t)
	return nil
}

func (e *Engine) checkPort(port int) error {
	if port < 0 || port >= len(e.ports) {
		return fmt.Errorf("fwd: no port %d", port)
	}
	return nil
}

// intern returns the index of an adjacency, appending it when new.
func (e *Engine) intern(t *tables, a adjacency) uint32 {
	if i, ok := e.adjIndex[a]; ok && int(i) < len(t.adj) && t.adj[i] == a {
		return i
	}
	t.adj = append(t.adj, a)
	i := uint32(len(t.adj) - 1)
	e.adjIndex[a] = i
	return i
}

// effective says what prefix p maps to: our own address (host prefix)
// over a connected subnet over a static route.
func (e *Engine) effective(t *tables, p netip.Prefix) (adjacency, bool) {
	var a adjacency
	found := false
	for i := range t.ports {
		addrs := t.ports[i].v4
		if p.Addr().Is6() {
			addrs = t.ports[i].v6
		}
		for _, ap := range addrs {
			if p.Bits() == p.Addr().BitLen() && ap.Addr() == p.Addr() {
				return adjacency{kind: adjLocal, port: uint16(i)}, true
			}
			if !found && ap.Masked() == p {
				a, found = adjacency{kind: adjGlean, port: uint16(i)}, true
			}
		}
	}
	if found {
		return a, true
	}
	if nh, ok := e.static[p]; ok {
		return e.adjFor(nh), true
	}
	return a, false
}

// resolve recomputes p's FIB entry.
func (e *Engine) resolve(t *tables, p netip.Prefix) {
	a, found := e.effective(t, p)
	if p.Addr().Is4() {
		if found {
			t.v4 = t.v4.Insert(p, e.intern(t, a))
		} else {
			t.v4 = t.v4.Delete(p)
		}
		return
	}
	if found {
		t.v6 = t.v6.Insert(p, e.intern(t, a))
	} else {
		t.v6 = t.v6.Delete(p)
	}
}

func (e *Engine) adjFor(nh NextHop) adjacency {
	switch {
	case nh.Blackhole:
		return adjacency{kind: adjBlackhole}
	case nh.Tunnel:
		return adjacency{kind: adjTunnel, peer: nh.Peer}
	case nh.Uplink:
		return adjacency{kind: adjUplink, peer: uint32(nh.UplinkID), mtu: uint16(nh.UplinkMTU)}
	case !nh.Via.IsValid():
		return adjacency{kind: adjGlean, port: uint16(nh.Port)}
	case nh.Via.Is4():
		a := nh.Via.As4()
		return adjacency{kind: adjVia, port: uint16(nh.Port), via: key4(a[:])}
	}
	return adjacency{kind: adjVia, port: uint16(nh.Port), via: nh.Via.As16()}
}

// AddAddress gives port an address; its subnet becomes a connected route.
func (e *Engine) AddAddress(port int, p netip.Prefix) error {
	if err := e.checkPort(port); err != nil {
		return err
	}
	if !p.IsValid() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return fmt.Errorf("fwd: bad address %v", p)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.update(func(t *tables) error {
		pc := &t.ports[port]
		if p.Addr().Is4() {
			pc.v4 = append(append([]netip.Prefix(nil), pc.v4...), p)
		} else {
			pc.v6 = append(append([]netip.Prefix(nil), pc.v6...), p)
		}
		e.resolve(t, p.Masked())
		e.resolve(t, netip.PrefixFrom(p.Addr(), p.Addr().BitLen()))
		return nil
	})
}

// RemoveAddress takes an address off a port, with its connected route.
func (e *Engine) RemoveAddress(port int, p netip.Prefix) error {
	if err := e.checkPort(port); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.update(func(t *tables) error {
		pc := &t.ports[port]
		list := &pc.v4
		if p.Addr().Is6() {
			list = &pc.v6
		}
		var kept []netip.Prefix
		for _, a := range *list {
			if a != p {
				kept = append(kept, a)
			}
		}
		if len(kept) == len(*list) {
			return fmt.Errorf("fwd: port %d has no address %v", port, p)
		}
		*list = kept
		e.resolve(t, p.Masked())
		e.resolve(t, netip.PrefixFrom(p.Addr(), p.Addr().BitLen()))
		return nil
	})
}

// AddRoute adds or replaces a static route. Connected subnets and our own
// addresses take precedence over a static route for the same prefix.
func (e *Engine) AddRoute(p netip.Prefix, nh NextHop) error {
	if err := e.checkRoute(p, nh); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.update(func(t *tables) error {
		e.static[p] = nh
		e.resolve(t, p)
		return nil
	})
}

// DeleteRoute removes a static route.
func (e *Engine) DeleteRoute(p netip.Prefix) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.static[p]; !ok {
		return fmt.Errorf("fwd: no static route %v", p)
	}
	return e.update(func(t *tables) error {
		delete(e.static, p)
		e.resolve(t, p)
		return nil
	})
}

// SetPortVLAN sets a port's VLAN membership (see PortVLAN).
func (e *Engine) SetPortVLAN(port int, v PortVLAN) error {
	if err := e.checkPort(port); err != nil {
		return err
	}
	if v.Untagged > 4094 {
		return fmt.Errorf("fwd: bad VLAN %d", v.Untagged)
	}
	m := new([64]uint64)
	for _, id := range v.Tagged {
		if id == 0 || id > 4094 {
			return fmt.Errorf("fwd: bad VLAN %d", id)
		}
		m[id>>6] |= 1 << (id & 63)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.update(func(t *tables) error {
		pc := &t.ports[port]
		pc.pvid, pc.member, pc.routerTag = v.Untagged, m, 0
		if len(v.Tagged) > 0 {
			pc.routerTag = v.Tagged[0]
		}
		return nil
	})
}

// SetTunnel routes UDP datagrams to udpPort on our addresses into t (and
// tunnel routes out of it). A nil t removes the tunnel.
func (e *Engine) SetTunnel(t Tunnel, udpPort uint16) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.update(func(tb *tables) error {
		tb.tunnel, tb.tunnelPort = t, udpPort
		if t == nil {
			tb.tunnelPort = 0
		}
		return nil
	})
}

// SetClientToClient says whether packets a tunnel peer sends may be routed
// into the tunnel to another peer (openvpn's client-to-client; default
// off). Packets from the tunnel to our ports and uplinks are unaffected.
func (e *Engine) SetClientToClient(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.update(func(tb *tables) error {
		tb.clientToClient = on
		return nil
	})
}

// SetNeighbour installs a static neighbour (never expires, never
// overwritten by learning). A nil mac removes it.
func (e *Engine) SetNeighbour(port int, ip netip.Addr, mac net.HardwareAddr) error {
	if err := e.checkPort(port); err != nil {
		return err
	}
	if mac != nil && len(mac) != 6 {
		return errors.New("fwd: MAC must be 6 bytes")
	}
	k := neighKey{port: uint16(port), addr: ip.As16()}
	if ip.Is4() {
		a := ip.As4()
		k.addr = key4(a[:])
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if mac == nil {
		e.dropNeigh(k)
	} else {
		n := &neighbour{port: k.port, addr: k.addr, is4: ip.Is4(), static: true}
		n.mac.Store(packMAC(mac))
		n.expires.Store(1<<63 - 1)
		n.confirmed.Store(true) // the operator's word
		e.putNeigh(k, n)
	}
	return nil
}

// Route is a prefix and where it goes, for AddRoutes.
type Route struct {
	Prefix netip.Prefix
	NextHop
}

// AddRoutes adds or replaces many static routes and publishes them at
// once (a config load or a kernel table sync): one table swap, not one per
// route. It checks every route first and adds none if any is bad.
func (e *Engine) AddRoutes(routes []Route) error { return e.UpdateRoutes(routes, nil) }

// UpdateRoutes adds or replaces the static routes add and removes those
// of del (a prefix without a static route is no error) in one
// publication: a burst of kernel route changes costs one table swap, not
// one per route.
func (e *Engine) UpdateRoutes(add []Route, del []netip.Prefix) error {
	for _, r := range add {
		if err := e.checkRoute(r.Prefix, r.NextHop); err != nil {
			return err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.update(func(t *tables) error {
		for _, p := range del {
			delete(e.static, p)
		}
		for _, r := range add {
			e.static[r.Prefix] = r.NextHop
		}
		if len(add)+len(del) < bulkRoutes {
			for _, p := range del {
				e.resolve(t, p)
			}
			for _, r := range add {
				e.resolve(t, r.Prefix)
			}
			return nil
		}
		// Many routes: rebuild both tables with the lpm builders, which is
		// an order of magnitude faster than path-copying each change.
		changed := make(map[netip.Prefix]bool, len(add)+len(del))
		for _, p := range del {
			changed[p] = true
		}
		for _, r := range add {
			changed[r.Prefix] = true
		}
		var b4 lpm.V4Builder
		var b6 lpm.V6Builder
		t.v4.Walk(func(p netip.Prefix, v uint32) bool {
			if !changed[p] {
				b4.Add(p, v)
			}
			return true
		})
		t.v6.Walk(func(p netip.Prefix, v uint32) bool {
			if !changed[p] {
				b6.Add(p, v)
			}
			return true
		})
		for p := range changed {
			a, found := e.effective(t, p)
			switch {
			case !found:
			case p.Addr().Is4():
				b4.Add(p, e.intern(t, a))
			default:
				b6.Add(p, e.intern(t, a))
			}
		}
		t.v4, t.v6 = b4.Build(), b6.Build()
		return nil
	})
}

// bulkRoutes is the AddRoutes size from which the tables are rebuilt.
const bulkRoutes = 4096

func (e *Engine) checkRoute(p netip.Prefix, nh NextHop) error {
	if !p.IsValid() || p != p.Masked() {
		return fmt.Errorf("fwd: bad route prefix %v (must be valid and masked)", p)
	}
	if nh.Uplink && (nh.UplinkMTU < ipv6MinMTU || nh.UplinkMTU > MaxUplinkPacket) {
		return fmt.Errorf("fwd: route %v: uplink MTU %d out of range %d..%d", p, nh.UplinkMTU, ipv6MinMTU, MaxUplinkPacket)
	}
	if !nh.Tunnel && !nh.Blackhole && !nh.Uplink {
		if err := e.checkPort(nh.Port); err != nil {
			return err
		}
		if nh.Via.IsValid() && nh.Via.Is4() != p.Addr().Is4() {
			return fmt.Errorf("fwd: route %v via %v: address families differ", p, nh.Via)
		}
	}
	return nil
}
