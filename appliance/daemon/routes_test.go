package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// fakeFIB records what the route table asks of the engine.
type fakeFIB struct {
	routes map[netip.Prefix]fwd.NextHop
	calls  int
	fail   bool
}

func (f *fakeFIB) AddRoute(p netip.Prefix, nh fwd.NextHop) error {
	f.calls++
	if f.fail {
		return errors.New("engine refused")
	}
	f.routes[p] = nh
	return nil
}

func (f *fakeFIB) DeleteRoute(p netip.Prefix) error {
	f.calls++
	if _, ok := f.routes[p]; !ok {
		return fmt.Errorf("no route %v", p)
	}
	delete(f.routes, p)
	return nil
}

func (f *fakeFIB) UpdateRoutes(add []fwd.Route, del []netip.Prefix) error {
	f.calls++
	if f.fail {
		return errors.New("engine refused")
	}
	for _, p := range del {
		delete(f.routes, p)
	}
	for _, r := range add {
		f.routes[r.Prefix] = r.NextHop
	}
	return nil
}

func newTestTable() (*routeTable, *fakeFIB) {
	f := &fakeFIB{routes: map[netip.Prefix]fwd.NextHop{}}
	return newRouteTable(f, []string{"p0", "p1"}, slog.New(slog.DiscardHandler)), f
}

var (
	pfx   = netip.MustParsePrefix("198.18.60.0/24")
	viaP0 = fwd.NextHop{Port: 0, Via: netip.MustParseAddr("198.18.50.1")}
	viaP1 = fwd.NextHop{Port: 1, Via: netip.MustParseAddr("198.18.51.1")}
)

func TestRouteTablePrecedence(t *testing.T) {
	rt, f := newTestTable()
	rt.set(srcKernel, pfx, route{nh: viaP1}, true)
	if f.routes[pfx] != viaP1 {
		t.Fatalf("kernel route not installed: %v", f.routes)
	}
	// A [[route]] for the same prefix wins over the kernel's.
	rt.set(srcStatic, pfx, route{nh: viaP0}, true)
	if f.routes[pfx] != viaP0 {
		t.Fatalf("static route does not override the kernel's: %v", f.routes[pfx])
	}
	// The kernel changing its route does not touch the engine while static wins.
	calls := f.calls
	rt.set(srcKernel, pfx, route{nh: fwd.NextHop{Port: 1}}, true)
	if f.calls != calls || f.routes[pfx] != viaP0 {
		t.Fatalf("hidden kernel change reached the engine: %d calls, %v", f.calls-calls, f.routes[pfx])
	}
	// Static withdrawn: the kernel's current route comes back.
	rt.set(srcStatic, pfx, route{}, false)
	if f.routes[pfx] != (fwd.NextHop{Port: 1}) {
		t.Fatalf("kernel route not restored: %v", f.routes[pfx])
	}
	rt.set(srcKernel, pfx, route{}, false)
	if _, ok := f.routes[pfx]; ok {
		t.Fatalf("route left after every source withdrew it")
	}
	by, lines, _ := rt.counts()
	if by != [numSources]int{} || len(lines) != 0 {
		t.Fatalf("counts after withdrawal: %v %v", by, lines)
	}
}

func TestRouteTableLinkDown(t *testing.T) {
	rt, f := newTestTable()
	other := netip.MustParsePrefix("198.18.61.0/24")
	hole := netip.MustParsePrefix("198.18.62.0/24")
	rt.set(srcStatic, pfx, route{nh: viaP1}, true)
	rt.set(srcKernel, pfx, route{nh: viaP0}, true)
	rt.set(srcStatic, other, route{nh: viaP1}, true)
	rt.set(srcStatic, hole, route{nh: fwd.NextHop{Blackhole: true}}, true)
	rt.setLink(1, false)
	// pfx falls back to the kernel's route out of the live port; other has none.
	if f.routes[pfx] != viaP0 {
		t.Errorf("pfx with p1 down: %v, want the kernel route via p0", f.routes[pfx])
	}
	if _, ok := f.routes[other]; ok {
		t.Errorf("route out of a down port still installed")
	}
	if !f.routes[hole].Blackhole {
		t.Errorf("blackhole withdrawn by a link change")
	}
	rt.setLink(1, true)
	if f.routes[pfx] != viaP1 || f.routes[other] != viaP1 {
		t.Errorf("routes not restored on link up: %v", f.routes)
	}
	rt.setLink(7, false) // not a port: ignored
}

