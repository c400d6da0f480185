package hooks

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func testClient() *Client {
	return &Client{CommonName: "alice", Username: "al", Real: netip.MustParseAddrPort("198.18.0.2:40000"),
		VPNIPv4: netip.MustParseAddr("198.19.0.2"), Bits4: 24, VPNIPv6: netip.MustParseAddr("2001:db8::1000"), Bits6: 64,
		Cert:  &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, SerialNumber: big.NewInt(0x1a2b)},
		Since: time.Unix(1700000000, 0), PeerInfo: "IV_VER=2.6.14\nIV_PLAT=linux\nbogus line\nIV_BAD-NAME=x\n"}
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestEnv(t *testing.T) {
	s := Server{Dev: "ovfwd", Config: "/etc/ovfwd/ovfwd.toml"}
	c := testClient()
	m := envMap(s.DisconnectEnv(c, 1234, 5678, c.Since.Add(90*time.Second+400*time.Millisecond)))
	want := map[string]string{
		"script_type": "client-disconnect", "common_name": "alice", "username": "al",
		"trusted_ip": "198.18.0.2", "trusted_port": "40000", "untrusted_ip": "198.18.0.2", "untrusted_port": "40000",
		"ifconfig_pool_remote_ip": "198.19.0.2", "ifconfig_pool_netmask": "255.255.255.0",
		"ifconfig_pool_remote_ip6": "2001:db8::1000", "ifconfig_pool_ip6_netbits": "64",
		"time_unix": "1700000000", "time_ascii": c.Since.Local().Format("2006-01-02 15:04:05"),
		"bytes_received": "1234", "bytes_sent": "5678", "time_duration": "90",
		"X509_0_CN": "alice", "tls_serial_0": "6699", "tls_serial_hex_0": "1a:2b",
		"IV_VER": "2.6.14", "IV_PLAT": "linux", "dev": "ovfwd", "config": "/etc/ovfwd/ovfwd.toml",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	if _, ok := m["IV_BAD-NAME"]; ok {
		t.Error("a peer-info name that is not a shell name reached the environment")
	}
	c.Real = netip.MustParseAddrPort("[2001:db8:1::2]:5000")
	c.CommonName = "evil\nX=1"
	m = envMap(s.Env("client-connect", c))
	if m["trusted_ip6"] != "2001:db8:1::2" || m["trusted_ip"] != "" || m["common_name"] != "evil_X=1" {
		t.Errorf("IPv6 source or control characters: %v", m)
	}
}

func TestParseConfig(t *testing.T) {
	d, err := ParseConfig([]byte(`# comment
ifconfig-push 198.19.0.50 255.255.255.0
ifconfig-ipv6-push 2001:db8::50/64 2001:db8::1
push "route 10.1.0.0 255.255.0.0"
push "dhcp-option DNS 198.18.0.53"
iroute 10.9.0.0 255.255.255.0
iroute-ipv6 2001:db8:9::/48
comp-lzo
`))
	if err != nil {
		t.Fatal(err)
	}
	if d.IPv4 != netip.MustParseAddr("198.19.0.50") || d.IPv6 != netip.MustParseAddr("2001:db8::50") || d.Disable ||
		!slices.Equal(d.Push, []string{"route 10.1.0.0 255.255.0.0", "dhcp-option DNS 198.18.0.53"}) ||
		!slices.Equal(d.IRoutes, []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24"), netip.MustParsePrefix("2001:db8:9::/48")}) ||
		!slices.Equal(d.Ignored, []string{"comp-lzo"}) {
		t.Errorf("%+v", d)
	}
	if d, err := ParseConfig([]byte("disable\n")); err != nil || !d.Disable {
		t.Errorf("disable: %+v %v", d, err)
	}
	for _, bad := range []string{
		"ifconfig-push 2001:db8::1", "iroute 10.0.0.0 255.0.255.0", "push \"route 1.2.3.0 255.255.255.0,ping 1\"",
		"iroute-ipv6 10.0.0.0/8", "push", "<ca>\nx\n</ca>", "ifconfig-push",
	} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("ifconfig-push 198.19.0.5 255.255.255.0\npush \"route 10.0.0.0 255.0.0.0\"\niroute 10.1.0.0 255.255.0.0\ndisable\n"))
	f.Add([]byte("iroute-ipv6 2001:db8::/32\n'x\"\\\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseConfig(data)
		if err != nil {
			return
		}
		if d.IPv4.IsValid() && !d.IPv4.Is4() || d.IPv6.IsValid() && !d.IPv6.Is6() {
			t.Fatalf("wrong family: %+v", d)
		}
		for _, p := range d.Push {
			if strings.ContainsAny(p, ",\n\r\x00") || p == "" {
				t.Fatalf("push %q would not stay one option", p)
			}
		}
		for _, p := range d.IRoutes {
			if p != p.Masked() {
				t.Fatalf("iroute %v has host bits", p)
			}
		}
	})
}

func newHooks(t *testing.T) *Hooks {
	h := &Hooks{Server: Server{Dev: "ovfwd"}, Timeout: 5 * time.Second, Runner: &Runner{Concurrency: 4}, Logf: t.Logf}
	t.Cleanup(h.Close)
	return h
}

func TestConnectConfigFile(t *testing.T) {
	h := newHooks(t)
	out := filepath.Join(t.TempDir(), "env")
	h.ClientConnect = []string{script(t, `env > `+out+`; [ "$1" = "$client_connect_config_file" ] || exit 3
echo 'push "route 10.1.0.0 255.255.0.0"' > "$1"`)}
	d, err := h.RunConnect(context.Background(), testClient())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Push, []string{"route 10.1.0.0 255.255.0.0"}) {
		t.Errorf("%+v", d)
	}
	b, _ := os.ReadFile(out)
	if m := envMap(strings.Split(string(b), "\n")); m["script_type"] != "client-connect" || m["common_name"] != "alice" || m["client_connect_deferred_file"] == "" {
		t.Errorf("environment: %v", m)
	}
}

