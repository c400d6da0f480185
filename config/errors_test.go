package config

import (
	"errors"
	"strings"
	"testing"
)

// mark is the comment that marks the line a bad config's error must name.
const mark = "#<"

// markedLine is the 1-based line of src that carries mark.
func markedLine(t *testing.T, src string) int {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, mark) {
			return i + 1
		}
	}
	t.Fatal("test config has no " + mark + " marker")
	return 0
}

func parseErrs(t *testing.T, src string) ErrorList {
	t.Helper()
	c, err := Parse("ovfwd.toml", []byte(src))
	if err == nil {
		t.Fatalf("config accepted, want an error:\n%s\n%+v", src, c)
	}
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error is %T, want ErrorList", err)
	}
	return list
}

const twoPorts = `
[[port]]
name = "lan0"
ifname = "veth0"
addresses = ["198.18.0.1/24", "2001:db8:0:1::1/64"]

[[port]]
name = "wan0"
ifname = "veth1"
addresses = ["198.18.1.1/24"]
`

// TestBadConfigs feeds one mistake per config and checks that exactly one
// error comes back naming the marked line, the key, and a fix.
// vpnOn is a valid enabled [vpn] section.
const vpnOn = `
[vpn]
enabled = true
pool_v4 = "198.19.0.0/24"
ca = "ca.crt"
cert = "s.crt"
key = "s.key"
tls_crypt = "tc.key"`

