package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

const examplePath = "../packaging/ovfwd.toml"

// TestExampleConfig loads the packaged default config: it must validate, and
// every value it spells out must equal the documented default, so the file
// and Default cannot drift apart.
func TestExampleConfig(t *testing.T) {
	c, err := Load(examplePath)
	if err != nil {
		t.Fatalf("packaged config does not validate:\n%v", err)
	}
	if c.VPN.Enabled {
		t.Error("packaged config enables the VPN; it must ship disabled so no key files are needed")
	}
	def := Default()
	if !reflect.DeepEqual(c.Appliance, def.Appliance) {
		t.Errorf("[appliance] differs from Default:\n got %+v\nwant %+v", c.Appliance, def.Appliance)
	}
	if ce, de := c.Export, def.Export; len(ce.Routes) != 0 || len(de.Routes) != 0 {
		t.Errorf("[export] routes: %v, want none", ce.Routes)
	} else if ce.Routes, de.Routes = nil, nil; !reflect.DeepEqual(ce, de) {
		t.Errorf("[export] differs from Default: %+v, want %+v", ce, de)
	}
	if !reflect.DeepEqual(c.Netlink, def.Netlink) || c.Metrics != def.Metrics || c.Status != def.Status || c.Log != def.Log {
		t.Errorf("[netlink]/[metrics]/[status]/[log] differ from Default: %+v %+v %+v %+v", c.Netlink, c.Metrics, c.Status, c.Log)
	}
	// The first port spells out every port key; the second leaves them all
	// to the defaults: both must come out the same apart from what differs.
	if len(c.Ports) != 2 {
		t.Fatalf("got %d ports, want 2", len(c.Ports))
	}
	full, bare := c.Ports[0], c.Ports[1]
	want := defaultPort()
	if full.AFXDP != want.AFXDP || full.MLX5 != want.MLX5 || bare.AFXDP != want.AFXDP || bare.MLX5 != want.MLX5 {
		t.Errorf("port sub-tables differ from the defaults:\n%+v\n%+v\nwant %+v %+v", full, bare, want.AFXDP, want.MLX5)
	}
	if full.MTU != want.MTU || bare.MTU != want.MTU || full.Queues != want.Queues || full.Driver != want.Driver || bare.Driver != want.Driver {
		t.Errorf("port scalars differ from the defaults: %+v / %+v", full, bare)
	}
	// VPN: everything but the optional paths and pools equals the defaults.
	v := c.VPN
	dv := def.VPN
	if !reflect.DeepEqual(v.Listen, dv.Listen) || v.Port != dv.Port || !reflect.DeepEqual(v.Ciphers, dv.Ciphers) ||
		v.KeepaliveInterval != dv.KeepaliveInterval || v.KeepaliveTimeout != dv.KeepaliveTimeout || v.RenegSec != dv.RenegSec ||
		v.MaxPeers != dv.MaxPeers || v.MaxHalfOpen != dv.MaxHalfOpen || v.HandshakeRate != dv.HandshakeRate ||
		v.ReplayWindow != dv.ReplayWindow || v.TunMTU != dv.TunMTU || v.CompressStub != dv.CompressStub {
		t.Errorf("[vpn] differs from Default:\n got %+v\nwant %+v", v, dv)
	}
	if v.PoolV4 != netip.MustParsePrefix("198.19.0.0/24") {
		t.Errorf("pool_v4 = %v", v.PoolV4)
	}
	if got := c.Routes[0].Port; got != "wan0" {
		t.Errorf("route[0] via 198.18.1.254 resolved to port %q, want wan0", got)
	}
}

// TestExampleDocumentsEveryKey makes sure every key the decoder knows
// appears (set or commented out) in the packaged config.
func TestExampleDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	// Decode an empty document to collect the keys every table asks for.
	d := &decoder{file: "x", lines: lineIndex{}}
	root := &table{d: d, m: map[string]any{}}
	d.decodeRoot(root, Default())
	// Sub-tables and arrays of tables are absent in an empty document, so
	// ask them with empty values to learn their keys.
	keys := map[string][]string{"": root.known}
	for name, decode := range map[string]func(*table){
		"appliance":   func(t *table) { d.appliance(t, &Appliance{}) },
		"port":        func(t *table) { p := defaultPort(); d.port(t, &p) },
		"port.afxdp":  func(t *table) { d.afxdp(t, &AFXDP{}) },
		"port.mlx5":   func(t *table) { d.mlx5(t, &MLX5{SQLogSize: 10}) },
		"route":       func(t *table) { d.route(t, &Route{}) },
		"vpn":         func(t *table) { d.vpn(t, &VPN{}) },
		"vpn.client":  func(t *table) { d.vpnClient(t, &VPNClient{}) },
		"vpn.iroute":  func(t *table) { d.vpnIRoute(t, &VPNIRoute{}) },
		"vpn.ccd":     func(t *table) { d.vpnCCD(t, &VPNCCD{}) },
		"netlink":     func(t *table) { d.netlink(t, &Netlink{}) },
		"export":      func(t *table) { d.export(t, &Export{}) },
		"metrics":     func(t *table) { d.metrics(t, &Metrics{}) },
		"status":      func(t *table) { d.status(t, &Status{}) },
		"management":  func(t *table) { d.management(t, &Management{}) },
		"log":         func(t *table) { d.log(t, &Log{}) },
		"nat":         func(t *table) { d.nat(t, &NAT{}) },
		"nat_options": func(t *table) { d.natOptions(t, &NATOptions{}) },
		"acl":         func(t *table) { d.acl(t, &ACL{}) },
		"acl.rule":    func(t *table) { d.aclRule(t, &ACLRule{}) },
		"acl_group":   func(t *table) { d.aclGroup(t, &ACLGroup{}) },
	} {
		tb := &table{d: d, path: name, m: map[string]any{}}
		decode(tb)
		keys[name] = tb.known
	}
	text := string(data)
	for table, ks := range keys {
		for _, k := range ks {
			full := regexp.QuoteMeta(joinPath(table, k))
			re := regexp.MustCompile(`(?m)^#? ?(` + regexp.QuoteMeta(k) + ` = |\[\[?` + full + `\]\]?$)`)
			if !re.MatchString(text) {
				t.Errorf("key %s is not documented in %s", joinPath(table, k), filepath.Base(examplePath))
			}
		}
	}
	if len(keys["port"]) < 10 || len(keys["vpn"]) < 20 || !strings.Contains(strings.Join(keys[""], ","), "port") {
		t.Errorf("key collection looks broken: %v", keys)
	}
}
