package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestDefaults: a minimal file gets the documented defaults, value by value.
func TestDefaults(t *testing.T) {
	c, err := Parse("ovfwd.toml", []byte(`
[[port]]
name = "lan0"
ifname = "veth0"
`))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Appliance
	if a.Mode != "router" || a.Poll != "adaptive" || a.Batch != 64 || a.MSSClamp != 0 || a.ICMPRate != 1000 ||
		a.NeighbourReachable != 30*time.Second || a.NeighbourTimeout != 3*time.Second || a.NeighbourHold != 4 ||
		a.BridgeAging != 300*time.Second || a.Workers != nil {
		t.Errorf("appliance defaults: %+v", a)
	}
	p := c.Ports[0]
	if p.Driver != "auto" || p.MTU != 1500 || p.Queues != 0 || p.Addresses != nil || p.VLANs != nil || p.MAC != nil {
		t.Errorf("port defaults: %+v", p)
	}
	if x := p.AFXDP; x.FrameSize != 4096 || x.Frames != 4096 || x.RxRing != 2048 || x.TxRing != 2048 || x.FillRing != 2048 ||
		x.CompRing != 2048 || x.ZeroCopy != "auto" || x.XDPMode != "auto" {
		t.Errorf("afxdp defaults: %+v", x)
	}
	if m := p.MLX5; m.RQLogSize != 6 || m.StridesPerWQE != 0 || m.LogStrideSize != 0 || m.SQLogSize != 10 ||
		m.TxFragmentSize != 4096 || m.PrefetchDistance != 4 || m.CQECompression != "auto" || m.TxEdgePolicy != "reuse" {
		t.Errorf("mlx5 defaults: %+v", m)
	}
	v := c.VPN
	if v.Enabled || v.Port != 1194 || v.ReplayWindow != 2048 || v.MaxPeers != 1024 || v.MaxHalfOpen != 256 ||
		v.HandshakeRate != 200 || v.KeepaliveInterval != 10*time.Second || v.KeepaliveTimeout != 60*time.Second ||
		v.RenegSec != 3600 || v.TunMTU != 1500 || !v.CompressStub || v.KeyDirection != 0 ||
		!reflect.DeepEqual(v.Ciphers, []string{"AES-256-GCM", "AES-128-GCM", "CHACHA20-POLY1305"}) ||
		!reflect.DeepEqual(v.Listen, []netip.Addr{netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("::")}) {
		t.Errorf("vpn defaults: %+v", v)
	}
	if c.Netlink != (Netlink{Routes: false, Table: 254, Neighbours: false}) {
		t.Errorf("netlink defaults: %+v", c.Netlink)
	}
	if c.Metrics.Listen.String() != "127.0.0.1:9469" || c.Status.Socket != "/run/ovfwd/ovfwd.sock" ||
		c.Log.Level != "info" || c.Log.Format != "text" {
		t.Errorf("metrics/status/log defaults: %+v %+v %+v", c.Metrics, c.Status, c.Log)
	}
	// Default() must not share slices between calls: the appliance may
	// keep one config while decoding the next on SIGHUP.
	d1, d2 := Default(), Default()
	d1.VPN.Ciphers[0] = "x"
	d1.VPN.Listen[0] = netip.Addr{}
	if d2.VPN.Ciphers[0] != "AES-256-GCM" || !d2.VPN.Listen[0].IsValid() {
		t.Error("Default shares slices between calls")
	}
}

