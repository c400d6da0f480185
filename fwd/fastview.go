package fwd

import (
	"net"
	"net/netip"
)

// FastView is what an in-kernel fast path (appliance/afxdp.FastPath) may
// mirror of the engine's forwarding state: the published FIB as
// prefixes with the port and neighbour each forwards to, and nothing the
// engine must see itself. The control plane reads it where it publishes
// tables and writes the fast path's maps from it, so the engine stays the
// one source of truth.
type FastView struct {
	Routes   []FastRoute // IPv4 and IPv6
	Ports    []FastPortView
	MSSClamp uint16
}

// FastRoute is one entry: frames to Prefix leave Port towards MAC, or go
// to the engine (Punt: our addresses, tunnel, uplink, blackhole, a
// neighbour not resolved or due for its refresh probe, a tagged egress, an
// egress port with a NAT rule).
type FastRoute struct {
	Prefix netip.Prefix
	Punt   bool
	Local  bool // one of our addresses (a host prefix; punts): martian as a source
	Port   int
	MAC    net.HardwareAddr
}

// FastPortView is a port as the fast path needs it.
type FastPortView struct {
	MAC    net.HardwareAddr
	MTU    int
	Tagged bool // router tag set: frames in and out carry 802.1Q
	NAT    bool // a NAT rule translates what leaves the port
}

// FastView snapshots the IPv4 and IPv6 FIBs. A connected subnet punts
// (its hosts are resolved by the engine), and each resolved neighbour the
// FIB sends to that subnet gets its own /32 or /128, unless a longer route
// covers it. A neighbour within NeighProbeBefore of expiry punts, so the
// engine sees the traffic that makes it send the refresh probe.
func (e *Engine) FastView() FastView {
	t := e.tables.Load()
	now := e.cfg.Now()
	probe := int64(e.limits.Load().NeighProbeBefore)
	nt := e.neigh.Load()
	var v FastView
	v.MSSClamp = e.limits.Load().MSSClamp
	natted := make([]bool, len(t.ports)) // NAT translates what leaves these
	if k := e.nat.Load(); k != nil {
		for _, r := range k.Config().Rules {
			if r.Port >= 0 && r.Port < len(natted) {
				natted[r.Port] = true
			}
		}
	}
	for i, pc := range t.ports {
		// A NAT'd egress is the engine's, like a tagged one.
		v.Ports = append(v.Ports, FastPortView{MAC: append(net.HardwareAddr(nil), pc.mac[:]...), MTU: pc.mtu, Tagged: pc.routerTag != 0, NAT: natted[i]})
	}
	resolved := func(port uint16, key *[16]byte) (net.HardwareAddr, bool) {
		n := nt.lookup(port, key)
		if n == nil {
			return nil, false
		}
		mac, exp := n.mac.Load(), n.expires.Load()
		if mac&neighValid == 0 || exp-now <= probe || !n.confirmed.Load() { // as nextHop forwards
			return nil, false
		}
		m := make(net.HardwareAddr, 6)
		unpackMAC(mac, m)
		return m, true
	}
	walk := func(p netip.Prefix, ai uint32) bool {
		a := &t.adj[ai]
		r := FastRoute{Prefix: p, Punt: true, Local: a.kind == adjLocal, Port: int(a.port)}
		if a.kind == adjVia && !t.ports[a.port].isTagged() && !natted[a.port] {
			mac, ok := resolved(a.port, &a.via)
			r.MAC, r.Punt = mac, !ok
		}
		v.Routes = append(v.Routes, r)
		return true
	}
	t.v4.Walk(walk)
	t.v6.Walk(walk)
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, n := range e.neighs {
		if t.ports[k.port].isTagged() || natted[k.port] {
			continue
		}
		var ai uint32
		var ok bool
		var host netip.Prefix
		if n.is4 {
			addr := [4]byte(k.addr[12:16])
			ai, ok = t.v4.Lookup(addr)
			host = netip.PrefixFrom(netip.AddrFrom4(addr), 32)
		} else {
			ai, ok = t.v6.Lookup(k.addr)
			host = netip.PrefixFrom(netip.AddrFrom16(k.addr), 128)
		}
		if !ok || t.adj[ai].kind != adjGlean || t.adj[ai].port != k.port {
			continue
		}
		key := k.addr
		if mac, ok := resolved(k.port, &key); ok {
			v.Routes = append(v.Routes, FastRoute{Prefix: host, Port: int(k.port), MAC: mac})
		}
	}
	return v
}

func (pc *portConf) isTagged() bool { return pc.routerTag != 0 }

// FastGen identifies the published tables: it changes whenever routes,
// addresses, ports or the set of neighbours change (learned neighbours'
// ageing changes in place and does not move it).
type FastGen struct {
	t *tables
	n uint64 // Engine.neighGen
}

// FastGen is the current generation, comparable with ==.
func (e *Engine) FastGen() FastGen { return FastGen{e.tables.Load(), e.neighGen.Load()} }
