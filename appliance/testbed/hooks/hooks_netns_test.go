package hooks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

const tag = "hok"

type lab struct {
	*vpne2e.Lab
	bin, dir string
	profile  string
}

func setup(t *testing.T) *lab {
	t.Helper()
	nstest.RequireRoot(t)
	for _, tool := range []string{"openvpn", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (.ci/install-deps installs it)", tool)
		}
	}
	bin := nstest.BuildOvfwd(t)
	dir := unittest.TempDir(t, unittest.Load(t))
	l, err := vpne2e.NewLab(tag, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	l.Logf = t.Logf
	t.Cleanup(func() {
		l.Close()
		if t.Failed() {
			for _, p := range []string{"ovfwd.log", "openvpn-server.log", "client0.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, p))
				t.Logf("--- %s (end):\n%s", p, tail(string(b), 4000))
			}
		}
	})
	// explicit-exit-notify: the server sees the client leave at once, so
	// client-disconnect runs without waiting for ping-restart.
	profile, err := l.NewProfile(0, pki.Profile{Name: "alice", Extra: []string{"explicit-exit-notify 1"}})
	if err != nil {
		t.Fatal(err)
	}
	return &lab{Lab: l, bin: bin, dir: dir, profile: profile}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// writeScript puts an executable shell script in the lab's directory,
// where the daemon's user may run it.
func (l *lab) writeScript(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(l.dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// outDir is a directory both servers' scripts may write to (ovfwd's run
// as the unit's user, openvpn's as root).
func (l *lab) outDir(t *testing.T, name string) string {
	t.Helper()
	d := filepath.Join(l.dir, name)
	if err := os.Mkdir(d, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

func waitFile(path string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

// dump is a script that writes its environment to OUT.SCRIPT_TYPE (and
// OUT.learn-address.OP) and appends its arguments to OUT.args.
const dump = `out=$1; shift
case $script_type in
learn-address) f=$out.learn-address.$1 ;;
*) f=$out.$script_type ;;
esac
env | sort > "$f.tmp" && mv "$f.tmp" "$f"
[ "$script_type" = learn-address ] && echo "$*" >> "$out.args"
exit 0`

func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// run connects alice to a server started by start, waits for the
// scripts' files, disconnects her and waits for client-disconnect's.
func (l *lab) run(t *testing.T, out string, start func() (stop func())) {
	t.Helper()
	stop := start()
	c, err := l.StartClient(0, l.profile)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitUp(45 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".client-connect", ".learn-address.add"} {
		if !waitFile(out+f, 10*time.Second) {
			t.Fatalf("no %s%s", out, f)
		}
	}
	if _, err := c.NS.Run("ping", "-c", "3", "-i", "0.2", "-W", "2", vpne2e.LANHost4.String()); err != nil {
		t.Fatalf("alice cannot reach the LAN: %v", err)
	}
	c.Stop()
	if !waitFile(out+".client-disconnect", 15*time.Second) {
		t.Fatalf("no client-disconnect from %s", out)
	}
	stop()
}

// The variables whose values must be the same under both servers for the
// same client, and those that exist under both but differ between any two
// runs.
var (
	sameValue = []string{
		"script_type", "common_name", "trusted_ip", "untrusted_ip", "ifconfig_pool_remote_ip", "ifconfig_pool_netmask",
		"ifconfig_pool_remote_ip6", "X509_0_CN", "tls_serial_0", "tls_serial_hex_0",
		"IV_VER", "IV_PLAT", "IV_PROTO", "IV_CIPHERS", "IV_NCP", "dev_type", "proto_1", "local_port_1", "tun_mtu",
		"ifconfig_local", "ifconfig_netmask", "ifconfig_ipv6_local", "ifconfig_ipv6_netbits", "daemon", "daemon_log_redirect",
		"tls_digest_0", "tls_digest_sha256_0", "ifconfig_pool_local_ip6", "remote_port_1", "redirect_gateway",
	}
	present = []string{"trusted_port", "untrusted_port", "time_unix", "time_ascii", "daemon_pid", "config", "dev", "daemon_start_time"}
	perType = map[string][]string{
		"client-connect":    {"client_connect_config_file", "client_connect_deferred_file"},
		"client-disconnect": {"bytes_received", "bytes_sent", "time_duration"},
	}
)

// TestEnvironmentAsOpenVPN runs the dump script as client-connect,
// client-disconnect and learn-address under ovfwd and under openvpn for
// the same client and compares what it was given.
func TestEnvironmentAsOpenVPN(t *testing.T) {
	l := setup(t)
	script := l.writeScript(t, "dump", dump)
	outs := l.outDir(t, "env")
	ours, theirs := filepath.Join(outs, "ovfwd"), filepath.Join(outs, "openvpn")
	l.run(t, ours, func() func() {
		cmd := func(out string) string { return fmt.Sprintf("[%q, %q]", script, out) }
		s, err := l.StartOvfwd(l.bin, vpne2e.ServerOptions{Ciphers: []string{"AES-256-GCM"},
			VPN: fmt.Sprintf("client_connect = %s\nclient_disconnect = %s\nlearn_address = %s\n", cmd(ours), cmd(ours), cmd(ours))})
		if err != nil {
			t.Fatal(err)
		}
		return s.Stop
	})
	l.run(t, theirs, func() func() {
		s, err := l.StartOpenVPN(vpne2e.ServerOptions{Ciphers: []string{"AES-256-GCM"}, OpenVPN: []string{"script-security 2",
			fmt.Sprintf("client-connect \"%s %s\"", script, theirs), fmt.Sprintf("client-disconnect \"%s %s\"", script, theirs),
			fmt.Sprintf("learn-address \"%s %s\"", script, theirs)}})
		if err != nil {
			t.Fatal(err)
		}
		return s.Stop
	})
	for _, typ := range []string{"client-connect", "client-disconnect", "learn-address.add"} {
		a, b := readEnv(t, ours+"."+typ), readEnv(t, theirs+"."+typ)
		for _, k := range sameValue {
			if _, ok := b[k]; !ok {
				t.Errorf("%s: openvpn does not set %s", typ, k)
			} else if a[k] != b[k] {
				t.Errorf("%s: %s: ovfwd %q, openvpn %q", typ, k, a[k], b[k])
			}
		}
		for _, k := range append(slices.Clone(present), perType[typ]...) {
			if _, ok := a[k]; !ok {
				t.Errorf("%s: ovfwd does not set %s (openvpn: %q)", typ, k, b[k])
			} else if _, ok := b[k]; !ok {
				t.Errorf("%s: openvpn does not set %s", typ, k)
			}
		}
		var only []string
		for k := range b {
			if _, ok := a[k]; !ok {
				only = append(only, k)
			}
		}
		var ovfwdOnly []string
		for k := range a {
			if _, ok := b[k]; !ok {
				ovfwdOnly = append(ovfwdOnly, k)
			}
		}
		sort.Strings(only)
		sort.Strings(ovfwdOnly)
		t.Logf("%s: only openvpn sets %s; only ovfwd sets %s", typ, strings.Join(only, " "), strings.Join(ovfwdOnly, " "))

	}
	// learn-address: the same operations on the same addresses.
	args := func(p string) []string {
		b, _ := os.ReadFile(p + ".args")
		s := strings.Split(strings.TrimSpace(string(b)), "\n")
		sort.Strings(s)
		return s
	}
	if a, b := args(ours), args(theirs); !slices.Equal(a, b) {
		t.Errorf("learn-address arguments: ovfwd %q, openvpn %q", a, b)
	} else {
		t.Logf("learn-address arguments (both): %q", a)
	}
}

// TestRefusedAndDeferred: a client-connect that exits 1 refuses the stock
// client with AUTH_FAILED (and is counted); one that defers admits it
// once its background process answered, with the route the file pushed.
func TestRefusedAndDeferred(t *testing.T) {
	l := setup(t)
	refuse := l.writeScript(t, "refuse", "exit 1")
	s, err := l.StartOvfwd(l.bin, vpne2e.ServerOptions{Ciphers: []string{"AES-256-GCM"}, VPN: fmt.Sprintf("client_connect = [%q]\n", refuse)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.StartClient(0, l.profile)
	if err != nil {
		t.Fatal(err)
	}
	ok := false
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && !ok; time.Sleep(200 * time.Millisecond) {
		ok = strings.Contains(c.LogText(), "AUTH_FAILED")
	}
	if !ok {
		t.Fatalf("the client was not told AUTH_FAILED:\n%s", tail(c.LogText(), 3000))
	}
	c.Kill()
	b, _ := os.ReadFile(s.Log)
	if !strings.Contains(string(b), "client-connect for \\\"alice\\\" failed") && !strings.Contains(string(b), `client-connect for "alice" failed`) {
		t.Errorf("no log line for the failed client-connect:\n%s", tail(string(b), 3000))
	}
	s.Stop()

	const pushed = "198.18.222.0"
	deferred := l.writeScript(t, "defer", `echo 2 > "$client_connect_deferred_file"
( sleep 2; echo 'push "route `+pushed+` 255.255.255.0"' > "$client_connect_config_file"; echo 1 > "$client_connect_deferred_file" ) >/dev/null 2>&1 &
exit 0`)
	if s, err = l.StartOvfwd(l.bin, vpne2e.ServerOptions{Ciphers: []string{"AES-256-GCM"}, VPN: fmt.Sprintf("client_connect = [%q]\n", deferred)}); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitUp(45 * time.Second); err != nil {
		t.Fatal(err)
	}
	routes, err := c.NS.Run("ip", "route", "show", pushed+"/24")
	if err != nil || !strings.Contains(routes, "tun0") {
		t.Errorf("the deferred configuration's route is not on the client: %q %v", routes, err)
	}
	c.Stop()
}

// hundredBound is how long 100 clients may take to connect through a
// client-connect that sleeps 1 s: with hook_concurrency 64 the hooks need
// 2 s, the handshakes a few more on a loaded machine; hooks run one after
// the other would need 100 s.
const hundredBound = 30 * time.Second

// TestHundredConnectsThroughSlowHook: 100 ovfwd clients (vpn/control's,
// as `ovfwd bench vpn` uses) connect at once through a client-connect that
// takes 1 s; all are admitted within hundredBound, and each ran the hook.
func TestHundredConnectsThroughSlowHook(t *testing.T) {
	l := setup(t)
	ran := filepath.Join(l.outDir(t, "slowout"), "ran")
	slow := l.writeScript(t, "slow", `sleep 1; echo "$common_name" >> `+ran)
	s, err := l.StartOvfwd(l.bin, vpne2e.ServerOptions{Ciphers: []string{"AES-256-GCM"}, MaxPeers: 128,
		VPN: fmt.Sprintf("client_connect = [%q]\nhook_concurrency = 64\nmax_half_open = 1024\nmax_half_open_per_source = 1024\nhandshake_rate = 100000\nhandshake_timeout = \"60s\"\n", slow)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	const n = 100
	cfgs := make([]control.ClientConfig, n)
	for i := range cfgs {
		path, err := pki.Client(l.PKI, fmt.Sprintf("load%d", i), fmt.Sprintf("%s:%d", vpne2e.ServerAddr, vpne2e.VPNPort))
		if err != nil {
			t.Fatal(err)
		}
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if cfgs[i], err = control.ParseProfile(text); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*hundredBound)
	defer cancel()
	start := time.Now()
	clients := make([]*control.Client, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.Clients[0].Do(func() error {
				var err error
				clients[i], err = control.Dial(ctx, cfgs[i])
				return err
			})
		}()
	}
	wg.Wait()
	took := time.Since(start)
	for _, c := range clients {
		if c != nil {
			defer c.Close()
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("not all connected: %v", err)
	}
	b, _ := os.ReadFile(ran)
	if got := len(strings.Fields(string(b))); got != n {
		t.Errorf("client-connect ran %d times, want %d", got, n)
	}
	t.Logf("%d clients connected through a 1 s client-connect in %v (bound %v)", n, took.Round(time.Millisecond), hundredBound)
	if took > hundredBound {
		t.Errorf("%d connects took %v, more than %v", n, took, hundredBound)
	}
}
