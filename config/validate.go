package config

import (
	"fmt"
	"net/netip"
	"path/filepath"
)

// validate checks what no single key can: names that must be unique, routes
// that must be reachable, pools that must not overlap, and what the VPN
// server needs when enabled. It runs after decoding, on the values decoded.
func (d *decoder) validate(c *Config) {
	d.validatePorts(c)
	d.validateRoutes(c)
	d.validateVPN(c)
	d.validateNAT(c)
	d.validateACL(c)
	d.validateExport(c)
}

func (d *decoder) validateExport(c *Config) {
	e := &c.Export
	if !e.Enabled {
		return
	}
	if c.Netlink.Routes && e.Table == c.Netlink.Table && !d.bad["export.table"] {
		key := "export.table"
		if !d.lines.has(key) {
			key = "export"
		}
		d.errorf(key, "give [export] a table of its own, e.g. 200", "table %d is the one [netlink] mirrors: ovfwd would route by its own exports", e.Table)
	}
	if !c.VPN.Enabled {
		key := "export.enabled"
		if !d.lines.has(key) {
			key = "export"
		}
		d.errorf(key, "set enabled = true in [vpn], or leave [export] off", "nothing to export: the appliance owns routes only as a VPN server (pools, iroutes)")
	}
}

func portKey(i int, k string) string { return joinPath(indexPath("port", i), k) }

func (d *decoder) validatePorts(c *Config) {
	if len(c.Ports) == 0 && !d.bad["port"] {
		d.errorf("", `add a [[port]] section with a name and an ifname or pci address`, "no ports: ovfwd needs at least one [[port]]")
	}
	names := map[string]int{}
	owner := map[netip.Addr]int{} // address → port index
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Name == "" {
			if !d.bad[portKey(i, "name")] {
				d.errorf(indexPath("port", i), `add name = "lan0", any short unique name`, "port without a name")
			}
		} else if j, dup := names[p.Name]; dup {
			d.errorf(portKey(i, "name"), "give each port its own name", "port name %q is already used by port[%d] (line %d)", p.Name, j, d.lines.lookup(portKey(j, "name")))
		} else {
			names[p.Name] = i
		}
		switch driverKnown := !d.bad[portKey(i, "driver")]; {
		case !driverKnown:
		case p.Driver == DriverVFIO:
			if p.PCI == "" && !d.bad[portKey(i, "pci")] {
				d.errorf(portKey(i, "driver"), `add pci = "0000:03:00.0" as lspci -D shows it, or use driver "afxdp" with ifname`, "driver vfio needs the port's pci address")
			}
		case p.Driver == DriverAFXDP || p.Driver == DriverAFXDPCopy:
			if p.IfName == "" && !d.bad[portKey(i, "ifname")] {
				d.errorf(portKey(i, "driver"), `add ifname = "eth1" as ip link shows it`, "driver %s needs the port's ifname", p.Driver)
			}
		case p.Driver == DriverAuto:
			if p.PCI == "" && p.IfName == "" && !d.bad[portKey(i, "pci")] && !d.bad[portKey(i, "ifname")] {
				d.errorf(portKey(i, "driver"), `add pci = "0000:03:00.0" or ifname = "eth1"`, "driver auto needs a pci address or an ifname to find the device")
			}
		}
		if p.Driver == DriverAFXDPCopy && p.AFXDP.ZeroCopy == On {
			d.errorf(portKey(i, "afxdp.zerocopy"), `use driver "afxdp", or zerocopy = "off"`, "zerocopy = \"on\" contradicts driver afxdp-copy")
		}
		if (p.Driver == DriverAFXDP || p.Driver == DriverAFXDPCopy) && d.lines.has(portKey(i, "mlx5")) {
			d.errorf(portKey(i, "mlx5"), "remove [port.mlx5], or use driver vfio, mlx5-sim or auto", "[port.mlx5] has no effect with driver %s", p.Driver)
		}
		if (p.Driver == DriverVFIO || p.Driver == DriverMLX5Sim) && d.lines.has(portKey(i, "afxdp")) {
			d.errorf(portKey(i, "afxdp"), "remove [port.afxdp], or use driver afxdp, afxdp-copy or auto", "[port.afxdp] has no effect with driver %s", p.Driver)
		}
		for _, a := range p.Addresses {
			if a.Addr().Is6() && p.MTU < 1280 {
				d.errorf(portKey(i, "mtu"), "use an MTU of at least 1280 on a port with IPv6 addresses", "MTU %d is below the IPv6 minimum", p.MTU)
				break
			}
		}
		for k, a := range p.Addresses {
			key := indexPath(portKey(i, "addresses"), k)
			if j, dup := owner[a.Addr()]; dup {
				d.errorf(key, "give each address to one port only", "address %v is already on port[%d]", a.Addr(), j)
				continue
			}
			owner[a.Addr()] = i
			// Subnets of different ports must not overlap: a connected
			// route would be ambiguous.
		overlap:
			for j := 0; j < i; j++ {
				for _, b := range c.Ports[j].Addresses {
					if a.Overlaps(b) {
						d.errorf(key, "give each port its own subnet", "subnet %v overlaps %v of port %q", a.Masked(), b.Masked(), c.Ports[j].Name)
						break overlap
					}
				}
			}
		}
	}
}

