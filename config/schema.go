package config

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// decodeRoot decodes the whole document into c, which holds the defaults.
func (d *decoder) decodeRoot(root *table, c *Config) {
	d.appliance(root.sub("appliance"), &c.Appliance)
	for _, t := range root.list("port") {
		p := defaultPort()
		d.port(t, &p)
		c.Ports = append(c.Ports, p)
	}
	for _, t := range root.list("route") {
		var r Route
		d.route(t, &r)
		c.Routes = append(c.Routes, r)
	}
	d.vpn(root.sub("vpn"), &c.VPN)
	d.netlink(root.sub("netlink"), &c.Netlink)
	d.export(root.sub("export"), &c.Export)
	d.metrics(root.sub("metrics"), &c.Metrics)
	d.status(root.sub("status"), &c.Status)
	d.management(root.sub("management"), &c.Management)
	d.log(root.sub("log"), &c.Log)
	for _, t := range root.list("nat") {
		var n NAT
		d.nat(t, &n)
		c.NAT = append(c.NAT, n)
	}
	d.natOptions(root.sub("nat_options"), &c.NATOptions)
	for _, t := range root.list("acl") {
		var a ACL
		d.acl(t, &a)
		c.ACL = append(c.ACL, a)
	}
	for _, t := range root.list("acl_group") {
		var g ACLGroup
		d.aclGroup(t, &g)
		c.ACLGroups = append(c.ACLGroups, g)
	}
	root.done()
}

func (d *decoder) appliance(t *table, a *Appliance) {
	t.enum("mode", &a.Mode, ModeRouter, ModeBridge)
	d.cpuList(t, "workers", &a.Workers)
	t.enum("poll", &a.Poll, PollAdaptive, PollBusy)
	t.integer("batch", &a.Batch, 32, 256)
	if t.integer("mss_clamp", &a.MSSClamp, 0, 9000) && a.MSSClamp != 0 && a.MSSClamp < 536 {
		d.errorf(t.key("mss_clamp"), "use 0 (off) or a value from 536 to 9000; 1360 suits VPN tunnels", "MSS %d is below the IPv4 minimum of 536", a.MSSClamp)
	}
	t.integer("icmp_rate", &a.ICMPRate, 0, 1_000_000)
	t.duration("neighbour_reachable", &a.NeighbourReachable, time.Second, time.Hour)
	t.duration("neighbour_timeout", &a.NeighbourTimeout, 100*time.Millisecond, time.Minute)
	t.integer("neighbour_hold", &a.NeighbourHold, 0, 64)
	t.integer("neighbour_table", &a.NeighbourTable, 64, 1<<20)
	t.integer("glean_source_rate", &a.GleanSourceRate, 1, 1_000_000)
	t.integer("glean_source_burst", &a.GleanSourceBurst, 1, 1_000_000)
	t.integer("glean_port_rate", &a.GleanPortRate, 1, 1_000_000)
	t.integer("glean_port_burst", &a.GleanPortBurst, 1, 1_000_000)
	t.duration("bridge_aging", &a.BridgeAging, time.Second, 24*time.Hour)
	t.enum("fast_path", &a.FastPath, FastPathAuto, FastPathXDP, FastPathOff)
	t.done()
}

// maxCPU bounds CPU numbers in worker lists (Linux's default NR_CPUS range).
const maxCPU = 8191

// cpuList decodes a CPU list written as an array ([1, 2]) or as a Linux
// cpulist string ("1-3,6").
func (d *decoder) cpuList(t *table, k string, dst *[]int) {
	v, ok := t.get(k)
	if !ok {
		return
	}
	key := t.key(k)
	var cpus []int
	switch v := v.(type) {
	case []any:
		for i, e := range v {
			var n int
			if !t.intValue(indexPath(key, i), e, &n, 0, maxCPU) {
				return
			}
			cpus = append(cpus, n)
		}
	case string:
		var err error
		if cpus, err = parseCPUList(v); err != nil {
			d.errorf(key, `write CPU numbers and ranges, e.g. "1-3,6" or [1, 2, 3]`, "bad CPU list %q: %v", v, err)
			return
		}
	default:
		t.wrongType(key, v, "a CPU list", `workers = [1, 2] or workers = "1-3"`)
		return
	}
	seen := map[int]bool{}
	for _, c := range cpus {
		if seen[c] {
			d.errorf(key, "list each CPU once", "CPU %d is listed twice", c)
			return
		}
		seen[c] = true
	}
	*dst = cpus
}