func TestBadConfigs(t *testing.T) {
	cases := []struct {
		name, key, msg, src string
	}{
		{"unknown top-level key", "prot", "unknown key at the top level", `prot = 1 #<` + twoPorts},
		{"unknown key in second port", "port[1].drvier", "unknown key in [port[1]]", twoPorts + `drvier = "vfio" #<`},
		{"wrong type", "appliance.batch", `expected an integer, got string "64"`, "[appliance]\nbatch = \"64\" #<\n" + twoPorts},
		{"out of range", "appliance.batch", "512 is out of range", "[appliance]\nmode = \"router\"\nbatch = 512 #<\n" + twoPorts},
		{"unknown driver", "port[1].driver", `unknown driver "dpdk"`, twoPorts + `driver = "dpdk" #<`},
		{"bad address in multi-line array", "port[0].addresses[1]", `bad prefix "198.18.2.300/24"`, `
[[port]]
name = "lan0"
ifname = "veth0"
addresses = [
  "198.18.0.1/24",
  "198.18.2.300/24", #<
]`},
		{"host bits in route prefix", "route[0].prefix", `host bits set in prefix "198.18.5.1/24"`, twoPorts + `
[[route]]
prefix = "198.18.5.1/24" #<
via = "198.18.1.254"`},
		{"port named twice", "port[1].name", `port name "lan0" is already used by port[0]`, `
[[port]]
name = "lan0"
ifname = "veth0"
[[port]]
name = "lan0" #<
ifname = "veth1"`},
		{"vfio without pci", "port[0].driver", "driver vfio needs the port's pci address", `
[[port]]
name = "lan0"
driver = "vfio" #<
ifname = "veth0"`},
		{"afxdp without ifname", "port[0].driver", "driver afxdp needs the port's ifname", `
[[port]]
name = "lan0"
pci = "03:00.0"
driver = "afxdp" #<`},
		{"route via unknown port", "route[0].port", `no port named "lan1"`, twoPorts + `
[[route]]
prefix = "198.18.8.0/24"
via = "198.18.0.254"
port = "lan1" #<`},
		{"route via unreachable address", "route[1].via", "no port reaches next hop 198.18.9.1", twoPorts + `
[[route]]
prefix = "198.18.8.0/24"
via = "198.18.0.254"
[[route]]
prefix = "198.18.10.0/24"
via = "198.18.9.1" #<`},
		{"next hop outside the named port", "route[0].via", `next hop 198.18.1.254 is not in any subnet of port "lan0"`, twoPorts + `
[[route]]
prefix = "198.18.8.0/24"
via = "198.18.1.254" #<
port = "lan0"`},
		{"bad duration", "vpn.keepalive_interval", `bad duration "10"`, twoPorts + `
[vpn]
keepalive_interval = "10" #<`},
		{"pool overlaps port subnet", "vpn.pool_v4", "pool_v4 198.18.0.0/23 overlaps the subnet of port \"lan0\" 198.18.0.0/24 (line 5)", twoPorts + `
[vpn]
pool_v4 = "198.18.0.0/23" #<`},
		{"uplink route overlaps pool", "vpn.client[0].routes[0]", `route of uplink "b" 198.19.0.128/25 overlaps pool_v4`, twoPorts + `
[vpn]
pool_v4 = "198.19.0.0/24"
[[vpn.client]]
name = "b"
remote = "198.18.1.9:1194"
ca = "ca.crt"
cert = "c.crt"
key = "c.key"
tls_crypt = "tc.key"
routes = ["198.19.0.128/25"] #<`},
		{"tls_crypt and tls_auth", "vpn.tls_auth", "tls_crypt and tls_auth are both set", twoPorts + `
[vpn]
enabled = true
pool_v4 = "198.19.0.0/24"
ca = "ca.crt"
cert = "s.crt"
key = "s.key"
tls_crypt = "tc.key"
tls_auth = "ta.key" #<`},
		{"vpn enabled without pool", "vpn.enabled", "VPN enabled with no address pool", twoPorts + `
[vpn]
enabled = true #<
ca = "ca.crt"
cert = "s.crt"
key = "s.key"
tls_crypt = "tc.key"`},
		{"replay window not a power of two", "vpn.replay_window", "1000 is not a power of two", twoPorts + `
[vpn]
replay_window = 1000 #<`},
		{"unknown cipher", "vpn.ciphers[1]", `unsupported cipher "BF-CBC"`, twoPorts + `
[vpn]
ciphers = ["AES-256-GCM", "BF-CBC"] #<`},
		{"inline sub-table value", "port[0].mlx5.prefetch_distance", "99 is out of range", `
[[port]]
name = "lan0"
driver = "mlx5-sim"
mlx5 = { rq_log_size = 6, prefetch_distance = 99 } #<`},
		{"sub-table of second port", "port[1].afxdp.zerocopy", `unknown zerocopy "maybe"`, twoPorts + `
[port.afxdp]
frame_size = 2048
zerocopy = "maybe" #<`},
		{"bad uplink remote", "vpn.client[0].remote", `bad remote "vpn.example.net"`, twoPorts + `
[[vpn.client]]
name = "b"
remote = "vpn.example.net" #<
ca = "ca.crt"
cert = "c.crt"
key = "c.key"
tls_crypt = "tc.key"`},
		{"uplink mtu too small", "vpn.client[0].mtu", "1000 is out of range", twoPorts + `
[[vpn.client]]
name = "b"
remote = "198.18.1.9:1194"
ca = "ca.crt"
cert = "c.crt"
key = "c.key"
tls_crypt = "tc.key"
mtu = 1000 #<`},
		{"iroute common name twice", "vpn.iroute[1].common_name", `common_name "site-a" already has vpn.iroute[0]`, twoPorts + vpnOn + `
[[vpn.iroute]]
common_name = "site-a"
routes = ["198.18.70.0/24"]
[[vpn.iroute]]
common_name = "site-a" #<
routes = ["198.18.71.0/24"]`},
		{"iroute overlaps pool", "vpn.iroute[0].routes[0]", `iroute of "site-a" 198.19.0.0/16 overlaps pool_v4`, twoPorts + vpnOn + `
[[vpn.iroute]]
common_name = "site-a"
routes = ["198.19.0.0/16"] #<`},
		{"iroute without routes", "vpn.iroute[0]", "iroute without routes", twoPorts + vpnOn + `
[[vpn.iroute]] #<
common_name = "site-a"`},
		{"nat unknown port", "nat[0].port", `no port named "wan9"`, twoPorts + `
[[nat]]
sources = ["198.19.0.0/24"]
port = "wan9" #<`},
		{"nat without sources", "nat[0]", "NAT rule without sources", twoPorts + `
[[nat]] #<
port = "wan0"`},
		{"nat ipv6 source", "nat[0].sources[0]", "source 2001:db8::/64 is not IPv4", twoPorts + `
[[nat]]
sources = ["2001:db8::/64"] #<
port = "wan0"`},
		{"nat bad port range", "nat[0].ports", `bad port range "2000-1000"`, twoPorts + `
[[nat]]
sources = ["198.19.0.0/24"]
port = "wan0"
ports = "2000-1000" #<`},
		{"nat range below a block", "nat[0].ports", "port range 2000-2010 is smaller than one port block", twoPorts + `
[[nat]]
sources = ["198.19.0.0/24"]
port = "wan0"
ports = "2000-2010" #<`},
		{"nat outside twice", "nat[1].outside[0]", "outside address 198.18.1.1 is already nat[0]'s", twoPorts + `
[[nat]]
sources = ["198.19.0.0/24"]
port = "wan0"
[[nat]]
sources = ["198.19.1.0/24"]
port = "wan0"
outside = ["198.18.1.1"] #<`},
		{"nat bad filtering", "nat_options.filtering", `"full-cone"`, twoPorts + `
[nat_options]
filtering = "full-cone" #<`},
		{"iroute without the server", "vpn.iroute", "iroutes need the VPN server", twoPorts + `
[[vpn.iroute]] #<
common_name = "site-a"
routes = ["198.18.70.0/24"]`},
		{"redirect_gateway family", "vpn.redirect_gateway[0]", `unknown family "def1"`, twoPorts + vpnOn + `
redirect_gateway = ["def1"] #<`},
		{"bad dns_domain", "vpn.dns_domain", `bad domain "corp example"`, twoPorts + vpnOn + `
dns_domain = "corp example" #<`},
		{"ccd address outside the pool", "vpn.ccd[0].ipv4", "fixed address 198.20.0.5 is outside the pool", twoPorts + vpnOn + `
[[vpn.ccd]]
common_name = "alice"
ipv4 = "198.20.0.5" #<`},
		{"ccd server address", "vpn.ccd[0].ipv4", "fixed address 198.19.0.1 is not a client address", twoPorts + vpnOn + `
[[vpn.ccd]]
common_name = "alice"
ipv4 = "198.19.0.1" #<`},
		{"ccd address twice", "vpn.ccd[1].ipv4", "address 198.19.0.9 is already fixed for vpn.ccd[0]", twoPorts + vpnOn + `
[[vpn.ccd]]
common_name = "alice"
ipv4 = "198.19.0.9"
[[vpn.ccd]]
common_name = "bob"
ipv4 = "198.19.0.9" #<`},
		{"ccd common name twice", "vpn.ccd[1].common_name", `common_name "alice" already has vpn.ccd[0]`, twoPorts + vpnOn + `
[[vpn.ccd]]
common_name = "alice"
[[vpn.ccd]]
common_name = "alice" #<`},
		{"ccd iroutes and vpn.iroute", "vpn.ccd[0].iroutes", `common_name "site-a" also has vpn.iroute[0]`, twoPorts + vpnOn + `
[[vpn.iroute]]
common_name = "site-a"
routes = ["198.18.70.0/24"]
[[vpn.ccd]]
common_name = "site-a"
iroutes = ["198.18.71.0/24"] #<`},
		{"ccd ipv6 without pool", "vpn.ccd[0].ipv6", "fixed address 2001:db8:9::5 without a pool", twoPorts + vpnOn + `
[[vpn.ccd]]
common_name = "alice"
ipv6 = "2001:db8:9::5" #<`},
		{"no certificates and no password check", "vpn.verify_client_cert", "clients without certificates need a username/password check", twoPorts + vpnOn + `
verify_client_cert = "none" #<`},
		{"relative auth command", "vpn.auth_user_pass_verify[0]", `"check-login" is not an absolute path`, twoPorts + vpnOn + `
auth_user_pass_verify = ["check-login"] #<`},
		{"tls_auth_digest without tls_auth", "vpn.tls_auth_digest", "tls_auth_digest applies only to tls_auth", twoPorts + vpnOn + `
tls_auth_digest = "SHA256" #<`},
		{"bad metrics address", "metrics.listen", `bad listen address "localhost:9469"`, twoPorts + `
[metrics]
listen = "localhost:9469" #<`},
		{"relative status socket", "status.socket", `socket path "ovfwd.sock" is not absolute`, twoPorts + `
[status]
socket = "ovfwd.sock" #<`},
		{"bad cpu list", "appliance.workers", `bad CPU list "3-1"`, "[appliance]\nworkers = \"3-1\" #<\n" + twoPorts},
		{"multicast mac", "port[0].mac", `MAC "01:00:5e:00:00:01" is not a unicast address`, `
[[port]]
name = "lan0"
ifname = "veth0"
mac = "01:00:5e:00:00:01" #<`},
		{"key_direction without tls_auth", "vpn.key_direction", "key_direction applies only to tls_auth", twoPorts + `
[vpn]
key_direction = 1 #<`},
		{"table of the wrong type", "log", "expected a table, got string", `log = "debug" #<` + twoPorts},
		{"IPv6 address on a small MTU", "port[0].mtu", "MTU 1200 is below the IPv6 minimum", `
[[port]]
name = "lan0"
ifname = "veth0"
mtu = 1200 #<
addresses = ["2001:db8::1/64"]`},
		{"address on two ports", "port[1].addresses[0]", "address 198.18.0.1 is already on port[0]", `
[[port]]
name = "lan0"
ifname = "veth0"
addresses = ["198.18.0.1/24"]
[[port]]
name = "lan1"
ifname = "veth1"
addresses = ["198.18.0.1/24"] #<`},
		{"vlan out of range", "port[0].vlans[1]", "4095 is out of range", `
[[port]]
name = "lan0"
ifname = "veth0"
vlans = [10,
  4095, #<
]`},
		{"network address as interface address", "port[0].addresses[0]", `"198.18.0.0/24" is the subnet's network address`, `
[[port]]
name = "lan0"
ifname = "veth0"
addresses = ["198.18.0.0/24"] #<`},
		{"key after multi-line string and quoted keys", "port[0].bogus", "unknown key", `
[[port]]
"name" = "lan0"
'ifname' = """veth0"""
mlx5.prefetch_distance = 2
driver = "auto"
bogus = ''' #<
'''`},
		{"mlx5 table on an afxdp port", "port[0].mlx5", "[port.mlx5] has no effect with driver afxdp", `
[[port]]
name = "lan0"
driver = "afxdp"
ifname = "veth0"
[port.mlx5] #<
prefetch_distance = 0`},
		{"route in bridge mode", "route", "static routes need router mode", "[appliance]\nmode = \"bridge\"\n" + twoPorts + `
[[route]] #<
prefix = "198.18.8.0/24"
via = "198.18.0.254"`},
		{"array of tables written as a table", "route", "expected an array of tables", twoPorts + `
[route] #<
prefix = "198.18.8.0/24"`},
		{"route with neither via nor port", "route[0]", "route needs via or port", twoPorts + `
[[route]] #<
prefix = "198.18.8.0/24"
metric = 3`},
		{"port without a name", "port[1]", "port without a name", `
[[port]]
name = "lan0"
ifname = "veth0"
[[port]] #<
ifname = "veth1"`},
		{"link-local next hop without port", "route[0].via", "link-local next hop fe80::1 needs a port", twoPorts + `
[[route]]
prefix = "2001:db8:5::/48"
via = "fe80::1" #<`},
		{"next hop of the wrong family", "route[0].via", "different families", twoPorts + `
[[route]]
prefix = "2001:db8:5::/48"
via = "198.18.0.254" #<`},
		{"duplicate route", "route[1].prefix", "duplicates route[0]", twoPorts + `
[[route]]
prefix = "198.18.8.0/24"
via = "198.18.0.254"
[[route]]
prefix = "198.18.8.0/24" #<
via = "198.18.1.254"`},
		{"keepalive timeout too short", "vpn.keepalive_timeout", "too short", twoPorts + `
[vpn]
keepalive_interval = "20s"
keepalive_timeout = "30s" #<`},
		{"tx fragment larger than the SQ", "port[0].mlx5.tx_fragment_size", "larger than the SQ", `
[[port]]
name = "lan0"
driver = "mlx5-sim"
[port.mlx5]
sq_log_size = 6
tx_fragment_size = 8192 #<`},
		{"unknown key in a table array element inline", "vpn.client[0].bogus", "unknown key", twoPorts + `
[vpn]
client = [
  { name = "b", remote = "198.18.1.9:1194", ca = "a", cert = "b", key = "c", tls_crypt = "d",
    bogus = 1 }, #<
]`},
		{"next hop with a prefix length", "route[0].via", `bad address "198.18.0.254/24"`, twoPorts + `
[[route]]
prefix = "198.18.8.0/24"
via = "198.18.0.254/24" #<`},
		{"prefix without a length", "route[0].prefix", `bad prefix "198.18.8.0"`, twoPorts + `
[[route]]
prefix = "198.18.8.0" #<
port = "lan0"`},
		{"IPv6 pool in pool_v4", "vpn.pool_v4", "is not an IPv4 prefix", twoPorts + `
[vpn]
pool_v4 = "2001:db8:100::/112" #<`},
		{"CPU listed twice", "appliance.workers", "CPU 1 is listed twice", "[appliance]\nworkers = [1, 2, 1] #<\n" + twoPorts},
		{"boolean as string", "vpn.compress_stub", `expected a boolean, got string "yes"`, twoPorts + `
[vpn]
compress_stub = "yes" #<`},
		{"wrong element type in listen", "vpn.listen[1]", "expected a string, got integer 6", twoPorts + `
[vpn]
listen = ["0.0.0.0",
   6] #<`},
		{"export into the main table", "export.table", "table 254 is one of the kernel's own", twoPorts + vpnOn + `
[export]
enabled = true
table = 254 #<`},
		{"export with a routing daemon's protocol", "export.protocol", "protocol 186 belongs to a routing daemon", twoPorts + vpnOn + `
[export]
enabled = true
protocol = 186 #<`},
		{"export protocol of the kernel's own", "export.protocol", "4 is out of range", twoPorts + vpnOn + `
[export]
protocol = 4 #<`},
		{"export into the mirrored table", "export.table", "table 100 is the one [netlink] mirrors", twoPorts + vpnOn + `
[netlink]
routes = true
table = 100
[export]
enabled = true
table = 100 #<`},
		{"export without the VPN server", "export.enabled", "nothing to export", twoPorts + `
[export]
enabled = true #<`},
		{"export device name too long", "export.device", `bad device name "ovfwd-export-device0"`, twoPorts + vpnOn + `
[export]
device = "ovfwd-export-device0" #<`},
		{"worker stall too short", "export.worker_stall", "out of range", twoPorts + `
[export]
worker_stall = "10ms" #<`},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if seen[tc.src] {
				t.Fatal("duplicate test config")
			}
			seen[tc.src] = true
			line := markedLine(t, tc.src)
			errs := parseErrs(t, tc.src)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(errs), errs)
			}
			e := errs[0]
			if e.Key != tc.key || e.Line != line || !strings.Contains(e.Msg, tc.msg) || e.File != "ovfwd.toml" {
				t.Errorf("got  %s:%d: %s: %s\nwant %s:%d: %s: …%s…", e.File, e.Line, e.Key, e.Msg, "ovfwd.toml", line, tc.key, tc.msg)
			}
			if e.Fix == "" {
				t.Errorf("error has no fix: %v", e)
			}
		})
	}
	if len(cases) < 15 {
		t.Fatalf("only %d bad configs", len(cases))
	}
}