// TestParseValues: values written in the file come out parsed and
// canonical.
func TestParseValues(t *testing.T) {
	c, err := Parse("/etc/ovfwd/ovfwd.toml", []byte(`
[appliance]
mode = "router"
workers = "1-3,6"
mss_clamp = 1360
bridge_aging = "5m"

[[port]]
name = "lan0"
driver = "vfio"
pci = "03:00.1"
addresses = ["198.18.0.1/24", "2001:db8::1/64"]
vlans = [10, 20]
mac = "02:AA:00:00:00:01"
mlx5 = { strides_per_wqe = 512, log_stride_size = "auto" }

[[port]]
name = "wan0"
driver = "afxdp-copy"
ifname = "veth1"
addresses = ["198.18.1.1/24"]

[[route]]
prefix = "198.18.64.0/20"
via = "198.18.1.254"
metric = 5

[[route]]
prefix = "2001:db8:1::/48"
via = "fe80::1"
port = "lan0"

[[route]]
prefix = "198.18.99.0/24"
port = "wan0"

[vpn]
enabled = true
listen = ["::"]
ca = "pki/ca.crt"
cert = "/abs/server.crt"
key = "pki/server.key"
tls_auth = "pki/ta.key"
key_direction = 1
pool_v6 = "2001:db8:100::/112"
ciphers = ["chacha20-poly1305"]

[[vpn.client]]
name = "site-b"
remote = "[2001:db8:ff::1]:1194"
ca = "b/ca.crt"
cert = "b/c.crt"
key = "b/c.key"
tls_crypt = "b/tc.key"
routes = ["198.18.128.0/20"]

[metrics]
listen = ""
`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Appliance.Workers, []int{1, 2, 3, 6}) || c.Appliance.MSSClamp != 1360 || c.Appliance.BridgeAging != 5*time.Minute {
		t.Errorf("appliance: %+v", c.Appliance)
	}
	p := c.Ports[0]
	if p.PCI != "0000:03:00.1" || p.MAC.String() != "02:aa:00:00:00:01" || !reflect.DeepEqual(p.VLANs, []int{10, 20}) ||
		p.Addresses[1] != netip.MustParsePrefix("2001:db8::1/64") || p.MLX5.StridesPerWQE != 512 || p.MLX5.LogStrideSize != 0 {
		t.Errorf("port: %+v", p)
	}
	r := c.Routes
	if r[0].Port != "wan0" || r[0].Metric != 5 || r[1].Port != "lan0" || r[2].Via.IsValid() || r[2].Port != "wan0" {
		t.Errorf("routes: %+v", r)
	}
	v := c.VPN
	if v.CA != "/etc/ovfwd/pki/ca.crt" || v.Cert != "/abs/server.crt" || v.TLSAuth != "/etc/ovfwd/pki/ta.key" || v.KeyDirection != 1 ||
		!reflect.DeepEqual(v.Ciphers, []string{"CHACHA20-POLY1305"}) || v.Clients[0].CA != "/etc/ovfwd/b/ca.crt" ||
		v.Clients[0].Routes[0] != netip.MustParsePrefix("198.18.128.0/20") || len(v.Listen) != 1 {
		t.Errorf("vpn: %+v", v)
	}
	if c.Metrics.Listen.IsValid() {
		t.Errorf("metrics listen \"\" should turn metrics off, got %v", c.Metrics.Listen)
	}
}

// TestLoadKeyFiles: Load resolves key files against the config's directory
// and reports each missing one at its own line.
func TestLoadKeyFiles(t *testing.T) {
	dir := t.TempDir()
	src := `[[port]]
name = "lan0"
ifname = "veth0"
addresses = ["198.18.0.1/24"]

[vpn]
enabled = true
pool_v4 = "198.19.0.0/24"
ca = "pki/ca.crt"
cert = "pki/server.crt"
key = "pki/server.key"
tls_crypt = "pki/tc.key"
`
	path := filepath.Join(dir, "ovfwd.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "pki"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "server.crt"} {
		if err := os.WriteFile(filepath.Join(dir, "pki", f), []byte("pem"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "pki", "tc.key"), 0o755); err != nil { // a directory, not a file
		t.Fatal(err)
	}
	_, err := Load(path)
	errs, ok := err.(ErrorList)
	if !ok || len(errs) != 2 {
		t.Fatalf("got %v, want 2 errors", err)
	}
	if errs[0].Line != 11 || errs[0].Key != "vpn.key" || !strings.Contains(errs[0].Msg, "no such file") || errs[0].File != path {
		t.Errorf("missing key: %v", errs[0])
	}
	if errs[1].Line != 12 || errs[1].Key != "vpn.tls_crypt" || !strings.Contains(errs[1].Msg, "not a regular file") || !strings.Contains(errs[1].Fix, "PEM") {
		t.Errorf("directory as key: %v", errs[1])
	}
	// With the files in place the same config loads, with absolute paths.
	if err := os.WriteFile(filepath.Join(dir, "pki", "server.key"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "pki", "tc.key")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pki", "tc.key"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.VPN.Key != filepath.Join(dir, "pki", "server.key") {
		t.Errorf("key path %q not resolved against %s", c.VPN.Key, dir)
	}
	// A disabled server needs no key files.
	if err := os.WriteFile(path, []byte(strings.Replace(src, "enabled = true", "enabled = false", 1)+`tls_auth = "missing"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Errorf("disabled VPN: %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	errs, ok := err.(ErrorList)
	if !ok || len(errs) != 1 || errs[0].Key != "" || !strings.Contains(errs[0].Error(), "nope.toml: ") {
		t.Errorf("got %v", err)
	}
}

// TestNoPorts: a file without ports is an error that belongs to no key.
func TestNoPorts(t *testing.T) {
	for _, src := range []string{"", "[log]\nlevel = \"debug\"\n"} {
		errs := parseErrs(t, src)
		if len(errs) != 1 || errs[0].Key != "" || errs[0].Line != 0 || !strings.Contains(errs[0].Msg, "no ports") {
			t.Errorf("%q: got %v", src, errs)
		}
		if got := errs.Error(); !strings.HasPrefix(got, "ovfwd.toml: no ports") {
			t.Errorf("rendering %q", got)
		}
	}
}

// TestLoadAllErrors: Load reports missing key files together with the
// file's other errors, not after them.
func TestLoadAllErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ovfwd.toml")
	src := `[[port]]
name = "lan0"
ifname = "veth0"
mtu = 1

[vpn]
enabled = true
pool_v4 = "198.19.0.0/24"
ca = "ca.crt"
cert = "server.crt"
key = "server.key"
tls_crypt = "tc.key"
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	errs, ok := err.(ErrorList)
	if !ok || len(errs) != 5 {
		t.Fatalf("got %v, want 5 errors", err)
	}
	for i, w := range []struct {
		line int
		key  string
	}{{4, "port[0].mtu"}, {9, "vpn.ca"}, {10, "vpn.cert"}, {11, "vpn.key"}, {12, "vpn.tls_crypt"}} {
		if errs[i].Line != w.line || errs[i].Key != w.key {
			t.Errorf("error %d: %v, want line %d key %s", i, errs[i], w.line, w.key)
		}
	}
}