func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a > maxCPU {
			return nil, fmt.Errorf("%q is not a CPU number", lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b > maxCPU {
				return nil, fmt.Errorf("%q is not a range", part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

var (
	portNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$`)
	// pciRE is a PCI function address, domain optional: [DDDD:]BB:DD.F.
	pciRE = regexp.MustCompile(`^(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$`)
)

func (d *decoder) port(t *table, p *Port) {
	if t.str("name", &p.Name) && !portNameRE.MatchString(p.Name) {
		d.errorf(t.key("name"), "use 1 to 15 letters, digits, '_', '.' or '-', starting with a letter or digit", "bad port name %q", p.Name)
	}
	t.enum("driver", &p.Driver, DriverAuto, DriverVFIO, DriverAFXDP, DriverAFXDPCopy, DriverMLX5Sim)
	var pci string
	if t.str("pci", &pci) {
		if pciRE.MatchString(pci) {
			p.PCI = canonicalPCI(pci)
		} else {
			d.errorf(t.key("pci"), `write the PCI function as in lspci -D, e.g. "0000:03:00.0"`, "bad PCI address %q", pci)
		}
	}
	if t.str("ifname", &p.IfName) && !validIfName(p.IfName) {
		d.errorf(t.key("ifname"), "use the interface name shown by ip link (1 to 15 characters, no '/' or spaces)", "bad interface name %q", p.IfName)
		p.IfName = ""
	}
	t.integer("queues", &p.Queues, 0, 256)
	t.integer("mtu", &p.MTU, 68, 9216)
	t.prefixes("addresses", &p.Addresses, true)
	if vs, ok := t.array("vlans", "vlans = [10, 20]"); ok {
		seen := map[int]bool{}
		for i, e := range vs {
			var v int
			key := indexPath(t.key("vlans"), i)
			if !t.intValue(key, e, &v, 1, 4094) {
				continue
			}
			if seen[v] {
				d.errorf(key, "list each VLAN once", "VLAN %d is listed twice", v)
				continue
			}
			seen[v] = true
			p.VLANs = append(p.VLANs, v)
		}
	}
	var mac string
	if t.str("mac", &mac) {
		hw, err := net.ParseMAC(mac)
		switch {
		case err != nil || len(hw) != 6:
			d.errorf(t.key("mac"), `write six hex bytes, e.g. "02:00:00:00:00:01"`, "bad MAC address %q", mac)
		case hw[0]&1 != 0 || isZero(hw):
			d.errorf(t.key("mac"), "use a unicast address (first byte even), e.g. 02:…", "MAC %q is not a unicast address", mac)
		default:
			p.MAC = hw
		}
	}
	d.afxdp(t.sub("afxdp"), &p.AFXDP)
	d.mlx5(t.sub("mlx5"), &p.MLX5)
	t.done()
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func canonicalPCI(s string) string {
	m := pciRE.FindStringSubmatch(s)
	domain := m[1]
	if domain == "" {
		domain = "0000"
	}
	return strings.ToLower(domain + ":" + m[2] + ":" + m[3] + "." + m[4])
}

func validIfName(s string) bool {
	return s != "" && len(s) <= 15 && s != "." && s != ".." && !strings.ContainsAny(s, "/: \t\n\x00")
}

// ringSize decodes a power-of-two ring size in [lo, hi].
func (t *table) powerOfTwo(k string, dst *int, lo, hi int) bool {
	var n int
	if !t.integer(k, &n, lo, hi) {
		return false
	}
	if n&(n-1) != 0 {
		t.d.errorf(t.key(k), fmt.Sprintf("use a power of two from %d to %d, e.g. %d", lo, hi, ceilPow2(n)), "%d is not a power of two", n)
		return false
	}
	*dst = n
	return true
}

func ceilPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

func (d *decoder) afxdp(t *table, a *AFXDP) {
	if t.integer("frame_size", &a.FrameSize, 2048, 4096) && a.FrameSize != 2048 && a.FrameSize != 4096 {
		d.errorf(t.key("frame_size"), "use 2048 or 4096", "frame size %d is not supported by AF_XDP", a.FrameSize)
		a.FrameSize = 4096
	}
	t.powerOfTwo("frames", &a.Frames, 64, 1<<20)
	t.powerOfTwo("rx_ring_size", &a.RxRing, 64, 16384)
	t.powerOfTwo("tx_ring_size", &a.TxRing, 64, 16384)
	t.powerOfTwo("fill_ring_size", &a.FillRing, 64, 16384)
	t.powerOfTwo("completion_ring_size", &a.CompRing, 64, 16384)
	t.enum("zerocopy", &a.ZeroCopy, Auto, On, Off)
	t.enum("xdp_mode", &a.XDPMode, Auto, XDPNative, XDPGeneric)
	t.done()
}

func (d *decoder) mlx5(t *table, m *MLX5) {
	t.integer("rq_log_size", &m.RQLogSize, 2, 13)
	d.autoInt(t, "strides_per_wqe", &m.StridesPerWQE, 8, 65536, true)
	d.autoInt(t, "log_stride_size", &m.LogStrideSize, 6, 13, false)
	t.integer("sq_log_size", &m.SQLogSize, 6, 15)
	t.powerOfTwo("tx_fragment_size", &m.TxFragmentSize, 64, 1<<21)
	t.integer("prefetch_distance", &m.PrefetchDistance, 0, 32)
	t.enum("cqe_compression", &m.CQECompression, Auto, Off, CQECompressionBasic, CQECompressionEnhanced)
	t.enum("tx_edge_policy", &m.TxEdgePolicy, TxEdgeReuse, TxEdgeNOP)
	if sq := 64 << m.SQLogSize; m.TxFragmentSize > sq {
		d.errorf(t.key("tx_fragment_size"), fmt.Sprintf("use at most the SQ size, %d bytes (sq_log_size %d × 64-byte WQEBBs), or raise sq_log_size", sq, m.SQLogSize),
			"fragment of %d bytes is larger than the SQ", m.TxFragmentSize)
	}
	t.done()
}

// autoInt decodes "auto" (stored as 0) or an integer in [lo, hi], a power of
// two when pow2.
func (d *decoder) autoInt(t *table, k string, dst *int, lo, hi int, pow2 bool) {
	v, ok := t.m[k]
	if s, isStr := v.(string); ok && isStr {
		t.known = append(t.known, k)
		if s != Auto {
			d.errorf(t.key(k), fmt.Sprintf(`use "auto" or a number from %d to %d`, lo, hi), "bad value %q", s)
			return
		}
		*dst = 0
		return
	}
	if pow2 {
		t.powerOfTwo(k, dst, lo, hi)
	} else {
		t.integer(k, dst, lo, hi)
	}
}

func (d *decoder) route(t *table, r *Route) {
	if !t.prefix("prefix", &r.Prefix) {
		if _, ok := t.m["prefix"]; !ok {
			d.errorf(t.path, `add prefix = "198.18.0.0/24"`, "route without a prefix")
		}
	}
	t.addr("via", &r.Via)
	t.str("port", &r.Port)
	t.integer("metric", &r.Metric, 0, 65535)
	t.done()
}

func (d *decoder) vpn(t *table, v *VPN) {
	t.boolean("enabled", &v.Enabled)
	if t.addrs("listen", &v.Listen) {
		seen := map[netip.Addr]bool{}
		for i, a := range v.Listen {
			if seen[a] {
				d.errorf(indexPath(t.key("listen"), i), "list each address once", "address %v is listed twice", a)
			}
			seen[a] = true
		}
	}
	t.integer("port", &v.Port, 1, 65535)
	t.str("ca", &v.CA)
	t.str("cert", &v.Cert)
	t.str("key", &v.Key)
	t.str("tls_crypt", &v.TLSCrypt)
	t.str("tls_auth", &v.TLSAuth)
	t.str("tls_crypt_v2", &v.TLSCryptV2)
	if t.enum("tls_auth_digest", &v.TLSAuthDigest, "SHA1", "SHA256", "SHA512") {
		if _, ok := t.m["tls_auth"]; !ok {
			d.errorf(t.key("tls_auth_digest"), "remove tls_auth_digest, or set tls_auth", "tls_auth_digest applies only to tls_auth")
		}
	}
	if t.integer("key_direction", &v.KeyDirection, 0, 1) {
		if _, ok := t.m["tls_auth"]; !ok {
			d.errorf(t.key("key_direction"), "remove key_direction, or set tls_auth", "key_direction applies only to tls_auth")
		}
	}
	if t.prefix("pool_v4", &v.PoolV4) {
		switch {
		case !v.PoolV4.Addr().Is4():
			d.errorf(t.key("pool_v4"), "put IPv6 pools in pool_v6", "%v is not an IPv4 prefix", v.PoolV4)
			v.PoolV4 = netip.Prefix{}
		case v.PoolV4.Bits() > 29:
			d.errorf(t.key("pool_v4"), "use a /29 or larger, e.g. a /24", "pool %v is too small", v.PoolV4)
		}
	}
	if t.prefix("pool_v6", &v.PoolV6) {
		switch {
		case !v.PoolV6.Addr().Is6():
			d.errorf(t.key("pool_v6"), "put IPv4 pools in pool_v4", "%v is not an IPv6 prefix", v.PoolV6)
			v.PoolV6 = netip.Prefix{}
		case v.PoolV6.Bits() > 124:
			d.errorf(t.key("pool_v6"), "use a /124 or larger, e.g. a /112", "pool %v is too small", v.PoolV6)
		}
	}
	t.prefixes("push_routes", &v.PushRoutes, false)
	var ciphers []string
	if t.strings("ciphers", &ciphers, `ciphers = ["AES-256-GCM", "AES-128-GCM", "CHACHA20-POLY1305"]`) {
		d.ciphers(t.key("ciphers"), ciphers, &v.Ciphers)
	}
	t.duration("keepalive_interval", &v.KeepaliveInterval, time.Second, time.Hour)
	t.duration("keepalive_timeout", &v.KeepaliveTimeout, 2*time.Second, 2*time.Hour)
	if v.KeepaliveTimeout < 2*v.KeepaliveInterval {
		key := t.key("keepalive_timeout")
		if _, ok := t.m["keepalive_timeout"]; !ok {
			key = t.key("keepalive_interval")
		}
		d.errorf(key, fmt.Sprintf("make keepalive_timeout at least twice keepalive_interval, %v", 2*v.KeepaliveInterval),
			"keepalive_timeout %v is too short for keepalive_interval %v", v.KeepaliveTimeout, v.KeepaliveInterval)
	}
	t.integer("reneg_sec", &v.RenegSec, 0, 7*24*3600)
	t.integer("max_peers", &v.MaxPeers, 1, 1<<20)
	t.integer("max_half_open", &v.MaxHalfOpen, 1, 65536)
	t.integer("max_half_open_per_source", &v.MaxHalfOpenPerSource, 1, 65536)
	t.duration("handshake_timeout", &v.HandshakeTimeout, time.Second, 60*time.Second)
	t.integer("handshake_rate", &v.HandshakeRate, 1, 100_000)
	t.powerOfTwo("replay_window", &v.ReplayWindow, 64, 65536)
	t.integer("tun_mtu", &v.TunMTU, 576, 9000)
	t.boolean("compress_stub", &v.CompressStub)
	t.boolean("client_to_client", &v.ClientToClient)
	t.boolean("duplicate_cn", &v.DuplicateCN)
	t.str("crl", &v.CRL)
	t.str("pool_persist", &v.PoolPersist)
	var rg []string
	if t.strings("redirect_gateway", &rg, `redirect_gateway = ["ipv4", "ipv6"]`) {
		for i, f := range rg {
			k := indexPath(t.key("redirect_gateway"), i)
			switch {
			case f != "ipv4" && f != "ipv6":
				d.errorf(k, `use "ipv4" and/or "ipv6"`, "unknown family %q", f)
			case contains(v.RedirectGateway, f):
				d.errorf(k, "list each family once", "%q is listed twice", f)
			default:
				v.RedirectGateway = append(v.RedirectGateway, f)
			}
		}
	}
	if t.strings("auth_user_pass_verify", &v.AuthUserPassVerify, `auth_user_pass_verify = ["/usr/local/bin/check-login"]`) {
		switch {
		case len(v.AuthUserPassVerify) == 0:
			d.errorf(t.key("auth_user_pass_verify"), `name the program, e.g. ["/usr/local/bin/check-login"], or remove the key`, "empty command")
		case !strings.HasPrefix(v.AuthUserPassVerify[0], "/"):
			d.errorf(indexPath(t.key("auth_user_pass_verify"), 0), "use the program's absolute path (it runs with a minimal PATH)", "%q is not an absolute path", v.AuthUserPassVerify[0])
		}
	}
	t.duration("auth_timeout", &v.AuthTimeout, 100*time.Millisecond, 10*time.Minute)
	t.integer("auth_concurrency", &v.AuthConcurrency, 1, 4096)
	d.vpnHooks(t, &v.Hooks)
	t.integer("auth_fail_limit", &v.AuthFailLimit, 0, 1_000_000)
	t.duration("auth_fail_window", &v.AuthFailWindow, time.Second, 24*time.Hour)
	t.boolean("username_as_common_name", &v.UsernameAsCommonName)
	t.enum("verify_client_cert", &v.VerifyClientCert, VerifyRequire, VerifyOptional, VerifyNone)
	if len(v.AuthUserPassVerify) == 0 && !t.d.bad[t.key("auth_user_pass_verify")] {
		if v.VerifyClientCert != VerifyRequire {
			d.errorf(t.key("verify_client_cert"), `set auth_user_pass_verify too, or verify_client_cert = "require"`, "clients without certificates need a username/password check")
		}
		if v.UsernameAsCommonName {
			d.errorf(t.key("username_as_common_name"), "set auth_user_pass_verify too, or remove the key", "username_as_common_name needs a username/password check")
		}
	}
	t.addrs("dns", &v.DNS)
	if t.str("dns_domain", &v.DNSDomain) && !dnsNameRE.MatchString(v.DNSDomain) {
		d.errorf(t.key("dns_domain"), `write a DNS name, e.g. "corp.example"`, "bad domain %q", v.DNSDomain)
	}
	for _, ct := range t.list("client") {
		c := VPNClient{MTU: DefaultUplinkMTU}
		d.vpnClient(ct, &c)
		v.Clients = append(v.Clients, c)
	}
	for _, it := range t.list("iroute") {
		var r VPNIRoute
		d.vpnIRoute(it, &r)
		v.IRoutes = append(v.IRoutes, r)
	}
	for _, ct := range t.list("ccd") {
		var c VPNCCD
		d.vpnCCD(ct, &c)
		v.CCD = append(v.CCD, c)
	}
	t.done()
}

// dnsNameRE is a DNS name: dot-separated labels of letters, digits and '-'.
var dnsNameRE = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?$`)

func (d *decoder) vpnCCD(t *table, c *VPNCCD) {
	t.str("common_name", &c.CommonName)
	if t.addr("ipv4", &c.IPv4) && !c.IPv4.Is4() {
		d.errorf(t.key("ipv4"), "put an IPv6 address in ipv6", "%v is not an IPv4 address", c.IPv4)
		c.IPv4 = netip.Addr{}
	}
	if t.addr("ipv6", &c.IPv6) && !c.IPv6.Is6() {
		d.errorf(t.key("ipv6"), "put an IPv4 address in ipv4", "%v is not an IPv6 address", c.IPv6)
		c.IPv6 = netip.Addr{}
	}
	t.prefixes("push_routes", &c.PushRoutes, false)
	t.prefixes("iroutes", &c.IRoutes, false)
	t.boolean("disable", &c.Disable)
	t.str("group", &c.Group)
	t.done()
}

func (d *decoder) ciphers(key string, names []string, dst *[]string) {
	all := []string{CipherAES256GCM, CipherAES128GCM, CipherChaCha20Poly1305}
	if len(names) == 0 {
		d.errorf(key, "list at least one of "+strings.Join(all, ", "), "no ciphers")
		return
	}
	var out []string
	for i, n := range names {
		k := indexPath(key, i)
		canon := strings.ToUpper(n)
		switch {
		case !contains(all, canon):
			d.errorf(k, "use "+strings.Join(all, ", ")+" (AEAD ciphers only)", "unsupported cipher %q", n)
		case contains(out, canon):
			d.errorf(k, "list each cipher once", "cipher %s is listed twice", canon)
		default:
			out = append(out, canon)
		}
	}
	if len(out) == len(names) {
		*dst = out
	}
}

func (d *decoder) vpnClient(t *table, c *VPNClient) {
	if t.str("name", &c.Name) && !portNameRE.MatchString(c.Name) {
		d.errorf(t.key("name"), "use 1 to 15 letters, digits, '_', '.' or '-'", "bad uplink name %q", c.Name)
	}
	if t.str("remote", &c.Remote) {
		host, port, err := net.SplitHostPort(c.Remote)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			d.errorf(t.key("remote"), `write host:port, e.g. "vpn.example.net:1194" or "[2001:db8::1]:1194"`, "bad remote %q", c.Remote)
		}
	}
	t.str("ca", &c.CA)
	t.str("cert", &c.Cert)
	t.str("key", &c.Key)
	t.str("tls_crypt", &c.TLSCrypt)
	t.prefixes("routes", &c.Routes, false)
	t.integer("mtu", &c.MTU, 1280, 2048)
	t.done()
}

func (d *decoder) vpnIRoute(t *table, r *VPNIRoute) {
	t.str("common_name", &r.CommonName)
	t.prefixes("routes", &r.Routes, false)
	t.done()
}

func (d *decoder) netlink(t *table, n *Netlink) {
	t.boolean("routes", &n.Routes)
	t.integer("table", &n.Table, 1, 1<<31-1)
	t.boolean("neighbours", &n.Neighbours)
	t.done()
}

// Kernel routing table ids a route export must not use
// (include/uapi/linux/rtnetlink.h enum rt_class_t).
const (
	rtTableDefault = 253
	rtTableMain    = 254
	rtTableLocal   = 255
)

func (d *decoder) export(t *table, e *Export) {
	t.boolean("enabled", &e.Enabled)
	if t.str("device", &e.Device) && !validIfName(e.Device) {
		d.errorf(t.key("device"), `use an interface name of 1 to 15 characters, e.g. "ovfwd-export"`, "bad device name %q", e.Device)
	}
	if t.integer("table", &e.Table, 1, 1<<31-1) {
		switch e.Table {
		case rtTableDefault, rtTableMain, rtTableLocal:
			d.errorf(t.key("table"), "use a table of its own, e.g. 200, and let the routing daemon read it (BIRD: kernel table 200; learn)",
				"table %d is one of the kernel's own (253 default, 254 main, 255 local)", e.Table)
		}
	}
	// 0-4 are the kernel's own (RTPROT_UNSPEC, _REDIRECT, _KERNEL, _BOOT,
	// _STATIC): a route of another origin could be taken for ovfwd's
	// and removed as stale at start.
	if t.integer("protocol", &e.Protocol, 5, 255) {
		switch e.Protocol {
		case 12, 186, 187, 188, 189, 192: // /etc/iproute2/rt_protos: bird, bgp, isis, ospf, rip, eigrp
			d.errorf(t.key("protocol"), "use a number no routing daemon uses, e.g. 201",
				"protocol %d belongs to a routing daemon (/etc/iproute2/rt_protos); ovfwd removes routes of its protocol at start", e.Protocol)
		}
	}
	t.integer("metric", &e.Metric, 0, 1<<32-1)
	t.prefixes("routes", &e.Routes, false)
	t.duration("worker_stall", &e.WorkerStall, 100*time.Millisecond, time.Minute)
	t.done()
}

func (d *decoder) metrics(t *table, m *Metrics) {
	var s string
	if t.str("socket", &m.Socket) && m.Socket != "" && !strings.HasPrefix(m.Socket, "/") {
		d.errorf(t.key("socket"), `use an absolute path, e.g. "/run/ovfwd/metrics.sock", or "" for none`, "socket path %q is not absolute", m.Socket)
	}
	if !t.str("listen", &s) {
		t.done()
		return
	}
	if s == "" {
		m.Listen = netip.AddrPort{}
	} else if ap, err := netip.ParseAddrPort(s); err != nil || ap.Port() == 0 {
		d.errorf(t.key("listen"), `write address:port, e.g. "127.0.0.1:9469" or "[::1]:9469", or "" to turn metrics off`, "bad listen address %q", s)
	} else {
		m.Listen = ap
	}
	t.done()
}

func (d *decoder) status(t *table, s *Status) {
	if t.str("socket", &s.Socket) && s.Socket != "" && !strings.HasPrefix(s.Socket, "/") {
		d.errorf(t.key("socket"), `use an absolute path, e.g. "/run/ovfwd/ovfwd.sock", or "" to turn it off`, "socket path %q is not absolute", s.Socket)
	}
	d.statusFile(t, &s.File)
	t.str("read_group", &s.ReadGroup)
	t.str("write_group", &s.WriteGroup)
	t.done()
}

func (d *decoder) log(t *table, l *Log) {
	t.enum("level", &l.Level, "debug", "info", "warn", "error")
	t.enum("format", &l.Format, "text", "json")
	t.done()
}
