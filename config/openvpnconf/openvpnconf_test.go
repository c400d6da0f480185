package openvpnconf

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/config"
)

var lanPort = Port{IfName: "eth0", Addresses: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24")}}

// translate imports testdata/name with a port, inline blocks going to a
// temporary directory and the given ccd files.
func translate(t *testing.T, name string, ccd map[string]string) *Result {
	t.Helper()
	o := Options{KeyDir: t.TempDir(), Ports: []Port{lanPort}, ReadCCD: func(string) (map[string][]byte, error) {
		m := map[string][]byte{}
		for k, v := range ccd {
			m[k] = []byte(v)
		}
		return m, nil
	}}
	res, err := Import(filepath.Join("testdata", name), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// parsed decodes res's TOML with ovfwd's own parser.
func parsed(t *testing.T, res *Result) *config.Config {
	t.Helper()
	c, err := config.Parse("/etc/ovfwd/ovfwd.toml", res.TOML)
	if err != nil {
		t.Fatalf("import wrote a config ovfwd refuses: %v\n%s", err, res.TOML)
	}
	return c
}

func row(t *testing.T, res *Result, option string) Row {
	t.Helper()
	for _, r := range res.Rows {
		if r.Option == option {
			return r
		}
	}
	t.Fatalf("no row for %s", option)
	return Row{}
}

// The sample leaves tls-auth commented out; ovfwd needs a wrapped
// control channel, so import refuses it as it is and accepts it with the
// sample's own tls-auth line uncommented.
func TestDebianSample(t *testing.T) {
	res := translate(t, "debian-server.conf", nil)
	if f := res.Fatal(); len(f) != 1 || f[0].Option != "tls-auth" || res.TOML != nil {
		t.Fatalf("fatal %+v", f)
	}
	data, err := os.ReadFile("testdata/debian-server.conf")
	if err != nil {
		t.Fatal(err)
	}
	file, err := Parse([]byte(strings.Replace(string(data), ";tls-auth ta.key 0", "tls-auth ta.key 0", 1)))
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("testdata")
	if res, err = Translate(file, Options{Dir: abs, Ports: []Port{lanPort}}); err != nil {
		t.Fatal(err)
	}
	c := parsed(t, res)
	v := c.VPN
	if v.Port != 1194 || v.PoolV4 != netip.MustParsePrefix("10.8.0.0/24") || v.CA != filepath.Join(abs, "ca.crt") ||
		v.Key != filepath.Join(abs, "server.key") || v.PoolPersist != "/var/log/openvpn/ipp.txt" {
		t.Errorf("vpn = %+v", v)
	}
	// ovfwd's default max_peers (1024) is more than a /24 holds.
	if v.MaxPeers != 253 {
		t.Errorf("max_peers %d, want 253", v.MaxPeers)
	}
	if r := row(t, res, "status"); r.Verdict != Refused || !strings.Contains(r.Note, "[status] file") {
		t.Errorf("status: %+v", r)
	}
	if r := row(t, res, "dh"); r.Verdict != NotNeeded {
		t.Errorf("dh: %+v", r)
	}
	if v.TLSAuth != filepath.Join(abs, "ta.key") || v.KeyDirection != 0 || v.TLSAuthDigest != "SHA1" {
		t.Errorf("tls-auth %q %d %s", v.TLSAuth, v.KeyDirection, v.TLSAuthDigest)
	}
}

func TestPiVPN(t *testing.T) {
	res := translate(t, "pivpn-server_config.txt", map[string]string{"alice": "ifconfig-push 10.8.0.9 255.255.255.0\n", "bob": "disable\n"})
	c := parsed(t, res)
	v := c.VPN
	if v.TLSAuth != "/etc/openvpn/easy-rsa/pki/ta.key" || v.KeyDirection != 0 || v.TLSAuthDigest != "SHA256" {
		t.Errorf("tls-auth %q direction %d digest %q", v.TLSAuth, v.KeyDirection, v.TLSAuthDigest)
	}
	if !v.ClientToClient || v.CRL != "/etc/openvpn/crl.pem" || len(v.RedirectGateway) != 1 || v.RedirectGateway[0] != "ipv4" {
		t.Errorf("vpn = %+v", v)
	}
	if len(v.DNS) != 2 || v.KeepaliveInterval.Seconds() != 15 || v.KeepaliveTimeout.Seconds() != 120 {
		t.Errorf("dns %v keepalive %v %v", v.DNS, v.KeepaliveInterval, v.KeepaliveTimeout)
	}
	if len(v.CCD) != 2 || v.CCD[0].CommonName != "alice" || v.CCD[0].IPv4 != netip.MustParseAddr("10.8.0.9") || !v.CCD[1].Disable {
		t.Errorf("ccd = %+v", v.CCD)
	}
	for opt, want := range map[string]Verdict{`push "block-outside-dns"`: Refused, "cipher": Refused, "status-version": Refused,
		"syslog": NotNeeded, "user": NotNeeded, "auth": Mapped, "tls-auth": Mapped} {
		if r := row(t, res, opt); r.Verdict != want || r.Note == "" && r.Verdict != Mapped {
			t.Errorf("%s: %+v, want %s with a note", opt, r, want)
		}
	}
}

func TestOpenVPNInstall(t *testing.T) {
	res := translate(t, "openvpn-install-server.conf", map[string]string{})
	v := parsed(t, res).VPN
	if v.TLSCryptV2 == "" || v.PoolV6 != netip.MustParsePrefix("fd42:42:42:42::/112") || len(v.Ciphers) != 1 || v.Ciphers[0] != "AES-128-GCM" {
		t.Errorf("vpn = %+v", v)
	}
	if strings.Join(v.RedirectGateway, ",") != "ipv4,ipv6" || len(v.DNS) != 4 || len(v.PushRoutes) != 1 {
		t.Errorf("redirect %v dns %v routes %v", v.RedirectGateway, v.DNS, v.PushRoutes)
	}
	if r := row(t, res, "management"); r.Verdict != Refused || !strings.Contains(r.Note, "[management]") {
		t.Errorf("management: %+v", r)
	}
	if r := row(t, res, "auth"); r.Verdict != NotNeeded {
		t.Errorf("auth without tls-auth: %+v", r)
	}
}

func TestAccessServerUDP(t *testing.T) {
	res := translate(t, "access-server-udp.conf", nil)
	v := parsed(t, res).VPN
	if len(res.Files) != 4 {
		t.Fatalf("inline files %+v", res.Files)
	}
	for _, f := range res.Files {
		secret := strings.HasSuffix(f.Path, ".key")
		if f.Secret != secret || filepath.Dir(f.Path) == "" {
			t.Errorf("%s secret %v", f.Path, f.Secret)
		}
	}
	if v.CA != res.Files[0].Path || v.TLSCrypt == "" || v.MaxPeers != 2048 || v.HandshakeRate != 5 || v.RenegSec != 604800 ||
		len(v.AuthUserPassVerify) != 1 || v.Listen[0] != netip.IPv4Unspecified() || v.DNSDomain != "corp.example" {
		t.Errorf("vpn = %+v", v)
	}
	for _, opt := range []string{"management", "status", "status-version", `push "dhcp-option DOMAIN-SEARCH"`} {
		if r := row(t, res, opt); r.Verdict != Refused {
			t.Errorf("%s: %+v", opt, r)
		}
	}
	if r := row(t, res, "client-connect"); r.Verdict != Mapped || len(v.Hooks.ClientConnect) != 1 || v.Hooks.ClientConnect[0] != "/usr/local/sbin/client-connect" {
		t.Errorf("client-connect: %+v, [vpn] client_connect %q", r, v.Hooks.ClientConnect)
	}
}

// A TCP (or TAP, or static-key) server has no UDP equivalent its clients
// could reach: import writes nothing.
func TestFatalRefusals(t *testing.T) {
	res := translate(t, "access-server-tcp.conf", nil)
	if len(res.Fatal()) != 1 || res.Fatal()[0].Option != "proto" || res.TOML != nil {
		t.Fatalf("fatal rows %+v, toml %q", res.Fatal(), res.TOML)
	}
	for _, src := range []string{"server 10.8.0.0 255.255.255.0\ndev tap\n", "server-bridge\ndev tap0\n",
		"secret static.key\nserver 10.8.0.0 255.255.255.0\n", "server 10.8.0.0 255.255.255.0\ntls-auth ta.key\n", "dev tun\n", "server 10.8.0.0 255.255.255.0\n<key>\nx\n</key>\n"} {
		f, err := Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		res, _ := Translate(f, Options{}) // no KeyDir: inline keys cannot go anywhere
		if len(res.Fatal()) == 0 || res.TOML != nil {
			t.Errorf("%q: no fatal refusal: %+v", src, res.Rows)
		}
	}
}

func TestRefusedKeepGoing(t *testing.T) {
	src := "server 198.18.0.0 255.255.255.0\nfrobnicate 1\nup /bin/x\nkeepalive 10 15\npush \"dhcp-option DOMAIN a.example\"\npush \"dhcp-option DOMAIN b.example\"\ndata-ciphers BF-CBC\nauth-user-pass-verify /x via-env\nca /ca\ncert /c\nkey /k\ntls-crypt /t\n"
	f, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := Translate(f, Options{Ports: []Port{lanPort}})
	want := map[int]bool{2: true, 3: true, 4: true, 6: true, 7: true, 8: true}
	for _, r := range res.Rows {
		if want[r.Line] != (r.Verdict == Refused) || r.Verdict == Refused && r.Note == "" {
			t.Errorf("line %d %s: %s %q", r.Line, r.Text, r.Verdict, r.Note)
		}
	}
	if !strings.Contains(string(res.TOML), "up /bin/x: refused") {
		t.Errorf("refusal not in the output's header:\n%s", res.TOML)
	}
	parsed(t, res)
}

func TestParse(t *testing.T) {
	f, err := Parse([]byte("--port 1194 # c\n  ;x\npush \"route 10.0.0.0 255.0.0.0\"\nkey 'a b' c\\ d\n<ca>\nPEM\n</ca>\nverb 3;x\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(f.Directives)
	want := `[{1 port [1194]} {3 push [route 10.0.0.0 255.0.0.0]} {4 key [a b c d]} {8 verb [3;x]}]`
	if got != want {
		t.Errorf("directives\n got %s\nwant %s", got, want)
	}
	if in, ok := f.Inline("ca"); !ok || in.Body != "PEM\n" || in.Line != 5 {
		t.Errorf("inline %+v", f.Inlines)
	}
	for _, bad := range []string{"key \"a\n", "<ca>\nx\n"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The docs' option table is Table's, with each option's use by the four
// configurations counted; OVFWD_UPDATE_DOCS=1 rewrites it.
func TestDocsTable(t *testing.T) {
	const doc = "../../docs/openvpn-migration.md"
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	table := docsTable(t)
	const begin, end = "<!-- import table: generated by config/openvpnconf TestDocsTable -->\n", "<!-- end of import table -->\n"
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if os.Getenv("OVFWD_UPDATE_DOCS") == "1" {
		if i < 0 || j < i {
			s += "\n" + begin + end
			i, j = strings.Index(s, begin), strings.Index(s, end)
		}
		s = s[:i+len(begin)] + table + s[j:]
		if err := os.WriteFile(doc, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if i < 0 || j < i || s[i+len(begin):j] != table {
		t.Fatalf("%s's import table differs from the import tool's: run OVFWD_UPDATE_DOCS=1 go test ./config/openvpnconf -run TestDocsTable", doc)
	}
}

// configs are the four configurations, by column.
var configs = []struct{ col, file string }{
	{"D", "debian-server.conf"}, {"I", "openvpn-install-server.conf"}, {"P", "pivpn-server_config.txt"}, {"A", "access-server-udp.conf"}, {"A", "access-server-tcp.conf"},
}

func docsTable(t *testing.T) string {
	used := map[string]map[string]bool{}
	for _, c := range configs {
		data, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		// Commented-out lines count: operators uncomment them.
		var lines []string
		for _, l := range strings.Split(string(data), "\n") {
			lines = append(lines, strings.TrimPrefix(l, ";"))
		}
		f, err := Parse([]byte(strings.Join(lines, "\n")))
		if err != nil {
			t.Fatal(err)
		}
		res, _ := Translate(f, Options{KeyDir: "/k"})
		for _, r := range res.Rows {
			if r.Line == 0 {
				continue
			}
			if used[r.Option] == nil {
				used[r.Option] = map[string]bool{}
			}
			used[r.Option][c.col] = true
		}
	}
	var b strings.Builder
	counts := map[Verdict]int{}
	seen := 0
	b.WriteString("| option | verdict | `ovfwd.toml` | used by | notes |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range Table() {
		var cols []string
		for _, c := range []string{"D", "I", "P", "A"} {
			if used[r.Option][c] {
				cols = append(cols, c)
			}
		}
		if len(cols) > 0 {
			counts[r.Verdict]++
			seen++
		}
		keys := ""
		if r.Keys != "" {
			keys = "`" + r.Keys + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", strings.ReplaceAll(r.Option, "|", "\\|"), r.Verdict, keys, strings.Join(cols, " "), strings.ReplaceAll(r.Note, "|", "\\|"))
	}
	for opt := range used {
		if !strings.HasPrefix(opt, "ccd ") && !inTable(opt) {
			t.Errorf("%s is used by a configuration but not in the table", opt)
		}
	}
	fmt.Fprintf(&b, "\nOf the %d options the four configurations use (commented-out lines included): %d mapped, %d not needed, %d refused. "+
		"Import knows %d options in all.\n", seen, counts[Mapped], counts[NotNeeded], counts[Refused], len(Table()))
	return b.String()
}

func inTable(opt string) bool {
	for _, r := range Table() {
		if r.Option == opt {
			return true
		}
	}
	return false
}

// A client-config-dir in openvpn's syntax becomes [[vpn.ccd]]; what has no
// equivalent is refused line by line.
func TestCCD(t *testing.T) {
	src := "server 198.18.0.0 255.255.255.0\nserver-ipv6 2001:db8:1::/64\ntls-crypt /t\nca /ca\ncert /c\nkey /k\nclient-config-dir ccd\nhand-window 30\n"
	f, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := Translate(f, Options{Ports: []Port{lanPort}, ReadCCD: func(dir string) (map[string][]byte, error) {
		if dir != "ccd" {
			t.Errorf("ccd dir %q", dir)
		}
		return map[string][]byte{
			"site-a":  []byte("iroute 198.18.70.0 255.255.255.0\niroute-ipv6 2001:db8:70::/48\npush \"route 198.18.71.0 255.255.255.0\"\nifconfig-ipv6-push 2001:db8:1::10/64 2001:db8:1::1\n"),
			"bob":     []byte("ifconfig-push 198.18.0.20 255.255.255.0\npush-reset\npush \"dhcp-option DNS 198.18.0.53\"\nlearn-address x\n"),
			"mallory": []byte("disable\n"),
			"DEFAULT": []byte("push \"route 198.18.72.0 255.255.255.0\"\n"),
		}, nil
	}})
	c := parsed(t, res)
	if len(c.VPN.CCD) != 3 {
		t.Fatalf("ccd %+v", c.VPN.CCD)
	}
	bob, mallory, site := c.VPN.CCD[0], c.VPN.CCD[1], c.VPN.CCD[2]
	if bob.CommonName != "bob" || bob.IPv4 != netip.MustParseAddr("198.18.0.20") || !mallory.Disable ||
		len(site.IRoutes) != 2 || len(site.PushRoutes) != 1 || site.IPv6 != netip.MustParseAddr("2001:db8:1::10") {
		t.Errorf("ccd %+v", c.VPN.CCD)
	}
	refused := map[string]bool{}
	for _, r := range res.Rows {
		if r.Verdict == Refused {
			refused[r.Option] = true
		}
	}
	for _, opt := range []string{"ccd push-reset", "ccd push", "ccd learn-address", "ccd DEFAULT", "hand-window"} {
		if !refused[opt] {
			t.Errorf("%s not refused: %+v", opt, res.Rows)
		}
	}
}
