package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"sync"

	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
)

// source is where a route comes from. When two sources have a route for
// one prefix the lower source wins: a peer's tunnel address or iroute over
// an uplink's routes over the config file's [[route]] over the kernel
// table.
type source uint8

const (
	srcTunnel source = iota
	srcUplink
	srcStatic
	srcKernel
	numSources
)

var sourceNames = [numSources]string{"tunnel", "uplink", "static", "kernel"}

type route struct {
	nh     fwd.NextHop
	metric int
}

// routeTable merges the routes every source wants into the engine's FIB:
// the engine keeps one next hop per prefix, so a prefix's winner is
// recomputed whenever one of its sources or an egress link changes, and
// only a changed winner reaches the engine. Routes out of a port whose
// link is down are withdrawn until it comes back.
type routeTable struct {
	eng fibWriter
	log *slog.Logger
	// portNames name engine ports in status lines, uplinkNames uplinks.
	portNames   []string
	uplinkNames []string

	mu        sync.Mutex
	want      [numSources]map[netip.Prefix]route
	linkDown  []bool
	installed map[netip.Prefix]installedRoute
}

type installedRoute struct {
	route
	src source
}

// fibWriter is the part of *fwd.Engine the route table drives.
type fibWriter interface {
	AddRoute(p netip.Prefix, nh fwd.NextHop) error
	DeleteRoute(p netip.Prefix) error
	UpdateRoutes(add []fwd.Route, del []netip.Prefix) error
}

func newRouteTable(eng fibWriter, portNames []string, log *slog.Logger) *routeTable {
	t := &routeTable{eng: eng, log: log, portNames: portNames, linkDown: make([]bool, len(portNames)),
		installed: map[netip.Prefix]installedRoute{}}
	for i := range t.want {
		t.want[i] = map[netip.Prefix]route{}
	}
	return t
}

// set adds (ok) or removes one route of src.
func (t *routeTable) set(src source, p netip.Prefix, r route, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok {
		t.want[src][p] = r
	} else {
		delete(t.want[src], p)
	}
	t.sync(p)
}

// replace makes routes the whole set of src (a reload of [[route]]).
func (t *routeTable) replace(src source, routes map[netip.Prefix]route) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.want[src]
	t.want[src] = routes
	for p := range old {
		t.sync(p)
	}
	for p := range routes {
		if _, seen := old[p]; !seen {
			t.sync(p)
		}
	}
}

// setLink withdraws or restores the routes out of port.
func (t *routeTable) setLink(port int, up bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if port < 0 || port >= len(t.linkDown) || t.linkDown[port] == !up {
		return
	}
	t.linkDown[port] = !up
	seen := map[netip.Prefix]bool{}
	for _, m := range t.want {
		for p, r := range m {
			if !seen[p] && r.nh.Port == port && leavesByPort(r.nh) {
				seen[p] = true
				t.sync(p)
			}
		}
	}
}

// winner is the route p should have now. Caller holds t.mu.
func (t *routeTable) winner(p netip.Prefix) (installedRoute, bool) {
	for src := range numSources {
		r, ok := t.want[src][p]
		if !ok || t.egressDown(r.nh) {
			continue
		}
		return installedRoute{r, src}, true
	}
	return installedRoute{}, false
}

// sync recomputes p's winner and tells the engine if it changed. Caller
// holds t.mu.
func (t *routeTable) sync(p netip.Prefix) {
	best, found := t.winner(p)
	cur, had := t.installed[p]
	switch {
	case found && (!had || cur != best):
		if err := t.eng.AddRoute(p, best.nh); err != nil {
			t.log.Error("route not installed", "prefix", p, "source", sourceNames[best.src], "err", err)
			return
		}
		t.installed[p] = best
		if t.log.Enabled(context.Background(), slog.LevelDebug) {
			t.log.Debug("route installed", "prefix", p, "source", sourceNames[best.src], "nexthop", t.describe(best.nh))
		}
	case !found && had:
		if err := t.eng.DeleteRoute(p); err != nil {
			t.log.Error("route not removed", "prefix", p, "err", err)
		}
		delete(t.installed, p)
		t.log.Debug("route removed", "prefix", p)
	}
}

