package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd/nat"
)

// natState is the control plane's side of NAT: the rules in force, which
// port blocks each client holds (from the workers' block events, which
// are also the log lines).
type natState struct {
	mu        sync.Mutex
	rules     []config.NAT
	blockSize int
	clients   map[netip.Addr]*natClient
	// addrs are outside addresses the engine took on for NAT (not port
	// addresses), by port, so a reload can take them off again.
	addrs map[netip.Prefix]int

	cnames map[netip.Addr]string // common names as of the block allocation
	// linesLost counts block lines the log writer failed to take; the
	// workers count those their ring had no room for.
	linesLost atomic.Uint64
}

type natClient struct {
	outside netip.Addr
	blocks  map[uint16]uint16 // first port -> last port
}

// natCompile turns the [[nat]] rules into the engine's configuration; nil
// without rules.
func natCompile(cfg *config.Config, portIndex func(string) (int, bool)) (*nat.Compiled, error) {
	if len(cfg.NAT) == 0 {
		return nil, nil
	}
	o := cfg.NATOptions
	c := nat.Config{
		MaxSessions: o.MaxSessions, BlockSize: o.BlockSize, MaxBlocks: o.MaxBlocks,
		MaxSessionsPerClient: o.MaxSessionsPerClient, MaxSessionsPerMapping: o.MaxSessionsPerMapping,
		Timeouts:                     nat.Timeouts{TCPEstablished: o.TCPEstablished, TCPTransitory: o.TCPTransitory, UDP: o.UDP, ICMP: o.ICMP},
		EndpointIndependentFiltering: o.Filtering == config.FilteringEndpointIndependent,
	}
	if cfg.VPN.Enabled {
		c.Exclude = uint16(cfg.VPN.Port)
	}
	for _, r := range cfg.NAT {
		pi, ok := portIndex(r.Port)
		if !ok {
			return nil, fmt.Errorf("nat %s: port %q is not running (ports change only at restart)", r.Name, r.Port)
		}
		c.Rules = append(c.Rules, nat.Rule{Name: r.Name, Sources: r.Sources, Port: pi, Outside: r.Outside,
			PortLo: uint16(r.PortLo), PortHi: uint16(r.PortHi)})
	}
	return nat.Compile(c)
}

// applyNAT publishes cfg's NAT to the engine and the steering programs.
// The workers keep the sessions of rules that did not change.
func (d *daemon) applyNAT(cfg *config.Config) error {
	k, err := natCompile(cfg, d.portIndex)
	if err != nil {
		return err
	}
	if d.nat == nil {
		d.nat = &natState{clients: map[netip.Addr]*natClient{}, addrs: map[netip.Prefix]int{}, cnames: map[netip.Addr]string{}}
	}
	// Outside addresses that are not the port's own: the engine answers
	// ARP for them and owns them (the kernel does not have them, so the
	// steering program hands their traffic to ovfwd).
	want := map[netip.Prefix]int{}
	for _, r := range cfg.NAT {
		pi, _ := d.portIndex(r.Port)
		for _, a := range r.Outside {
			own := slices.ContainsFunc(d.ports[pi].cfg.Addresses, func(p netip.Prefix) bool { return p.Addr() == a })
			if !own {
				want[netip.PrefixFrom(a, 32)] = pi
			}
		}
	}
	for p, pi := range want {
		if _, had := d.nat.addrs[p]; !had {
			if err := d.engine.AddAddress(pi, p); err != nil {
				return fmt.Errorf("nat: outside address %v: %w", p.Addr(), err)
			}
		}
	}
	d.engine.SetNAT(k)
	for p, pi := range d.nat.addrs {
		if _, keep := want[p]; !keep {
			if err := d.engine.RemoveAddress(pi, p); err != nil {
				d.log.Warn("nat: outside address not removed", "addr", p.Addr(), "err", err)
			}
		}
	}
	for _, pt := range d.ports {
		if pt.xdp == nil {
			continue
		}
		var lo, hi int
		for _, r := range cfg.NAT {
			if r.Port == pt.cfg.Name {
				if lo == 0 || r.PortLo < lo {
					lo = r.PortLo
				}
				hi = max(hi, r.PortHi)
			}
		}
		if err := pt.xdp.SetNAT(uint16(lo), uint16(hi)); err != nil {
			return fmt.Errorf("port %s: %w", pt.cfg.Name, err)
		}
	}
	d.nat.mu.Lock()
	d.nat.addrs, d.nat.rules, d.nat.blockSize = want, cfg.NAT, cfg.NATOptions.BlockSize
	d.nat.mu.Unlock()
	for _, r := range cfg.NAT {
		d.log.Info("nat rule", "name", r.Name, "sources", r.Sources, "port", r.Port, "outside", r.Outside,
			"ports", fmt.Sprintf("%d-%d", r.PortLo, r.PortHi), "filtering", cfg.NATOptions.Filtering)
	}
	return nil
}