func (d *decoder) validateRoutes(c *Config) {
	if len(c.Routes) > 0 && c.Appliance.Mode == ModeBridge {
		d.errorf("route", `remove the [[route]] sections, or set mode = "router" in [appliance]`, "static routes need router mode")
	}
	type dest struct {
		p      netip.Prefix
		metric int
	}
	seen := map[dest]int{}
	for i := range c.Routes {
		r := &c.Routes[i]
		rk := func(k string) string { return joinPath(indexPath("route", i), k) }
		if r.Prefix.IsValid() {
			if j, dup := seen[dest{r.Prefix, r.Metric}]; dup {
				d.errorf(rk("prefix"), "remove one, or give them different metrics", "route to %v with metric %d duplicates route[%d]", r.Prefix, r.Metric, j)
			}
			seen[dest{r.Prefix, r.Metric}] = i
		}
		var port *Port
		if r.Port != "" {
			if port = c.port(r.Port); port == nil {
				d.errorf(rk("port"), "use the name of a [[port]]"+suggestPort(c, r.Port), "no port named %q", r.Port)
				continue
			}
		}
		if !r.Via.IsValid() {
			if port == nil && !d.bad[rk("via")] && !d.bad[rk("port")] {
				d.errorf(indexPath("route", i), `add a next hop, via = "198.18.0.254", or port = "lan0" for a directly connected route`, "route needs via or port")
			}
			continue
		}
		if r.Prefix.IsValid() && r.Prefix.Addr().Is4() != r.Via.Is4() {
			d.errorf(rk("via"), "use a next hop of the prefix's address family", "next hop %v and prefix %v are of different families", r.Via, r.Prefix)
			continue
		}
		if c.ownsAddr(r.Via) {
			d.errorf(rk("via"), "use the neighbouring router's address", "next hop %v is one of ovfwd's own addresses", r.Via)
			continue
		}
		if r.Via.Is6() && r.Via.IsLinkLocalUnicast() {
			if port == nil {
				d.errorf(rk("via"), `add port = "…": a link-local next hop names no port by itself`, "link-local next hop %v needs a port", r.Via)
			}
			continue
		}
		if port != nil {
			if !reaches(port, r.Via) {
				d.errorf(rk("via"), fmt.Sprintf("use an address inside a subnet of port %q, or add that subnet to its addresses", port.Name),
					"next hop %v is not in any subnet of port %q", r.Via, port.Name)
			}
			continue
		}
		for j := range c.Ports {
			if reaches(&c.Ports[j], r.Via) {
				r.Port = c.Ports[j].Name
				break
			}
		}
		if r.Port == "" {
			d.errorf(rk("via"), "use a next hop inside one of the ports' subnets, or name the port", "no port reaches next hop %v", r.Via)
		}
	}
}