// setMany applies many changes of src at once (a nil route withdraws),
// with one engine update for the lot: a burst of kernel routes (a BGP
// feed) costs one or a few table swaps instead of one per route.
func (t *routeTable) setMany(src source, changes map[netip.Prefix]*route) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var add []fwd.Route
	var del []netip.Prefix
	for p, r := range changes {
		if r != nil {
			t.want[src][p] = *r
		} else {
			delete(t.want[src], p)
		}
		best, found := t.winner(p)
		cur, had := t.installed[p]
		switch {
		case found && (!had || cur != best):
			add = append(add, fwd.Route{Prefix: p, NextHop: best.nh})
		case !found && had:
			del = append(del, p)
		}
	}
	if len(add)+len(del) == 0 {
		return
	}
	if err := t.eng.UpdateRoutes(add, del); err != nil {
		// One bad route refuses the batch: find it one by one.
		t.log.Error("routes not installed as a batch; installing one by one", "routes", len(add)+len(del), "err", err)
		for p := range changes {
			t.sync(p)
		}
		return
	}
	for _, r := range add {
		best, _ := t.winner(r.Prefix)
		t.installed[r.Prefix] = best
	}
	for _, p := range del {
		delete(t.installed, p)
	}
	t.log.Debug("routes updated", "source", sourceNames[src], "installed", len(add), "removed", len(del))
}

func (t *routeTable) egressDown(nh fwd.NextHop) bool {
	return leavesByPort(nh) && nh.Port >= 0 && nh.Port < len(t.linkDown) && t.linkDown[nh.Port]
}

// leavesByPort says whether nh sends out of a port (and so depends on its link).
func leavesByPort(nh fwd.NextHop) bool { return !nh.Tunnel && !nh.Blackhole && !nh.Uplink }

func (t *routeTable) describe(nh fwd.NextHop) string {
	switch {
	case nh.Blackhole:
		return "blackhole"
	case nh.Tunnel:
		return fmt.Sprintf("tunnel peer %d", nh.Peer)
	case nh.Uplink:
		if int(nh.UplinkID) < len(t.uplinkNames) {
			return fmt.Sprintf("uplink %s mtu %d", t.uplinkNames[nh.UplinkID], nh.UplinkMTU)
		}
		return fmt.Sprintf("uplink %d mtu %d", nh.UplinkID, nh.UplinkMTU)
	case nh.Via.IsValid():
		return fmt.Sprintf("via %v dev %s", nh.Via, t.portNames[nh.Port])
	}
	return "dev " + t.portNames[nh.Port]
}

// maxListed bounds the routes status lists one by one: a full BGP table
// would make every status call format, sort and send 100 k lines.
const maxListed = 1000

// counts reports installed routes by source, one line for each of the
// first maxListed routes in prefix order, and every installed prefix.
func (t *routeTable) counts() (bySource [numSources]int, lines []string, prefixes []netip.Prefix) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prefixes = make([]netip.Prefix, 0, len(t.installed))
	for p, r := range t.installed {
		bySource[r.src]++
		prefixes = append(prefixes, p)
	}
	sort.Slice(prefixes, func(i, j int) bool {
		if c := prefixes[i].Addr().Compare(prefixes[j].Addr()); c != 0 {
			return c < 0
		}
		return prefixes[i].Bits() < prefixes[j].Bits()
	})
	for _, p := range prefixes[:min(len(prefixes), maxListed)] {
		r := t.installed[p]
		lines = append(lines, fmt.Sprintf("%v %s (%s)", p, t.describe(r.nh), sourceNames[r.src]))
	}
	sort.Strings(lines)
	return bySource, lines, prefixes
}

// lookup is the installed route for p (tests and status).
func (t *routeTable) lookup(p netip.Prefix) (fwd.NextHop, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.installed[p]
	return r.nh, ok
}

// startRoutes builds the route table over the engine with the static
// routes ([[route]]).
func (d *daemon) startRoutes(cfg *config.Config) error {
	names := make([]string, len(d.ports))
	for i, pt := range d.ports {
		names[i] = pt.cfg.Name
	}
	d.fib = newRouteTable(d.engine, names, d.log)
	static, err := staticRoutes(cfg, d.portIndex)
	if err != nil {
		return err
	}
	d.fib.replace(srcStatic, static)
	return nil
}

// staticRoutes maps [[route]] onto engine next hops.
func staticRoutes(cfg *config.Config, portIndex func(string) (int, bool)) (map[netip.Prefix]route, error) {
	out := map[netip.Prefix]route{}
	for _, r := range cfg.Routes {
		i, ok := portIndex(r.Port)
		if !ok {
			return nil, fmt.Errorf("route %v: port %q is not running (ports change only at restart)", r.Prefix, r.Port)
		}
		if cur, dup := out[r.Prefix]; dup && cur.metric <= r.Metric {
			continue // lower metric wins
		}
		out[r.Prefix] = route{nh: fwd.NextHop{Port: i, Via: r.Via}, metric: r.Metric}
	}
	return out, nil
}
