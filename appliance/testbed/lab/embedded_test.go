package lab

import (
	"testing"

	"github.com/ovfwd/ovfwd/config"
)

// The embedded lab.toml is a valid config that fits the lab's topology:
// router mode, IPv4 and IPv6 on both ports, the VPN on, the hosts' default
// routes pointing at the ports' addresses, and every pushed route reaching
// host B through a static route via host B.
func TestEmbeddedConfigFitsTopology(t *testing.T) {
	text, c, err := applianceConfig("/run/ovfwd-lab/1")
	if err != nil {
		t.Fatalf("lab.toml: %v\n%s", err, text)
	}
	if c.Appliance.Mode != config.ModeRouter || !c.VPN.Enabled || c.Status.Socket != "/run/ovfwd-lab/1/run/ovfwd.sock" {
		t.Errorf("mode %s, vpn %v, status socket %q", c.Appliance.Mode, c.VPN.Enabled, c.Status.Socket)
	}
	if c.VPN.CA != "/run/ovfwd-lab/1/state/pki/ca.crt" {
		t.Errorf("key paths not under the work directory: %s", c.VPN.CA)
	}
	if len(c.Ports) != 2 || c.Ports[0].IfName != ifAppA || c.Ports[1].IfName != ifAppB {
		t.Fatalf("ports %+v, want %s and %s", c.Ports, ifAppA, ifAppB)
	}
	tp := topologyFor(c)
	for i, h := range []Host{tp.HostA, tp.HostB} {
		var has4, has6 bool
		for _, a := range c.Ports[i].Addresses {
			has4, has6 = has4 || a.Addr().Is4(), has6 || a.Addr().Is6()
		}
		if !has4 || !has6 {
			t.Errorf("port %s lacks IPv4 or IPv6: %v", c.Ports[i].Name, c.Ports[i].Addresses)
		}
		for _, via := range h.Via {
			found := false
			for _, a := range c.Ports[i].Addresses {
				found = found || a.Addr() == via
			}
			if !found {
				t.Errorf("host %d routes via %s, which port %s does not own", i, via, c.Ports[i].Name)
			}
		}
	}
	if len(tp.HostB.Behind) != 2 || len(c.VPN.PushRoutes) != 2 {
		t.Fatalf("behind host B: %v; pushed %v", tp.HostB.Behind, c.VPN.PushRoutes)
	}
	for _, b := range tp.HostB.Behind {
		routed := false
		for _, r := range c.Routes {
			if r.Prefix.Contains(b.Addr()) {
				for _, hb := range tp.HostB.Addrs {
					routed = routed || (hb.Addr() == r.Via && r.Port == c.Ports[1].Name)
				}
			}
		}
		if !routed {
			t.Errorf("%s (pushed to clients) has no static route via host B: %+v", b, c.Routes)
		}
		if tp.HostA.Addrs[0].Contains(b.Addr()) || tp.HostB.Addrs[0].Contains(b.Addr()) {
			t.Errorf("%s overlaps a port subnet: host A would not use the tunnel", b)
		}
	}
}
