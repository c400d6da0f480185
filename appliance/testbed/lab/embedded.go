package lab

import (
	_ "embed"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/ovfwd/ovfwd/config"
)

// labTOML is the appliance's configuration: the file `ovfwd run` gets in
// the appliance namespace. dirToken stands for the run's work directory.
//
//go:embed lab.toml
var labTOML string

const dirToken = "@DIR@"

// applianceConfig is labTOML for work directory dir, parsed. The VPN key
// files it names (dir/state/pki/…) need not exist yet: Parse does not read
// them.
func applianceConfig(dir string) (text string, cfg *config.Config, err error) {
	text = strings.ReplaceAll(labTOML, dirToken, dir)
	cfg, err = config.Parse(filepath.Join(dir, "ovfwd.toml"), []byte(text))
	return text, cfg, err
}

// writeApplianceConfig writes the appliance's ovfwd.toml into dir and
// returns its path and its parsed form.
func writeApplianceConfig(dir string) (string, *config.Config, error) {
	text, cfg, err := applianceConfig(dir)
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "ovfwd.toml")
	return path, cfg, os.WriteFile(path, []byte(text), 0o644) // as /etc/ovfwd/ovfwd.toml
}

// topologyFor is the namespace topology that fits the appliance config c:
// DefaultConfig's hosts, the appliance's port addresses from c, and on
// host B the first address of every pushed VPN route (what the VPN client
// reaches through its tunnel; c routes them via host B).
func topologyFor(c *config.Config) Config {
	t := DefaultConfig()
	for i := range t.Ports {
		if i < len(c.Ports) {
			t.Ports[i].Addrs = c.Ports[i].Addresses
		}
	}
	if c.VPN.Enabled {
		t.VPNPort = uint16(c.VPN.Port)
	}
	for _, r := range c.VPN.PushRoutes {
		a := r.Masked().Addr().Next()
		t.HostB.Behind = append(t.HostB.Behind, netip.PrefixFrom(a, a.BitLen()))
	}
	return t
}

// tunnelTargets are host B's addresses behind the tunnel.
func tunnelTargets(t Config) []netip.Addr {
	var out []netip.Addr
	for _, p := range t.HostB.Behind {
		out = append(out, p.Addr())
	}
	return out
}
