package vpne2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// The operator features (CRL, isolation, per-client config, NAT, auth
// command, tls-crypt-v2, kill, drain), each through `ovfwd run` with stock
// openvpn 2.6 clients, asserting on the client's own view (its log, tun0,
// routes) and on traffic.

// startRefused starts client i with profile p and returns it without
// waiting for it to come up.
func startRefused(t *testing.T, l *vpne2e.Lab, i int, p pki.Profile) *vpne2e.Client {
	t.Helper()
	profile, err := l.NewProfile(i, p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.StartClient(i, profile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitCond polls cond every 100 ms for up to d.
func waitCond(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cond()
}

// assertRefused: the stock client logs AUTH_FAILED with reason, exits on
// it (auth-retry none) and made one TLS attempt since logFrom.
func assertRefused(t *testing.T, c *vpne2e.Client, logFrom int, reason string) {
	t.Helper()
	text := func() string { return c.LogText()[logFrom:] }
	want := "AUTH: Received control message: AUTH_FAILED," + reason
	if !waitCond(30*time.Second, func() bool { return strings.Contains(text(), want) }) {
		t.Fatalf("client %d log lacks %q:\n%s", c.Index, want, text())
	}
	if !waitCond(15*time.Second, c.Exited) {
		t.Fatalf("client %d still runs after AUTH_FAILED", c.Index)
	}
	if !strings.Contains(text(), "SIGTERM[soft,auth-failure]") {
		t.Errorf("client %d did not exit on auth-failure:\n%s", c.Index, text())
	}
	if n := strings.Count(text(), "TLS: Initial packet from"); n != 1 {
		t.Errorf("client %d made %d TLS attempts, want 1", c.Index, n)
	}
}

func hasPeer(t *testing.T, srv *vpne2e.Server, name string) bool {
	for _, p := range peers(t, srv) {
		if p.Name == name {
			return true
		}
	}
	return false
}

// pingOK pings dst from c's namespace (3 tries, 1 s each).
func pingOK(c *vpne2e.Client, dst netip.Addr) bool {
	_, err := c.NS.Run("ping", "-c", "1", "-W", "1", dst.String())
	for i := 0; i < 2 && err != nil; i++ {
		_, err = c.NS.Run("ping", "-c", "1", "-W", "1", dst.String())
	}
	return err == nil
}

// rewriteConfig edits ovfwd's config file and sends SIGHUP.
func rewriteConfig(t *testing.T, srv *vpne2e.Server, edit func(string) string) {
	t.Helper()
	b, err := os.ReadFile(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(srv.Config, []byte(edit(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
	before := strings.Count(readLog(srv), "reloaded")
	if err := srv.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !waitCond(10*time.Second, func() bool { return strings.Count(readLog(srv), "reloaded") > before }) {
		t.Fatalf("ovfwd did not reload:\n%s", tail(readLog(srv), 3000))
	}
}

func readLog(srv *vpne2e.Server) string { b, _ := os.ReadFile(srv.Log); return string(b) }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestOperatorRefusals: a client without a common cipher, a disabled
// client ([[vpn.ccd]] disable) and a revoked one (crl) each get
// AUTH_FAILED with the reason, exit and never retry; a good client in the
// same lab connects and passes traffic.
func TestOperatorRefusals(t *testing.T) {
	var crl string
	l, srv, _ := setupWith(t, 1, func(l *vpne2e.Lab) vpne2e.ServerOptions {
		crl = filepath.Join(l.Dir, "crl.pem")
		// eve gets a certificate, then loses it before the server starts.
		if _, err := l.NewProfile(0, pki.Profile{Name: "eve"}); err != nil {
			t.Fatal(err)
		}
		p, err := pki.Revoke(l.PKI, "eve", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p, crl); err != nil {
			t.Fatal(err)
		}
		return vpne2e.ServerOptions{Ciphers: []string{"AES-256-GCM"}, VPN: fmt.Sprintf("crl = %q", crl),
			Tail: "[[vpn.ccd]]\ncommon_name = \"mallory\"\ndisable = true\n"}
	})
	for _, c := range []struct {
		p      pki.Profile
		reason string
	}{
		{pki.Profile{Name: "nocipher", Ciphers: "AES-128-GCM"}, "no common data cipher"},
		{pki.Profile{Name: "mallory"}, "client disabled"},
	} {
		from := len(clientLog(l, 0))
		cl := startRefused(t, l, 0, c.p)
		assertRefused(t, cl, from, c.reason)
	}
	// eve's profile holds the revoked certificate: reuse it as written.
	from := len(clientLog(l, 0))
	cl, err := l.StartClient(0, filepath.Join(l.PKI, pki.ClientsDir, "eve.ovpn"))
	if err != nil {
		t.Fatal(err)
	}
	assertRefused(t, cl, from, "certificate revoked")
	if !regexp.MustCompile(`level=WARN msg="vpn certificate revoked" event=revoked src=\S+ cn=eve serial=`).MatchString(readLog(srv)) {
		t.Errorf("ovfwd did not log the revoked certificate clearly:\n%s", tail(readLog(srv), 3000))
	}
	good := connect(t, l, 0, pki.Profile{Name: "alice"})
	if !pingOK(good, vpne2e.LANHost4) {
		t.Fatal("the accepted client cannot reach the LAN")
	}
}

func clientLog(l *vpne2e.Lab, i int) string {
	b, _ := os.ReadFile(filepath.Join(l.Dir, fmt.Sprintf("client%d.log", i)))
	return string(b)
}

// setupWith is setup with options that need the lab (its PKI) first; it
// also returns the ovfwd binary.
func setupWith(t *testing.T, n int, opts func(*vpne2e.Lab) vpne2e.ServerOptions) (*vpne2e.Lab, *vpne2e.Server, string) {
	t.Helper()
	l, bin := newLab(t, n, "openvpn", "ethtool", "ping")
	srv, err := l.StartOvfwd(bin, opts(l))
	if err != nil {
		t.Fatal(err)
	}
	return l, srv, bin
}

func opts(o vpne2e.ServerOptions) func(*vpne2e.Lab) vpne2e.ServerOptions {
	return func(*vpne2e.Lab) vpne2e.ServerOptions { return o }
}

// TestRevokeLive: `ovfwd pki revoke` on a connected client's name; after
// SIGHUP the client is told (AUTH_FAILED, it exits), ovfwd drops it and
// its traffic stops within 2 s. A second client revoked without a SIGHUP
// goes the same way once the CRL file changes.
func TestRevokeLive(t *testing.T) {
	var crl string
	l, srv, bin := setupWith(t, 2, func(l *vpne2e.Lab) vpne2e.ServerOptions {
		if _, err := l.NewProfile(0, pki.Profile{Name: "nobody-yet"}); err != nil {
			t.Fatal(err)
		}
		p, err := pki.Revoke(l.PKI, "nobody-yet", "")
		if err != nil {
			t.Fatal(err)
		}
		// The server starts on a copy, so that revoking alice below
		// changes a file it does not watch: the SIGHUP that points it at
		// pki/crl.pem is what applies it.
		b, _ := os.ReadFile(p)
		crl = filepath.Join(l.Dir, "crl-start.pem")
		if err := os.WriteFile(crl, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return vpne2e.ServerOptions{VPN: fmt.Sprintf("crl = %q", crl)}
	})
	a := connect(t, l, 0, pki.Profile{Name: "alice"})
	b := connect(t, l, 1, pki.Profile{Name: "bob"})
	for _, c := range []*vpne2e.Client{a, b} {
		if !pingOK(c, vpne2e.LANHost4) {
			t.Fatalf("client %d cannot reach the LAN before revocation", c.Index)
		}
	}
	if out, err := exec.Command(bin, "pki", "revoke", l.PKI, "alice").CombinedOutput(); err != nil {
		t.Fatalf("ovfwd pki revoke: %v\n%s", err, out)
	}
	time.Sleep(1500 * time.Millisecond) // past the watcher's interval: nothing may change
	if !hasPeer(t, srv, "alice") {
		t.Fatal("alice dropped before the SIGHUP (the server must not read an unconfigured file)")
	}
	hup := time.Now()
	rewriteConfig(t, srv, func(c string) string {
		return strings.Replace(c, crl, filepath.Join(l.PKI, pki.CRLFile), 1)
	})
	if !waitCond(2*time.Second-time.Since(hup), func() bool { return !hasPeer(t, srv, "alice") }) {
		t.Fatalf("alice still connected 2 s after SIGHUP: %+v", peers(t, srv))
	}
	t.Logf("alice dropped %v after SIGHUP", time.Since(hup).Round(10*time.Millisecond))
	if !waitCond(10*time.Second, func() bool { return strings.Contains(a.LogText(), "AUTH_FAILED,certificate revoked") }) {
		t.Errorf("alice's client was not told:\n%s", tail(a.LogText(), 2000))
	}
	if pingOK(a, vpne2e.LANHost4) {
		t.Error("alice still reaches the LAN after revocation")
	}
	if !pingOK(b, vpne2e.LANHost4) {
		t.Fatal("bob lost the LAN when alice was revoked")
	}
	// No SIGHUP: the file change alone.
	if out, err := exec.Command(bin, "pki", "revoke", l.PKI, "bob").CombinedOutput(); err != nil {
		t.Fatalf("ovfwd pki revoke: %v\n%s", err, out)
	}
	changed := time.Now()
	if !waitCond(3*time.Second, func() bool { return !hasPeer(t, srv, "bob") }) {
		t.Fatalf("bob still connected 3 s after the CRL changed: %+v", peers(t, srv))
	}
	t.Logf("bob dropped %v after the CRL file changed (no SIGHUP)", time.Since(changed).Round(10*time.Millisecond))
	if !waitCond(15*time.Second, b.Exited) {
		t.Error("bob's client still runs after being revoked")
	}
}

// TestClientToClient: by default one client cannot reach another's tunnel
// addresses (v4 and v6) and ovfwd counts the drops; with client_to_client
// = true after a SIGHUP it can; the LAN is reachable throughout.
func TestClientToClient(t *testing.T) {
	l, srv := setup(t, 2, vpne2e.ServerOptions{})
	a := connect(t, l, 0, pki.Profile{})
	b := connect(t, l, 1, pki.Profile{})
	for _, dst := range []netip.Addr{b.V4, b.V6} {
		if pingOK(a, dst) {
			t.Errorf("client 0 reached client 1 at %v with client_to_client off", dst)
		}
	}
	s, err := status.Fetch(srv.Status, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s.Drops["client_to_client"] == 0 {
		t.Errorf("no client_to_client drops counted: %v", s.Drops)
	}
	if !pingOK(a, vpne2e.LANHost4) || !pingOK(a, vpne2e.LANHost6) {
		t.Fatal("client 0 cannot reach the LAN")
	}
	rewriteConfig(t, srv, func(c string) string {
		return strings.Replace(c, "max_peers = 64", "max_peers = 64\nclient_to_client = true", 1)
	})
	for _, dst := range []netip.Addr{b.V4, b.V6} {
		if !pingOK(a, dst) {
			t.Errorf("client 0 cannot reach client 1 at %v with client_to_client on", dst)
		}
	}
}

// TestCCD: [[vpn.ccd]] fixes a client's addresses and pushes it a route of
// its own; the client's tun0 and routing table show them and traffic to
// the LAN flows; disabling it on SIGHUP disconnects it with AUTH_FAILED.
// Other clients get neither the fixed addresses nor the route.
func TestCCD(t *testing.T) {
	fixed4, fixed6 := netip.MustParseAddr("198.18.142.50"), netip.MustParseAddr("2001:db8:142::50")
	extra := netip.MustParsePrefix("198.18.150.0/24")
	ccd := fmt.Sprintf("[[vpn.ccd]]\ncommon_name = \"alice\"\nipv4 = %q\nipv6 = %q\npush_routes = [%q]\n", fixed4, fixed6, extra)
	l, srv := setup(t, 2, vpne2e.ServerOptions{Tail: ccd})
	b := connect(t, l, 1, pki.Profile{Name: "bob"})
	a := connect(t, l, 0, pki.Profile{Name: "alice"})
	if a.V4 != fixed4 || a.V6 != fixed6 {
		t.Fatalf("alice's tun0 has %v %v, want the fixed %v %v", a.V4, a.V6, fixed4, fixed6)
	}
	if b.V4 == fixed4 || b.V6 == fixed6 {
		t.Fatalf("bob got alice's fixed address: %v %v", b.V4, b.V6)
	}
	routeDev := func(c *vpne2e.Client) string {
		out, _ := c.NS.Run("ip", "route", "get", "198.18.150.7")
		return out
	}
	if r := routeDev(a); !strings.Contains(r, "dev tun0") {
		t.Errorf("alice's route to %v does not go into the tunnel: %s", extra, r)
	}
	if r := routeDev(b); strings.Contains(r, "dev tun0") {
		t.Errorf("bob was pushed alice's route: %s", r)
	}
	if !pingOK(a, vpne2e.LANHost4) || !pingOK(a, vpne2e.LANHost6) {
		t.Fatal("alice cannot reach the LAN from her fixed addresses")
	}
	rewriteConfig(t, srv, func(c string) string {
		return strings.Replace(c, "common_name = \"alice\"\n", "common_name = \"alice\"\ndisable = true\n", 1)
	})
	if !waitCond(10*time.Second, func() bool { return strings.Contains(a.LogText(), "AUTH_FAILED,client disabled") }) {
		t.Fatalf("alice was not told she is disabled:\n%s", tail(a.LogText(), 2000))
	}
	if hasPeer(t, srv, "alice") {
		t.Error("disabled alice is still a peer")
	}
	if !pingOK(b, vpne2e.LANHost4) {
		t.Error("bob lost the LAN")
	}
}

// TestDuplicateCN: without duplicate_cn a second session of one name
// replaces the first (openvpn's behaviour); with it both stay.
func TestDuplicateCN(t *testing.T) {
	l, srv := setup(t, 2, vpne2e.ServerOptions{})
	profile, err := l.NewProfile(0, pki.Profile{Name: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := l.StartClient(0, profile)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.WaitUp(45 * time.Second); err != nil {
		t.Fatal(err)
	}
	second, err := l.StartClient(1, profile)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.WaitUp(45 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !waitCond(5*time.Second, func() bool { return len(peers(t, srv)) == 1 }) {
		t.Fatalf("two sessions of one name without duplicate_cn: %+v", peers(t, srv))
	}
	if !pingOK(second, vpne2e.LANHost4) {
		t.Fatal("the newer session cannot reach the LAN")
	}
	if !strings.Contains(readLog(srv), "dropping its previous session") {
		t.Error("ovfwd did not log the replaced session")
	}
	first.Kill()
	second.Stop()
	rewriteConfig(t, srv, func(c string) string {
		return strings.Replace(c, "max_peers = 64", "max_peers = 64\nduplicate_cn = true", 1)
	})
	// The stopped clients' sessions linger until ping-restart; new ones
	// must not replace each other.
	first2, err := l.StartClient(0, profile)
	if err != nil {
		t.Fatal(err)
	}
	second2, err := l.StartClient(1, profile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*vpne2e.Client{first2, second2} {
		if err := c.WaitUp(45 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	for _, c := range []*vpne2e.Client{first2, second2} {
		if !pingOK(c, vpne2e.LANHost4) {
			t.Errorf("client %d of the shared name cannot reach the LAN with duplicate_cn", c.Index)
		}
	}
}

// TestFullTunnelDNS: redirect_gateway and dns/dns_domain: the stock
// client logs the pushed options and routes everything through tun0
// (IPv4 and IPv6), and still reaches the LAN host.
func TestFullTunnelDNS(t *testing.T) {
	l, _ := setup(t, 1, vpne2e.ServerOptions{VPN: "redirect_gateway = [\"ipv4\", \"ipv6\"]\n" +
		"dns = [\"198.18.141.53\", \"2001:db8:141::53\"]\ndns_domain = \"corp.example\""})
	// A client normally has a default route; openvpn needs it to keep the
	// server reachable outside the tunnel.
	for _, args := range [][]string{
		{"ip", "route", "add", "default", "via", vpne2e.ServerAddr.String()},
		{"ip", "-6", "route", "add", "default", "via", vpne2e.ServerAddr6.String()},
	} {
		if _, err := l.Clients[0].Run(args...); err != nil {
			t.Fatal(err)
		}
	}
	c := connect(t, l, 0, pki.Profile{})
	log := c.LogText()
	for _, want := range []string{"redirect-gateway def1 ipv6", "dhcp-option DNS 198.18.141.53", "dhcp-option DNS6 2001:db8:141::53", "dhcp-option DOMAIN corp.example"} {
		if !strings.Contains(log, want) {
			t.Errorf("client log lacks the pushed %q", want)
		}
	}
	for _, dst := range []string{"192.0.2.1", "203.0.113.9", "2001:db8:999::1"} {
		out, err := c.NS.Run("ip", "route", "get", dst)
		if err != nil || !strings.Contains(out, "dev tun0") {
			t.Errorf("client route to %s: %q (%v), want via tun0", dst, out, err)
		}
	}
	out, _ := c.NS.Run("ip", "route", "get", vpne2e.ServerAddr.String())
	if strings.Contains(out, "dev tun0") {
		t.Errorf("the server's own address routes into the tunnel: %s", out)
	}
	if !pingOK(c, vpne2e.LANHost4) || !pingOK(c, vpne2e.LANHost6) {
		t.Fatal("the full-tunnel client cannot reach the LAN")
	}
}

// TestPoolPersist: with pool_persist a client gets the address it had
// before a restart of ovfwd, even when it connects first.
func TestPoolPersist(t *testing.T) {
	var ipp string
	var o vpne2e.ServerOptions
	l, srv, bin := setupWith(t, 2, func(l *vpne2e.Lab) vpne2e.ServerOptions {
		// The daemon writes it: its state directory (/var/lib/ovfwd).
		ipp = filepath.Join(l.Dir, "state", "ipp.txt")
		o = vpne2e.ServerOptions{VPN: fmt.Sprintf("pool_persist = %q", ipp)}
		return o
	})
	first := connect(t, l, 0, pki.Profile{Name: "first"})
	late := connect(t, l, 1, pki.Profile{Name: "late"})
	was := late.V4
	if was == first.V4 {
		t.Fatal("two clients share an address")
	}
	late.Stop()
	first.Stop()
	srv.Stop()
	b, _ := os.ReadFile(ipp)
	if !strings.Contains(string(b), "late,"+was.String()) {
		t.Fatalf("%s does not remember late's %v:\n%s", ipp, was, b)
	}
	if _, err := l.StartOvfwd(bin, o); err != nil {
		t.Fatal(err)
	}
	if err := late.Start(); err != nil {
		t.Fatal(err)
	}
	if err := late.WaitUp(45 * time.Second); err != nil {
		t.Fatal(err)
	}
	if late.V4 != was {
		t.Errorf("after a restart late got %v, want its remembered %v", late.V4, was)
	}
}

// TestKill: `ovfwd kill NAME` makes the client reconnect (RESTART);
// `ovfwd kill -halt ADDR` makes it exit.
func TestKill(t *testing.T) {
	l, srv, bin := setupWith(t, 1, opts(vpne2e.ServerOptions{}))
	c := connect(t, l, 0, pki.Profile{Name: "alice"})
	if out, err := exec.Command(bin, "kill", "-s", srv.Status, "alice").CombinedOutput(); err != nil {
		t.Fatalf("ovfwd kill: %v\n%s", err, out)
	}
	if !waitCond(10*time.Second, func() bool { return strings.Contains(c.LogText(), "server-pushed-connection-reset") }) {
		t.Fatalf("client not told to restart:\n%s", tail(c.LogText(), 2000))
	}
	if !waitCond(30*time.Second, func() bool { return strings.Count(c.LogText(), "Initialization Sequence Completed") >= 2 }) {
		t.Fatal("client did not reconnect after kill")
	}
	if !waitCond(5*time.Second, func() bool { return hasPeer(t, srv, "alice") }) {
		t.Fatal("alice is not back")
	}
	v4, _, _ := tunAddrsOf(c)
	if out, err := exec.Command(bin, "kill", "-s", srv.Status, "-halt", v4.String()).CombinedOutput(); err != nil {
		t.Fatalf("ovfwd kill -halt: %v\n%s", err, out)
	}
	if !waitCond(15*time.Second, c.Exited) {
		t.Fatalf("client still runs after kill -halt:\n%s", tail(c.LogText(), 2000))
	}
	if out, err := exec.Command(bin, "kill", "-s", srv.Status, "nobody").CombinedOutput(); err == nil {
		t.Errorf("kill of an unknown name succeeded: %s", out)
	}
}

func tunAddrsOf(c *vpne2e.Client) (netip.Addr, netip.Addr, error) {
	out, err := c.NS.Run("ip", "-4", "-o", "addr", "show", "dev", "tun0")
	if err != nil {
		return netip.Addr{}, netip.Addr{}, err
	}
	for _, f := range strings.Fields(out) {
		if p, err := netip.ParsePrefix(f); err == nil {
			return p.Addr(), netip.Addr{}, nil
		}
	}
	return netip.Addr{}, netip.Addr{}, fmt.Errorf("no address on tun0: %s", out)
}

// verifyScript is a user-pass-verify command that admits alice/secret and
// slow*/secret (after a second) and refuses everyone else.
func verifyScript(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ovfwd-auth-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "verify.sh")
	script := "#!/bin/sh\nu=$(sed -n 1p \"$1\"); p=$(sed -n 2p \"$1\")\ncase \"$u:$p\" in\nalice:secret) exit 0;;\nslow*:secret) sleep 1; exit 0;;\nesac\nexit 1\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// userPassProfile is a stock client profile with auth-user-pass.
func userPassProfile(t *testing.T, l *vpne2e.Lab, i int, p pki.Profile, user, pass string) string {
	t.Helper()
	creds := filepath.Join(l.Dir, fmt.Sprintf("creds-%s-%d", user, i))
	if err := os.WriteFile(creds, []byte(user+"\n"+pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Extra = append(p.Extra, "auth-user-pass "+creds)
	profile, err := l.NewProfile(i, p)
	if err != nil {
		t.Fatal(err)
	}
	return profile
}

// TestUserPass: auth_user_pass_verify with verify_client_cert = "none"
// and username_as_common_name. A stock client without any certificate
// logs in with the right password and is named by its username; a wrong
// password gets AUTH_FAILED and the client exits without retrying. Then
// 100 clients log in at once through the same command made to take 1 s:
// all are in within 5 s, and the stock client's tunnel keeps passing
// traffic (no ping lost) meanwhile.
func TestUserPass(t *testing.T) {
	script := verifyScript(t)
	l, srv, _ := setupWith(t, 2, opts(vpne2e.ServerOptions{VPN: fmt.Sprintf(
		"auth_user_pass_verify = [%q]\nverify_client_cert = \"none\"\nusername_as_common_name = true\nauth_concurrency = 128\nhandshake_rate = 1000\nmax_half_open = 512\nmax_half_open_per_source = 512\nauth_fail_limit = 0", script), MaxPeers: 256}))
	wrong, err := l.StartClient(0, userPassProfile(t, l, 0, pki.Profile{Name: "nocert-wrong", NoCert: true}, "alice", "guess"))
	if err != nil {
		t.Fatal(err)
	}
	assertRefused(t, wrong, 0, "authentication failed")
	alice, err := l.StartClient(0, userPassProfile(t, l, 0, pki.Profile{Name: "nocert", NoCert: true}, "alice", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.WaitUp(45 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !waitCond(5*time.Second, func() bool { return hasPeer(t, srv, "alice") }) {
		t.Fatalf("no peer named by its username: %+v", peers(t, srv))
	}
	if strings.Contains(readLog(srv), "secret") || strings.Contains(readLog(srv), "guess") {
		t.Error("a password reached ovfwd's log")
	}

	// 100 logins at once from the second client namespace (in-process
	// clients), while alice pings the LAN host every 100 ms.
	const n = 100
	cfgs := make([]control.ClientConfig, n)
	for i := range cfgs {
		path, err := pki.Client(l.PKI, fmt.Sprintf("load%d", i), netip.AddrPortFrom(vpne2e.ServerAddr, vpne2e.VPNPort).String())
		if err != nil {
			t.Fatal(err)
		}
		text, _ := os.ReadFile(path)
		if cfgs[i], err = control.ParseProfile(text); err != nil {
			t.Fatal(err)
		}
		cfgs[i].Username, cfgs[i].Password = fmt.Sprintf("slow%d", i), "secret"
	}
	pinger, err := alice.NS.Start(nil, nil, "ping", "-i", "0.1", "-w", "20", "-c", "120", vpne2e.LANHost4.String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	clients := make([]*control.Client, n)
	errs := make([]error, n)
	done := make(chan struct{})
	for i := range cfgs {
		go func() {
			defer func() { done <- struct{}{} }()
			errs[i] = l.Clients[1].Do(func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				c, err := control.Dial(ctx, cfgs[i])
				clients[i] = c
				return err
			})
		}()
	}
	for range cfgs {
		<-done
	}
	took := time.Since(start)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("login %d: %v", i, err)
		}
	}
	t.Logf("%d concurrent logins through a 1 s command took %v", n, took.Round(time.Millisecond))
	if took >= 5*time.Second {
		t.Errorf("%d concurrent logins took %v, want < 5 s", n, took)
	}
	_ = pinger.Wait()
	t.Logf("alice's ping during the logins: exit %d", pinger.ProcessState.ExitCode())
	if pinger.ProcessState.ExitCode() != 0 {
		t.Error("alice's tunnel lost pings while the logins ran")
	}
	if got := len(peers(t, srv)); got != n+1 {
		t.Errorf("%d peers, want %d", got, n+1)
	}
}

// TestTLSAuthSHA256: tls_auth_digest matches a server.conf's `auth
// SHA256` with tls-auth; the stock client with the same line connects.
func TestTLSAuthSHA256(t *testing.T) {
	l, _ := setup(t, 1, vpne2e.ServerOptions{TLSAuth: true, VPN: `tls_auth_digest = "SHA256"`})
	c := connect(t, l, 0, pki.Profile{TLSAuth: true, Auth: "SHA256"})
	if !pingOK(c, vpne2e.LANHost4) {
		t.Fatal("no traffic over the tls-auth SHA256 tunnel")
	}
}

// TestTLSCryptV2: ovfwd with a tls-crypt-v2 server key made by openvpn
// (`--genkey tls-crypt-v2-server`) serves a stock client whose key openvpn
// made (`--genkey tls-crypt-v2-client`) and one whose profile came from
// `ovfwd pki client` (its own key, wrapped by ovfwd); both pass traffic.
// A client with the shared tls-crypt key of a v1 profile gets nowhere.
func TestTLSCryptV2(t *testing.T) {
	var srvKey string
	l, srv, bin := setupWith(t, 2, func(l *vpne2e.Lab) vpne2e.ServerOptions {
		srvKey = filepath.Join(l.PKI, pki.TLSCryptV2File)
		if out, err := exec.Command("openvpn", "--genkey", "tls-crypt-v2-server", srvKey).CombinedOutput(); err != nil {
			t.Fatalf("openvpn --genkey tls-crypt-v2-server: %v\n%s", err, out)
		}
		return vpne2e.ServerOptions{TLSCryptV2: srvKey}
	})
	cliKey := filepath.Join(l.Dir, "foreign-v2.key")
	if out, err := exec.Command("openvpn", "--tls-crypt-v2", srvKey, "--genkey", "tls-crypt-v2-client", cliKey).CombinedOutput(); err != nil {
		t.Fatalf("openvpn --genkey tls-crypt-v2-client: %v\n%s", err, out)
	}
	keyText, _ := os.ReadFile(cliKey)
	foreign := connect(t, l, 0, pki.Profile{Name: "foreign-v2", TLSCryptV2: keyText, Extra: []string{"reneg-sec 8"}})
	if b, _ := os.ReadFile(foreign.Profile); !strings.Contains(string(b), "<tls-crypt-v2>") || strings.Contains(string(b), "<tls-crypt>") {
		t.Fatal("the foreign client's profile is not a tls-crypt-v2 profile")
	}
	out, err := exec.Command(bin, "pki", "client", l.PKI, "own-v2", "-remote", netip.AddrPortFrom(vpne2e.ServerAddr, vpne2e.VPNPort).String()).CombinedOutput()
	if err != nil {
		t.Fatalf("ovfwd pki client: %v\n%s", err, out)
	}
	profile := strings.TrimSpace(strings.Split(string(out), "\n")[0])
	if b, _ := os.ReadFile(profile); !strings.Contains(string(b), "<tls-crypt-v2>") || strings.Contains(string(b), "<tls-crypt>") {
		t.Fatalf("ovfwd pki client did not write a tls-crypt-v2 profile:\n%s", b)
	}
	own, err := l.StartClient(1, profile)
	if err != nil {
		t.Fatal(err)
	}
	if err := own.WaitUp(45 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*vpne2e.Client{foreign, own} {
		if !pingOK(c, vpne2e.LANHost4) || !pingOK(c, vpne2e.LANHost6) {
			t.Fatalf("client %d cannot reach the LAN over tls-crypt-v2", c.Index)
		}
	}
	if got := len(peers(t, srv)); got != 2 {
		t.Errorf("%d peers, want 2", got)
	}
	// Renegotiation runs on the client's own key too (key_id > 0).
	if !waitCond(30*time.Second, func() bool { return foreign.KeyInstalls() >= 2 }) {
		t.Fatalf("the tls-crypt-v2 client did not renegotiate: %d keys", foreign.KeyInstalls())
	}
	if !pingOK(foreign, vpne2e.LANHost4) {
		t.Fatal("no traffic after renegotiation over tls-crypt-v2")
	}
	// A client key wrapped by another server key is dropped before any
	// state: the client never gets a reply.
	otherSrv, otherCli := filepath.Join(l.Dir, "other-srv.key"), filepath.Join(l.Dir, "other-cli.key")
	for _, args := range [][]string{{"--genkey", "tls-crypt-v2-server", otherSrv}, {"--tls-crypt-v2", otherSrv, "--genkey", "tls-crypt-v2-client", otherCli}} {
		if out, err := exec.Command("openvpn", args...).CombinedOutput(); err != nil {
			t.Fatalf("openvpn %v: %v\n%s", args, err, out)
		}
	}
	foreign.Stop()
	otherText, _ := os.ReadFile(otherCli)
	profileBad, err := l.NewProfile(0, pki.Profile{Name: "wrong-v2", TLSCryptV2: otherText})
	if err != nil {
		t.Fatal(err)
	}
	before := statusDrops(t, srv)["control_wrap_auth"]
	from := len(foreign.LogText())
	bad, err := l.StartClient(0, profileBad)
	if err != nil {
		t.Fatal(err)
	}
	if !waitCond(10*time.Second, func() bool { return statusDrops(t, srv)["control_wrap_auth"] > before }) {
		t.Fatalf("no wrap_auth drop for a client key of another server: %v", statusDrops(t, srv))
	}
	time.Sleep(2 * time.Second)
	if strings.Contains(bad.LogText()[from:], "Initialization Sequence Completed") || strings.Contains(bad.LogText()[from:], "TLS: Initial packet from") {
		t.Error("a client with another server's key got an answer")
	}
}

func statusDrops(t *testing.T, srv *vpne2e.Server) status.Counters {
	s, err := status.Fetch(srv.Status, 2*time.Second)
	if err != nil || s.VPN == nil {
		t.Fatalf("status: %v", err)
	}
	return s.VPN.Drops
}