// serviceNAT logs the workers' port block events (one line per block:
// who held which outside ports from when to when).
func (d *daemon) serviceNAT() {
	n := d.nat
	if n == nil {
		return
	}
	// Not through the rate limiter: an abuse report depends on every line.
	h := d.rateLog.next
	d.engine.NATEvents(func(e nat.Event) { n.blockEvent(h, e, d.natCommonName) })
}

// blockEvent books one port block event and writes its line to h; a line
// h fails to write is counted (block_logs_lost), never dropped unseen.
func (n *natState) blockEvent(h slog.Handler, e nat.Event, commonName func(netip.Addr) string) {
	n.mu.Lock()
	c := n.clients[e.Inside]
	if e.Alloc {
		if c == nil {
			c = &natClient{outside: e.Outside, blocks: map[uint16]uint16{}}
			n.clients[e.Inside] = c
			n.cnames[e.Inside] = commonName(e.Inside)
		}
		c.blocks[e.PortLo] = e.PortHi
	} else if c != nil {
		delete(c.blocks, e.PortLo)
	}
	cn := n.cnames[e.Inside]
	if c != nil && len(c.blocks) == 0 {
		delete(n.clients, e.Inside)
		delete(n.cnames, e.Inside)
	}
	rule := ""
	if e.Rule < len(n.rules) {
		rule = n.rules[e.Rule].Name
	}
	n.mu.Unlock()
	event := "release"
	if e.Alloc {
		event = "allocate"
	}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "nat block", 0)
	r.Add("event", event, "client", e.Inside, "common_name", cn, "rule", rule,
		"outside", e.Outside, "ports", fmt.Sprintf("%d-%d", e.PortLo, e.PortHi))
	if err := h.Handle(context.Background(), r); err != nil {
		n.linesLost.Add(1)
	}
}

// natCommonName is the certificate name of the VPN client using inside
// address a (its pool address or an iroute), or "".
func (d *daemon) natCommonName(a netip.Addr) string {
	v := d.vpn
	if v == nil {
		return ""
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, p := range v.peers {
		if p.VPNIPv4 == a {
			return p.CommonName
		}
		for _, r := range v.iroutes[p.CommonName] {
			if r.Contains(a) {
				return p.CommonName
			}
		}
	}
	return ""
}

// natSnapshot is the NAT part of status; nil without rules.
func (d *daemon) natSnapshot() *status.NAT {
	n := d.nat
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.rules) == 0 {
		return nil
	}
	s := d.engine.NATStats()
	es := d.engine.Stats()
	out := &status.NAT{
		Sessions: status.Counters{"tcp": s.Sessions[nat.SessionsTCP], "udp": s.Sessions[nat.SessionsUDP], "icmp": s.Sessions[nat.SessionsICMP]},
		Counters: status.Counters{
			"translated": s.Translated, "untranslated": s.Untranslated, "hairpinned": s.Hairpinned,
			"fragments_out": s.FragmentsOut, "fragments_in": s.FragmentsIn,
			"sessions_created": s.SessionsCreated, "sessions_expired": s.SessionsExpired,
			"blocks_allocated": s.BlocksAllocated, "blocks_released": s.BlocksReleased, "block_logs_lost": s.EventsLost + n.linesLost.Load(),
			"mappings": s.Mappings, "clients": s.Clients, "blocks": s.Blocks, "handoffs": es.Handoffs,
		},
		Drops: status.Counters{},
	}
	for i, name := range nat.DropNames() {
		if v := nat.Verdict(i); v >= nat.DropNoPort {
			out.Drops[name] = s.Drops[v]
		}
	}
	for _, r := range n.rules {
		nr := status.NATRule{Name: r.Name, Port: r.Port, Ports: fmt.Sprintf("%d-%d", r.PortLo, r.PortHi)}
		for _, p := range r.Sources {
			nr.Sources = append(nr.Sources, p.String())
		}
		for _, a := range r.Outside {
			nr.Outside = append(nr.Outside, a.String())
		}
		out.Rules = append(out.Rules, nr)
	}
	for a, c := range n.clients {
		nc := status.NATClient{Inside: a.String(), Name: n.cnames[a], Outside: c.outside.String()}
		for lo, hi := range c.blocks {
			nc.Blocks = append(nc.Blocks, fmt.Sprintf("%d-%d", lo, hi))
			nc.Ports += int(hi) - int(lo) + 1
		}
		sort.Slice(nc.Blocks, func(i, j int) bool { return portOrder(nc.Blocks[i]) < portOrder(nc.Blocks[j]) })
		out.Clients = append(out.Clients, nc)
	}
	sort.Slice(out.Clients, func(i, j int) bool { return out.Clients[i].Inside < out.Clients[j].Inside })
	return out
}

func portOrder(r string) int {
	lo, _, _ := strings.Cut(r, "-")
	var n int
	fmt.Sscan(lo, &n)
	return n
}