func TestRouteTableReplace(t *testing.T) {
	rt, f := newTestTable()
	keep := netip.MustParsePrefix("198.18.63.0/24")
	rt.replace(srcStatic, map[netip.Prefix]route{pfx: {nh: viaP0}, keep: {nh: viaP1}})
	calls := f.calls
	rt.replace(srcStatic, map[netip.Prefix]route{keep: {nh: viaP1}})
	if _, ok := f.routes[pfx]; ok || f.routes[keep] != viaP1 {
		t.Fatalf("after replace: %v", f.routes)
	}
	if f.calls-calls != 1 {
		t.Errorf("replace made %d engine calls, want 1 (the removal only)", f.calls-calls)
	}
	if nh, ok := rt.lookup(keep); !ok || nh != viaP1 {
		t.Errorf("lookup(%v) = %v, %v", keep, nh, ok)
	}
}

func TestRouteTableEngineRefuses(t *testing.T) {
	rt, f := newTestTable()
	f.fail = true
	rt.set(srcStatic, pfx, route{nh: viaP0}, true)
	if _, ok := rt.lookup(pfx); ok {
		t.Fatal("a route the engine refused is reported as installed")
	}
	f.fail = false
	rt.set(srcStatic, pfx, route{nh: viaP0}, true)
	if nh, ok := rt.lookup(pfx); !ok || nh != viaP0 || f.routes[pfx] != viaP0 {
		t.Fatal("retry after a refusal did not install the route")
	}
}

// TestRouteTableSetMany: a batch of kernel changes reaches the engine in
// one call, honours precedence and down links like single changes do,
// and withdrawals in the batch remove what was installed.
func TestRouteTableSetMany(t *testing.T) {
	rt, f := newTestTable()
	rt.set(srcStatic, pfx, route{nh: viaP0}, true)
	rt.setLink(1, false)
	other := netip.MustParsePrefix("198.18.61.0/24")
	down := netip.MustParsePrefix("198.18.62.0/24")
	changes := map[netip.Prefix]*route{pfx: {nh: viaP1}, other: {nh: viaP0}, down: {nh: viaP1}}
	for i := 0; i < 1000; i++ {
		changes[netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 32)] = &route{nh: viaP0}
	}
	calls := f.calls
	rt.setMany(srcKernel, changes)
	if f.calls != calls+1 {
		t.Errorf("a batch of %d took %d engine calls", len(changes), f.calls-calls)
	}
	if f.routes[pfx] != viaP0 || f.routes[other] != viaP0 || len(f.routes) != 1002 {
		t.Errorf("after the batch: %v (want static over kernel, nothing out of the down port)", len(f.routes))
	}
	if _, ok := f.routes[down]; ok {
		t.Error("route out of a down port installed")
	}
	rt.setLink(1, true)
	if f.routes[down] != viaP1 {
		t.Error("route out of port 1 not installed when it came up")
	}
	rt.setMany(srcKernel, map[netip.Prefix]*route{other: nil, down: nil, pfx: nil})
	if _, ok := f.routes[other]; ok || f.routes[pfx] != viaP0 {
		t.Errorf("withdrawal batch: other %v pfx %v", f.routes[other], f.routes[pfx])
	}
	if _, ok := f.routes[down]; ok {
		t.Error("withdrawn route still installed")
	}
	by, lines, prefixes := rt.counts()
	if by[srcKernel] != 1000 || by[srcStatic] != 1 || len(prefixes) != 1001 {
		t.Errorf("counts %v, %d prefixes", by, len(prefixes))
	}
	if len(lines) != maxListed || lines[0] != "198.18.60.0/24 via 198.18.50.1 dev p0 (static)" {
		t.Errorf("%d lines listed, first %q", len(lines), lines[0])
	}
}
