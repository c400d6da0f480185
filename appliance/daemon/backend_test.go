package daemon

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
)

func TestChooseBackend(t *testing.T) {
	fns := []mlx5.Function{
		{Addr: "0000:03:00.0", Name: "ConnectX-5", Driver: "vfio-pci"},
		{Addr: "0000:03:00.1", Name: "ConnectX-5", Driver: "mlx5_core"},
	}
	port := func(driver, pci, ifname, zc string) *config.Port {
		return &config.Port{Name: "p", Driver: driver, PCI: pci, IfName: ifname, AFXDP: config.AFXDP{ZeroCopy: zc}}
	}
	for _, tc := range []struct {
		p      *config.Port
		driver string
		reason string
	}{
		{port("auto", "0000:03:00.0", "", "auto"), "vfio", "bound to vfio-pci"},
		{port("auto", "0000:03:00.0", "eth1", "auto"), "vfio", "bound to vfio-pci"},
		{port("auto", "0000:03:00.1", "eth1", "auto"), "afxdp", `bound to "mlx5_core", not vfio-pci`},
		{port("auto", "0000:03:00.1", "eth1", "off"), "afxdp-copy", "not vfio-pci"},
		{port("auto", "0000:09:00.0", "eth1", "auto"), "afxdp", "not a ConnectX"},
		{port("auto", "", "eth1", "auto"), "afxdp", "no pci set"},
		{port("auto", "", "eth1", "off"), "afxdp-copy", "no pci set"},
		{port("afxdp", "", "eth1", "off"), "afxdp-copy", "zerocopy = off"},
		{port("afxdp", "", "eth1", "auto"), "afxdp", "configured"},
		{port("afxdp-copy", "", "eth1", "auto"), "afxdp-copy", "configured"},
		{port("vfio", "0000:03:00.0", "", "auto"), "vfio", "configured"},
		{port("mlx5-sim", "", "", "auto"), "mlx5-sim", "configured"},
	} {
		c := choose(tc.p, fns)
		if c.driver != tc.driver || !strings.Contains(c.reason, tc.reason) {
			t.Errorf("%s pci %q ifname %q zerocopy %s: got %s (%s), want %s (…%s…)",
				tc.p.Driver, tc.p.PCI, tc.p.IfName, tc.p.AFXDP.ZeroCopy, c.driver, c.reason, tc.driver, tc.reason)
		}
	}
}

func TestEngineConfig(t *testing.T) {
	a := config.Default().Appliance
	c := engineConfig(a, false)
	if c.Mode != fwd.ModeRouter || c.Batch != 64 || c.ICMPRate != 1000 || c.NeighHold != 4 ||
		c.NeighReachable != 30*time.Second || c.NeighRetrans*time.Duration(c.NeighProbes) != 3*time.Second {
		t.Errorf("defaults map to %+v", c)
	}
	a.Mode, a.ICMPRate, a.NeighbourHold, a.NeighbourReachable = config.ModeBridge, 0, 0, 2*time.Second
	c = engineConfig(a, false)
	if c.Mode != fwd.ModeBridge || c.ICMPRate >= 0 || c.NeighHold != 1 || c.NeighProbeBefore >= c.NeighReachable {
		t.Errorf("edge values map to %+v", c)
	}
	// The VPN server raises the hold to vpnNeighHold, never lowers it.
	if c = engineConfig(a, true); c.NeighHold != vpnNeighHold {
		t.Errorf("neighbour_hold 0 with the VPN on maps to %d, want %d", c.NeighHold, vpnNeighHold)
	}
	a.NeighbourHold = 4
	if c = engineConfig(a, true); c.NeighHold != vpnNeighHold {
		t.Errorf("neighbour_hold 4 with the VPN on maps to %d, want %d", c.NeighHold, vpnNeighHold)
	}
}

func TestStaticRoutes(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte(`
[[port]]
name = "p0"
ifname = "p0"
addresses = ["198.18.50.254/24"]
[[port]]
name = "p1"
ifname = "p1"
addresses = ["198.18.51.254/24"]
[[route]]
prefix = "198.18.60.0/24"
via = "198.18.51.1"
metric = 5
[[route]]
prefix = "198.18.60.0/24"
via = "198.18.50.1"
metric = 1
[[route]]
prefix = "198.18.61.0/24"
port = "p0"
`))
	if err != nil {
		t.Fatal(err)
	}
	idx := func(name string) (int, bool) {
		switch name {
		case "p0":
			return 0, true
		case "p1":
			return 1, true
		}
		return 0, false
	}
	rs, err := staticRoutes(cfg, idx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rs[pfx]; r.metric != 1 || r.nh.Port != 0 || r.nh.Via.String() != "198.18.50.1" {
		t.Errorf("lowest metric does not win: %+v", r)
	}
	if r := rs[netipPrefix("198.18.61.0/24")]; r.nh.Port != 0 || r.nh.Via.IsValid() {
		t.Errorf("on-link route: %+v", r)
	}
	if _, err := staticRoutes(cfg, func(string) (int, bool) { return 0, false }); err == nil {
		t.Error("a route via a port that is not running was accepted")
	}
}

var netipPrefix = netip.MustParsePrefix
