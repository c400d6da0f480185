package fwd_test

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// TestUpdateRoutesMatchesOneByOne: batches of changes through
// UpdateRoutes, small (path-copied) and large (rebuilt), leave the same
// FIB as the same changes made one route at a time, including deletions
// of routes that shadow a connected subnet and of prefixes never added.
func TestUpdateRoutesMatchesOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	one := newRig(t, rigOpt{mode: fwd.ModeRouter})
	batch := newRig(t, rigOpt{mode: fwd.ModeRouter})
	routes := fibTestRoutes(rng, 12000)
	// A static route over the connected subnet of port 0: deleting it
	// must leave the connected route, not a hole.
	routes = append(routes, fwd.Route{Prefix: r0v4.Masked(), NextHop: fwd.NextHop{Blackhole: true}})
	apply := func(add []fwd.Route, del []netip.Prefix) {
		t.Helper()
		for _, p := range del {
			_ = one.e.DeleteRoute(p) // an absent prefix is an error here, not in UpdateRoutes
		}
		for _, r := range add {
			must(t, one.e.AddRoute(r.Prefix, r.NextHop))
		}
		must(t, batch.e.UpdateRoutes(add, del))
		if got, want := batch.e.FIB(), one.e.FIB(); !reflect.DeepEqual(got, want) {
			t.Fatalf("after %d adds and %d deletes: batched FIB has %d prefixes, one-by-one %d", len(add), len(del), len(got), len(want))
		}
	}
	apply(routes[:100], nil)     // small
	apply(routes[100:9000], nil) // bulk
	apply(routes[9000:], []netip.Prefix{netip.MustParsePrefix("198.18.250.0/24")})
	var del []netip.Prefix
	for i := 0; i < len(routes); i += 2 {
		del = append(del, routes[i].Prefix)
	}
	del = append(del, r0v4.Masked())
	apply(routes[1:50], del) // bulk delete with re-adds
	apply(nil, del[:10])     // small delete
	apply(fibTestRoutes(rand.New(rand.NewPCG(1, 2)), 50), nil)
}
