package daemon

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/config"
)

// TestRestartOnly: pushed options, keepalive, renegotiation, admission
// limits, MSS clamp, ICMP rate and neighbour timers are applied by a
// reload; sockets, keys, pools, ports, workers and the hold size are not.
func TestRestartOnly(t *testing.T) {
	old := config.Default()
	old.VPN.Enabled = true
	live := *old
	live.VPN.PushRoutes = []netip.Prefix{netip.MustParsePrefix("198.18.73.0/24")}
	live.VPN.KeepaliveInterval, live.VPN.KeepaliveTimeout, live.VPN.RenegSec = 5*time.Second, 30*time.Second, 0
	live.VPN.MaxPeers, live.VPN.MaxHalfOpen, live.VPN.HandshakeRate, live.VPN.TunMTU = 10, 5, 1, 1400
	live.Appliance.MSSClamp, live.Appliance.ICMPRate = 1300, 5
	live.Appliance.NeighbourReachable, live.Appliance.NeighbourTimeout = time.Minute, time.Second
	if got := restartOnly(old, &live); len(got) != 0 {
		t.Errorf("live changes listed as restart-only: %v", got)
	}
	for name, change := range map[string]func(c *config.Config){
		"[vpn]":       func(c *config.Config) { c.VPN.Port = 1195 },
		"[vpn] pool":  func(c *config.Config) { c.VPN.PoolV4 = netip.MustParsePrefix("198.18.80.0/24") },
		"[appliance]": func(c *config.Config) { c.Appliance.NeighbourHold = 8 },
		"[[port]]":    func(c *config.Config) { c.Ports = append(c.Ports, config.Port{Name: "p9"}) },
	} {
		nc := live
		change(&nc)
		if got := restartOnly(old, &nc); len(got) != 1 {
			t.Errorf("%s change: restart-only sections %v, want one", name, got)
		}
	}
}

// A change that waits for a restart is reported by the reload that makes
// it, not by every later one; a further change to it is reported again,
// and reverting it is not reported at all.
func TestRestartWarnedOnce(t *testing.T) {
	d := &daemon{}
	start := config.Default()
	start.Ports = []config.Port{{Name: "p0", IfName: "p0"}}
	changed := *start
	changed.Ports = []config.Port{{Name: "p0", IfName: "p0"}, {Name: "p1", IfName: "p1"}}
	again := changed
	again.Ports = append(slices.Clone(changed.Ports), config.Port{Name: "p2", IfName: "p2"})
	for i, step := range []struct {
		nc   *config.Config
		want []string
	}{
		{&changed, []string{"[[port]]"}},
		{&changed, nil},
		{&changed, nil},
		{&again, []string{"[[port]]"}},
		{start, nil},
		{&changed, []string{"[[port]]"}},
	} {
		if got := d.newlyPending(restartOnly(start, step.nc)); !slices.Equal(got, step.want) {
			t.Errorf("reload %d: warned %v, want %v", i+1, got, step.want)
		}
	}
}

// TestVPNTunables maps [vpn] onto the control server's Tunables.
func TestVPNTunables(t *testing.T) {
	c := config.Default().VPN
	c.PushRoutes = []netip.Prefix{netip.MustParsePrefix("198.18.73.0/24")}
	c.RenegSec = 600
	c.RedirectGateway = []string{"ipv4", "ipv6"}
	c.DNS = []netip.Addr{netip.MustParseAddr("198.18.0.53"), netip.MustParseAddr("2001:db8::53")}
	c.DNSDomain = "corp.example"
	c.CCD = []config.VPNCCD{{CommonName: "alice", IPv4: netip.MustParseAddr("198.19.0.9"), Disable: true}}
	got, err := vpnTunables(&c)
	if err != nil {
		t.Fatal(err)
	}
	wantPush := []string{"redirect-gateway def1 ipv6", "dhcp-option DNS 198.18.0.53", "dhcp-option DNS6 2001:db8::53", "dhcp-option DOMAIN corp.example"}
	if !slices.Equal(got.Push, wantPush) || !got.Clients["alice"].Disabled || got.Clients["alice"].IPv4 != c.CCD[0].IPv4 || got.Revoked != nil {
		t.Errorf("policy: push %q clients %+v", got.Push, got.Clients)
	}
	if !slices.Equal(got.Routes, c.PushRoutes) || got.Ping != c.KeepaliveInterval || got.PingRestart != c.KeepaliveTimeout ||
		got.RenegSec != 10*time.Minute || got.MaxPeers != c.MaxPeers || got.MaxHalfOpen != c.MaxHalfOpen ||
		got.HandshakeRate != float64(c.HandshakeRate) || got.TunMTU != c.TunMTU {
		t.Errorf("tunables %+v from %+v", got, c)
	}
	c.RenegSec = 0
	if got, _ := vpnTunables(&c); got.RenegSec >= 0 {
		t.Errorf("reneg_sec 0 maps to %v, want the control server's never (<0)", got.RenegSec)
	}
}

// TestEngineLimits: the limits a reload publishes are those a start uses.
func TestEngineLimits(t *testing.T) {
	a := config.Default().Appliance
	a.MSSClamp, a.ICMPRate, a.NeighbourTimeout = 1300, 0, 6*time.Second
	c := engineConfig(a, false)
	l := engineLimits(c)
	if l.MSSClamp != 1300 || l.ICMPRate >= 0 || l.NeighRetrans != 2*time.Second || l.NeighProbes != 3 ||
		l.NeighReachable != a.NeighbourReachable || l.NeighProbeBefore != c.NeighProbeBefore {
		t.Errorf("limits %+v from %+v", l, a)
	}
}

// The glean_* keys reach the engine at start and on reload, and changing
// them is no "restart to apply" change.
func TestGleanLimitsReload(t *testing.T) {
	a := config.Default().Appliance
	a.GleanSourceRate, a.GleanSourceBurst, a.GleanPortRate, a.GleanPortBurst = 7, 9, 70, 90
	c := engineConfig(a, false)
	l := engineLimits(c)
	if c.GleanSourceRate != 7 || c.GleanSourceBurst != 9 || c.GleanPortRate != 70 || c.GleanPortBurst != 90 ||
		l.GleanSourceRate != 7 || l.GleanSourceBurst != 9 || l.GleanPortRate != 70 || l.GleanPortBurst != 90 {
		t.Errorf("config %+v, limits %+v from %+v", c, l, a)
	}
	if !reflect.DeepEqual(applianceRestartPart(a), applianceRestartPart(config.Default().Appliance)) {
		t.Error("a change of the glean limits asks for a restart")
	}
}