func TestConnectRefusals(t *testing.T) {
	for name, body := range map[string]string{
		"exit 1":        "exit 1",
		"deferred 0":    `echo 0 > "$client_connect_deferred_file"`,
		"bad file":      `echo "ifconfig-push nonsense" > "$1"`,
		"deferred late": `echo 2 > "$client_connect_deferred_file"`,
		"slow":          "sleep 30",
	} {
		t.Run(name, func(t *testing.T) {
			h := newHooks(t)
			h.Timeout = 500 * time.Millisecond
			h.ClientConnect = []string{script(t, body)}
			if _, err := h.RunConnect(context.Background(), testClient()); err == nil {
				t.Fatal("admitted")
			}
			if h.Connect.Failed.Load()+h.Connect.TimedOut.Load() != 1 {
				t.Errorf("not counted: %d failed, %d timed out", h.Connect.Failed.Load(), h.Connect.TimedOut.Load())
			}
		})
	}
}

// A deferred client-connect: the script writes 2 and leaves a background
// process that writes the configuration and then 1.
func TestConnectDeferred(t *testing.T) {
	h := newHooks(t)
	h.ClientConnect = []string{script(t, `echo 2 > "$client_connect_deferred_file"
( sleep 0.3; echo "iroute 10.7.0.0 255.255.255.0" > "$client_connect_config_file"; echo 1 > "$client_connect_deferred_file" ) >/dev/null 2>&1 &
exit 0`)}
	start := time.Now()
	d, err := h.RunConnect(context.Background(), testClient())
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 300*time.Millisecond || !slices.Equal(d.IRoutes, []netip.Prefix{netip.MustParsePrefix("10.7.0.0/24")}) {
		t.Errorf("answered before the background process: %+v", d)
	}
}

// Connects beyond the concurrency wait for a slot: with 4 slots no more
// than 4 scripts ever run at once.
func TestConnectConcurrency(t *testing.T) {
	h := newHooks(t)
	dir := t.TempDir()
	h.ClientConnect = []string{script(t, `mkdir `+dir+`/$$; n=$(ls `+dir+` | wc -l); echo $n >> `+dir+`.max; sleep 0.2; rmdir `+dir+`/$$`)}
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.RunConnect(context.Background(), testClient()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, _ := os.ReadFile(dir + ".max")
	for _, l := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(l); err != nil || n > 4 {
			t.Fatalf("%s scripts ran at once (limit 4)", l)
		}
	}
	if n := len(strings.Fields(string(b))); n != 12 {
		t.Fatalf("%d scripts ran, want 12", n)
	}
}

// learn-address calls for one address keep their order; delete carries
// no common name; client-disconnect gets the totals.
func TestBackground(t *testing.T) {
	h := newHooks(t)
	log := filepath.Join(t.TempDir(), "log")
	h.LearnAddress = []string{script(t, `echo "$script_type $*" >> `+log)}
	h.ClientDisconnect = []string{script(t, `echo "$script_type $bytes_received $bytes_sent $time_duration" >> `+log)}
	c := testClient()
	a := netip.MustParsePrefix("198.19.0.2/32")
	h.Learned("add", a, c)
	h.Learned("delete", a, c)
	h.Disconnected(c, 10, 20, c.Since.Add(5*time.Second))
	h.Close()
	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if !slices.Contains(lines, "client-disconnect 10 20 5") {
		t.Errorf("disconnect: %q", lines)
	}
	i, j := slices.Index(lines, "learn-address add 198.19.0.2 alice"), slices.Index(lines, "learn-address delete 198.19.0.2")
	if i < 0 || j < i {
		t.Errorf("learn-address: %q", lines)
	}
	h.Learned("add", a, c) // after Close: dropped, counted
	if h.Learn.Dropped.Load() != 1 {
		t.Errorf("dropped %d", h.Learn.Dropped.Load())
	}
}

func TestTimeoutKills(t *testing.T) {
	r := &Runner{Concurrency: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	release, err := r.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := Exec(ctx, []string{"/bin/sleep", "30"}, nil, nil); !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v", err)
	}
	if _, err := r.Acquire(ctx); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a second slot: %v", err)
	}
}