func (c *Config) port(name string) *Port {
	for i := range c.Ports {
		if c.Ports[i].Name == name {
			return &c.Ports[i]
		}
	}
	return nil
}

func suggestPort(c *Config, name string) string {
	var names []string
	for _, p := range c.Ports {
		names = append(names, p.Name)
	}
	if s := nearest(name, names); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

func (c *Config) ownsAddr(a netip.Addr) bool {
	for _, p := range c.Ports {
		for _, pa := range p.Addresses {
			if pa.Addr() == a {
				return true
			}
		}
	}
	return false
}

func reaches(p *Port, a netip.Addr) bool {
	for _, pa := range p.Addresses {
		if pa.Contains(a) {
			return true
		}
	}
	return false
}

func (d *decoder) validateVPN(c *Config) {
	v := &c.VPN
	enabledKey := "vpn.enabled"
	// Address plans: pools and uplink routes must not overlap each other or
	// a port's subnet, or return traffic would have two owners.
	type plan struct {
		key  string
		p    netip.Prefix
		what string
	}
	var plans []plan
	for i, p := range c.Ports {
		for k, a := range p.Addresses {
			plans = append(plans, plan{indexPath(portKey(i, "addresses"), k), a.Masked(), fmt.Sprintf("the subnet of port %q", p.Name)})
		}
	}
	check := func(key string, p netip.Prefix, what string) {
		for _, q := range plans {
			if p.Overlaps(q.p) {
				d.errorf(key, "choose a prefix that no port subnet, pool or uplink route uses", "%s %v overlaps %s %v (line %d)", what, p, q.what, q.p, d.lines.lookup(q.key))
				return
			}
		}
		plans = append(plans, plan{key, p, what})
	}
	if v.PoolV4.IsValid() {
		check("vpn.pool_v4", v.PoolV4, "pool_v4")
	}
	if v.PoolV6.IsValid() {
		check("vpn.pool_v6", v.PoolV6, "pool_v6")
	}
	names := map[string]int{}
	for i, cl := range v.Clients {
		ck := func(k string) string { return joinPath(indexPath("vpn.client", i), k) }
		if cl.Name == "" {
			if !d.bad[ck("name")] {
				d.errorf(indexPath("vpn.client", i), `add name = "site-b"`, "uplink without a name")
			}
		} else if j, dup := names[cl.Name]; dup {
			d.errorf(ck("name"), "give each uplink its own name", "uplink name %q is already used by vpn.client[%d]", cl.Name, j)
		} else {
			names[cl.Name] = i
		}
		if cl.Remote == "" && !d.bad[ck("remote")] {
			d.errorf(indexPath("vpn.client", i), `add remote = "vpn.example.net:1194"`, "uplink without a remote")
		}
		for _, f := range []struct{ k, v string }{{"ca", cl.CA}, {"cert", cl.Cert}, {"key", cl.Key}, {"tls_crypt", cl.TLSCrypt}} {
			if f.v == "" && !d.bad[ck(f.k)] {
				d.errorf(indexPath("vpn.client", i), fmt.Sprintf(`add %s = "path/to/file"`, f.k), "uplink needs %s", f.k)
			}
		}
		for k, r := range cl.Routes {
			check(indexPath(ck("routes"), k), r, fmt.Sprintf("route of uplink %q", cl.Name))
		}
	}
	cns := map[string]int{}
	for i, ir := range v.IRoutes {
		ik := func(k string) string { return joinPath(indexPath("vpn.iroute", i), k) }
		switch j, dup := cns[ir.CommonName]; {
		case ir.CommonName == "":
			if !d.bad[ik("common_name")] {
				d.errorf(indexPath("vpn.iroute", i), `add common_name = "site-a" (the client certificate's CN)`, "iroute without a common_name")
			}
		case dup:
			d.errorf(ik("common_name"), "put all of one client's networks in one [[vpn.iroute]]", "common_name %q already has vpn.iroute[%d]", ir.CommonName, j)
		default:
			cns[ir.CommonName] = i
		}
		if len(ir.Routes) == 0 && !d.bad[ik("routes")] {
			d.errorf(indexPath("vpn.iroute", i), `add routes = ["198.18.70.0/24"]`, "iroute without routes")
		}
		for k, r := range ir.Routes {
			check(indexPath(ik("routes"), k), r, fmt.Sprintf("iroute of %q", ir.CommonName))
		}
	}
	if len(v.IRoutes) > 0 && !v.Enabled {
		d.errorf("vpn.iroute", "set enabled = true in [vpn], or remove the [[vpn.iroute]] sections", "iroutes need the VPN server")
	}
	d.validateCCD(v, cns, check)

	if !v.Enabled {
		return
	}
	if !d.lines.has(enabledKey) {
		enabledKey = "vpn"
	}
	if !v.PoolV4.IsValid() && !v.PoolV6.IsValid() && !d.bad["vpn.pool_v4"] && !d.bad["vpn.pool_v6"] {
		d.errorf(enabledKey, `add pool_v4 = "198.19.0.0/24" and/or pool_v6 = "2001:db8:1::/112"`, "VPN enabled with no address pool")
	}
	for _, f := range []struct{ k, v string }{{"ca", v.CA}, {"cert", v.Cert}, {"key", v.Key}} {
		if f.v == "" && !d.bad["vpn."+f.k] {
			d.errorf(enabledKey, fmt.Sprintf(`add %s = "path" in [vpn]; ovfwd pki init writes one`, f.k), "VPN enabled without %s", f.k)
		}
	}
	switch {
	case v.TLSCrypt != "" && v.TLSAuth != "":
		d.errorf("vpn.tls_auth", "keep only tls_crypt (recommended) or only tls_auth", "tls_crypt and tls_auth are both set")
	case v.TLSCryptV2 != "" && (v.TLSCrypt != "" || v.TLSAuth != ""):
		d.errorf("vpn.tls_crypt_v2", "keep only tls_crypt_v2, or remove it and keep tls_crypt or tls_auth (a server speaks one wrapping)", "tls_crypt_v2 is set beside tls_crypt or tls_auth")
	case v.TLSCrypt == "" && v.TLSAuth == "" && v.TLSCryptV2 == "" && !d.bad["vpn.tls_crypt"] && !d.bad["vpn.tls_auth"] && !d.bad["vpn.tls_crypt_v2"]:
		d.errorf(enabledKey, `add tls_crypt = "tls-crypt.key"; ovfwd pki init writes one`, "VPN enabled without tls_crypt or tls_auth")
	}
	if c.Appliance.Mode == ModeBridge {
		d.errorf(enabledKey, `set mode = "router" in [appliance]: VPN peers are routed`, "the VPN server needs router mode")
	}
}

// validateCCD checks [[vpn.ccd]]: one per common name, fixed addresses
// inside the pools and used once, iroutes in one place per client.
func (d *decoder) validateCCD(v *VPN, irouteCNs map[string]int, check func(string, netip.Prefix, string)) {
	cns := map[string]int{}
	addrs := map[netip.Addr]int{}
	for i, c := range v.CCD {
		ck := func(k string) string { return joinPath(indexPath("vpn.ccd", i), k) }
		switch j, dup := cns[c.CommonName]; {
		case c.CommonName == "":
			if !d.bad[ck("common_name")] {
				d.errorf(indexPath("vpn.ccd", i), `add common_name = "alice" (the client certificate's CN)`, "ccd without a common_name")
			}
		case dup:
			d.errorf(ck("common_name"), "put all of one client's settings in one [[vpn.ccd]]", "common_name %q already has vpn.ccd[%d]", c.CommonName, j)
		default:
			cns[c.CommonName] = i
		}
		if j, both := irouteCNs[c.CommonName]; both && len(c.IRoutes) > 0 {
			d.errorf(ck("iroutes"), fmt.Sprintf("move the routes of vpn.iroute[%d] here and remove it", j), "common_name %q also has vpn.iroute[%d]", c.CommonName, j)
		}
		for _, f := range []struct {
			k    string
			a    netip.Addr
			pool netip.Prefix
		}{{"ipv4", c.IPv4, v.PoolV4}, {"ipv6", c.IPv6, v.PoolV6}} {
			if !f.a.IsValid() {
				continue
			}
			first := f.pool.Masked().Addr().Next()
			switch {
			case !f.pool.IsValid():
				d.errorf(ck(f.k), fmt.Sprintf("set pool_%s in [vpn] to the tunnel subnet, or remove %s", f.k[2:], f.k), "fixed address %v without a pool", f.a)
			case !f.pool.Contains(f.a):
				d.errorf(ck(f.k), fmt.Sprintf("choose an address inside pool_%s %v: clients share the pool's subnet with the server", f.k[2:], f.pool), "fixed address %v is outside the pool", f.a)
			case f.a == f.pool.Masked().Addr() || f.a == first:
				d.errorf(ck(f.k), fmt.Sprintf("choose a host address other than the network and the server's own %v", first), "fixed address %v is not a client address", f.a)
			default:
				if j, dup := addrs[f.a]; dup {
					d.errorf(ck(f.k), "give each client its own address", "address %v is already fixed for vpn.ccd[%d]", f.a, j)
				}
				addrs[f.a] = i
			}
		}
		for k, r := range c.IRoutes {
			check(indexPath(ck("iroutes"), k), r, fmt.Sprintf("iroute of %q", c.CommonName))
		}
	}
	if len(v.CCD) > 0 && !v.Enabled {
		d.errorf("vpn.ccd", "set enabled = true in [vpn], or remove the [[vpn.ccd]] sections", "per-client settings need the VPN server")
	}
}

// has reports whether path is written in the file.
func (ix lineIndex) has(path string) bool {
	_, ok := ix[path]
	return ok
}

// resolvePaths makes the VPN file paths absolute or relative to the
// directory of the config file, as written in it.
func resolvePaths(c *Config, dir string) {
	for _, p := range append(c.vpnFiles(), vpnFile{"vpn.pool_persist", &c.VPN.PoolPersist}) {
		if *p.path != "" && !filepath.IsAbs(*p.path) {
			*p.path = filepath.Join(dir, *p.path)
		}
	}
}

type vpnFile struct {
	key  string
	path *string
}

// vpnFiles are the key files the VPN needs: the server's when it is enabled,
// and every uplink's.
func (c *Config) vpnFiles() []vpnFile {
	var fs []vpnFile
	v := &c.VPN
	if v.Enabled {
		fs = append(fs, vpnFile{"vpn.ca", &v.CA}, vpnFile{"vpn.cert", &v.Cert}, vpnFile{"vpn.key", &v.Key},
			vpnFile{"vpn.tls_crypt", &v.TLSCrypt}, vpnFile{"vpn.tls_auth", &v.TLSAuth}, vpnFile{"vpn.crl", &v.CRL},
			vpnFile{"vpn.tls_crypt_v2", &v.TLSCryptV2})
	}
	for i := range v.Clients {
		cl := &v.Clients[i]
		k := indexPath("vpn.client", i)
		fs = append(fs, vpnFile{k + ".ca", &cl.CA}, vpnFile{k + ".cert", &cl.Cert}, vpnFile{k + ".key", &cl.Key}, vpnFile{k + ".tls_crypt", &cl.TLSCrypt})
	}
	return fs
}