// TestErrorText pins the exact rendering of an error, as operators see it.
func TestErrorText(t *testing.T) {
	src := twoPorts + `driver = "dpdk"`
	errs := parseErrs(t, src)
	want := `ovfwd.toml:11: port[1].driver: unknown driver "dpdk" (fix: use one of auto, vfio, afxdp, afxdp-copy, mlx5-sim)`
	if len(errs) != 1 || errs.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", errs, want)
	}
}

// TestSyntaxError: a TOML syntax error carries toml's line and no key.
func TestSyntaxError(t *testing.T) {
	src := "[appliance]\nmode = \"router\"\nbatch = = 3\n"
	errs := parseErrs(t, src)
	if len(errs) != 1 || errs[0].Line != 3 || errs[0].Key != "" || errs[0].Msg == "" {
		t.Errorf("got %#v", errs)
	}
	if !strings.HasPrefix(errs.Error(), "ovfwd.toml:3: ") {
		t.Errorf("rendering %q", errs.Error())
	}
}

// TestAllErrorsAtOnce: one file with many independent mistakes reports each,
// in line order.
func TestAllErrorsAtOnce(t *testing.T) {
	src := `[appliance]
mode = "switch"
batch = 1
colour = "blue"

[[port]]
name = "lan0"
driver = "dpdk"
addresses = ["198.18.0.1/33"]

[[port]]
name = "lan0"
ifname = "veth1"
addresses = ["198.18.1.1/24"]

[[route]]
prefix = "198.18.5.1/24"
port = "nope"

[vpn]
enabled = true
pool_v4 = "198.18.1.0/24"
keepalive_interval = "ten seconds"
ca = "ca.crt"
cert = "s.crt"
key = "s.key"
tls_crypt = "tc.key"
replay_window = 32

[log]
level = "loud"
`
	errs := parseErrs(t, src)
	want := []struct {
		line int
		key  string
	}{
		{2, "appliance.mode"},
		{3, "appliance.batch"},
		{4, "appliance.colour"},
		{8, "port[0].driver"},
		{9, "port[0].addresses[0]"},
		{12, "port[1].name"},
		{17, "route[0].prefix"},
		{18, "route[0].port"},
		{22, "vpn.pool_v4"},
		{23, "vpn.keepalive_interval"},
		{28, "vpn.replay_window"},
		{31, "log.level"},
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if errs[i].Line != w.line || errs[i].Key != w.key {
			t.Errorf("error %d: got %d %s (%v), want %d %s", i, errs[i].Line, errs[i].Key, errs[i], w.line, w.key)
		}
	}
	var one *Error
	if !errors.As(error(errs), &one) || one != errs[0] {
		t.Error("errors.As does not find the first *Error in the list")
	}
}
