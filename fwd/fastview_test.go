package fwd_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

// FastView offers the fast path exactly the forwarding it may do: a
// route via a resolved gateway, a /32 or /128 per resolved host of a connected
// subnet (not where a longer route takes the host), and punts for the
// rest, including a neighbour in its refresh-probe window.
func TestFastView(t *testing.T) {
	r := newRig(t, rigOpt{mode: fwd.ModeRouter, nports: 3, cfg: fwd.Config{NeighReachable: 30 * time.Second, NeighProbeBefore: 5 * time.Second}})
	gw := netip.MustParseAddr("198.18.1.254")
	must(t, r.e.AddRoute(netip.MustParsePrefix("198.18.64.0/18"), fwd.NextHop{Port: 1, Via: gw}))
	must(t, r.e.AddRoute(netip.MustParsePrefix("198.18.96.0/19"), fwd.NextHop{Port: 1, Via: netip.MustParseAddr("198.18.1.253")}))
	must(t, r.e.AddRoute(netip.MustParsePrefix("198.18.1.128/25"), fwd.NextHop{Port: 2, Via: netip.MustParseAddr("198.18.1.250")}))
	must(t, r.e.AddRoute(netip.MustParsePrefix("198.18.160.0/20"), fwd.NextHop{Blackhole: true}))
	must(t, r.e.SetNeighbour(1, gw, macA))
	must(t, r.e.SetNeighbour(1, bV4, macB))                                 // 198.18.1.20: a connected host
	must(t, r.e.SetNeighbour(1, netip.MustParseAddr("198.18.1.200"), macC)) // inside the longer /25
	gw6 := netip.MustParseAddr("2001:db8:1::fe")
	must(t, r.e.AddRoute(netip.MustParsePrefix("2001:db8:40::/48"), fwd.NextHop{Port: 1, Via: gw6}))
	must(t, r.e.SetNeighbour(1, gw6, macA))
	must(t, r.e.SetNeighbour(1, bV6, macB)) // 2001:db8:1::20: a connected host
	v := r.e.FastView()
	got := map[netip.Prefix]fwd.FastRoute{}
	for _, x := range v.Routes {
		got[x.Prefix] = x
	}
	want := map[string]struct {
		punt bool
		port int
		mac  []byte
	}{
		"198.18.64.0/18":     {false, 1, macA},
		"198.18.96.0/19":     {true, 1, nil}, // gateway unresolved
		"198.18.1.128/25":    {true, 2, nil},
		"198.18.160.0/20":    {true, 0, nil},
		"198.18.1.0/24":      {true, 1, nil},
		"198.18.0.0/24":      {true, 0, nil},
		"198.18.1.1/32":      {true, 1, nil}, // ours
		"198.18.1.20/32":     {false, 1, macB},
		"2001:db8:40::/48":   {false, 1, macA},
		"2001:db8:1::/64":    {true, 1, nil},
		"2001:db8:1::20/128": {false, 1, macB},
		"2001:db8:1::1/128":  {true, 1, nil},
	}
	for p, w := range want {
		x, ok := got[netip.MustParsePrefix(p)]
		if !ok || x.Punt != w.punt || (!w.punt && (x.Port != w.port || !bytes.Equal(x.MAC, w.mac))) {
			t.Errorf("%s: %+v (present %v), want %+v", p, x, ok, w)
		}
	}
	if _, ok := got[netip.MustParsePrefix("198.18.1.200/32")]; ok {
		t.Error("a host under a longer static route got its own /32")
	}
	if len(v.Ports) != 3 || !bytes.Equal(v.Ports[1].MAC, macR1) || v.Ports[1].MTU != 1500 || v.Ports[1].NAT {
		t.Errorf("ports %+v", v.Ports)
	}

	// A neighbour learned from its own ARP request is unconfirmed: the
	// engine does not forward to it, so neither may the fast path.
	unconf := netip.MustParseAddr("198.18.1.30")
	r.inject(1, eth(bcast, macC, 0x0806, arp(1, macC, unconf, make([]byte, 6), r1v4.Addr())))
	r.poll()
	r.e.Service()
	learned := false
	for _, n := range r.e.Neighbours() {
		learned = learned || n.Addr == unconf
	}
	v = r.e.FastView()
	for _, x := range v.Routes {
		if x.Prefix == netip.PrefixFrom(unconf, 32) && !x.Punt {
			t.Errorf("unconfirmed neighbour %v on the fast path (engine has it: %v)", unconf, learned)
		}
	}

	// NAT on port 1's egress: everything leaving it is the engine's.
	setNAT(t, r.e, natConfig(false))
	v = r.e.FastView()
	for _, x := range v.Routes {
		if x.Port == 1 && !x.Punt {
			t.Errorf("%v leaves NAT'd port 1 through the fast path", x.Prefix)
		}
	}
	if !v.Ports[1].NAT || v.Ports[0].NAT {
		t.Errorf("NAT ports %+v", v.Ports)
	}
}
