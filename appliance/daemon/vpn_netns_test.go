package daemon_test

import (
	"context"
	"encoding/json"
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
	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

const vpnConfig = `
[appliance]
mode = "router"
mss_clamp = 1300

[[port]]
name = "p0"
driver = "afxdp-copy"
ifname = "p0"
addresses = ["198.18.50.254/24"]

[[port]]
name = "p1"
driver = "afxdp-copy"
ifname = "p1"
addresses = ["198.18.51.254/24", "2001:db8:51::fe/64"]

[vpn]
enabled = true
port = 1194
ca = "state/pki/ca.crt"
cert = "state/pki/server.crt"
key = "state/pki/server.key"
tls_crypt = "state/pki/tls-crypt.key"
pool_v4 = "198.19.50.0/24"
pool_v6 = "2001:db8:150::/112"
push_routes = ["198.18.51.0/24", "2001:db8:51::/64"]
keepalive_interval = "2s"
keepalive_timeout = "20s"

[metrics]
listen = ""

[status]
socket = "%s"

[log]
level = "%s"
`

// TestDaemonVPNReload: a stock openvpn 2.6 client connects to ovfwd on
// AF_XDP ports, reaches host B through the tunnel, and a TCP transfer
// through the tunnel survives a SIGHUP that changes routes, pushed routes
// and logging; a client connecting after the SIGHUP is pushed the new
// route and reaches B's 198.18.53.1 through it.
func TestDaemonVPNReload(t *testing.T) {
	nstest.RequireRoot(t)
	openvpn, err := exec.LookPath("openvpn")
	if err != nil {
		t.Fatal("openvpn is not installed (make deps installs it)")
	}
	bin := nstest.BuildOvfwd(t)
	a, app, b := routerNS(t, "dmv", "198.18.50", "198.18.51")
	nstest.Run(t, b, "ip", "addr", "add", "198.18.53.1/32", "dev", "lo")
	nstest.Run(t, b, "ip", "route", "add", "default", "via", "198.18.51.254")
	nstest.Run(t, b, "ip", "addr", "add", "2001:db8:51::1/64", "dev", "b0", "nodad")
	nstest.Run(t, b, "ip", "-6", "route", "add", "default", "via", "2001:db8:51::fe")

	dir := unitDir(t)
	// The PKI is the daemon's state, as `ovfwd pki` makes it in
	// /var/lib/ovfwd.
	pkiDir := filepath.Join(dir, "state", "pki")
	if err := pki.Init(pkiDir); err != nil {
		t.Fatal(err)
	}
	profile, err := pki.ClientProfile(pkiDir, pki.Profile{
		Name: "alice", Remotes: []string{"198.18.50.254:1194"}, Extra: []string{"verb 3", "explicit-exit-notify 1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "run", "ovfwd.sock")
	cfgPath := filepath.Join(dir, "ovfwd.toml")
	writeConfig(t, cfgPath, fmt.Sprintf(vpnConfig, sock, "info"))

	cmd, exited, log := startUnit(t, app, bin, cfgPath)
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ready && s.VPN != nil })

	clientLog := filepath.Join(dir, "client.log")
	client, err := a.Start(nil, nil, openvpn, "--config", profile, "--log", clientLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(clientLog)
			t.Logf("openvpn client log:\n%s", out)
		}
	})
	s := waitStatusFor(t, sock, exited, 30*time.Second, func(s *status.Snapshot) bool {
		return s.VPN != nil && len(s.VPN.Peers) == 1 && len(s.VPN.Peers[0].Addrs) == 2
	})
	peer := s.VPN.Peers[0]
	t.Logf("peer %s from %s with %v", peer.Name, peer.Real, peer.Addrs)
	if peer.Name != "alice" {
		t.Errorf("peer name %q, want alice", peer.Name)
	}
	clientAddr := netip.MustParseAddr(peer.Addrs[0])
	// The client installed the pushed route; host B answers through the tunnel.
	waitCmd(t, a, 15*time.Second, "ping", "-c", "1", "-W", "1", "198.18.51.1")
	ping(t, a, "198.18.51.1")
	ping(t, b, clientAddr.String())
	// IPv6 inside the tunnel: the pushed ifconfig-ipv6 and route-ipv6.
	client6 := peer.Addrs[1]
	if !strings.HasPrefix(client6, "2001:db8:150::") {
		t.Errorf("client IPv6 address %s is not from pool_v6", client6)
	}
	waitCmd(t, a, 15*time.Second, "ping", "-6", "-c", "1", "-W", "1", "2001:db8:51::1")
	ping(t, b, client6)

	// A checksummed TCP transfer from host B to the client through the
	// tunnel, with a SIGHUP (new static route, new log level) in its middle.
	const n = 64 << 20
	type result struct {
		r   lab.TCPResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := lab.TCPTransfer(context.Background(), b, a, clientAddr, n, 90*time.Second)
		done <- result{r, err}
	}()
	// Reload once bytes are flowing.
	before := s.VPN.Peers[0].Tx.Bytes
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return s.VPN != nil && len(s.VPN.Peers) == 1 && s.VPN.Peers[0].Tx.Bytes > before+1<<20
	})
	if strings.Contains(log.String(), "level=DEBUG") {
		t.Error("debug lines logged at level info")
	}
	reloaded := strings.Replace(fmt.Sprintf(vpnConfig, sock, "debug"), `push_routes = ["198.18.51.0/24"`, `push_routes = ["198.18.51.0/24", "198.18.53.0/24"`, 1)
	if !strings.Contains(reloaded, `"198.18.53.0/24"`) {
		t.Fatal("test bug: the reloaded config does not push 198.18.53.0/24")
	}
	writeConfig(t, cfgPath, reloaded+extraRoute)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	s = waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Reload.Count == 1 })
	select {
	case <-done:
		t.Fatal("the transfer ended before the reload was applied; nothing was proven")
	default:
	}
	if !hasRoute(s, "198.18.53.0/24 via 198.18.51.1 dev p1 (static)") {
		t.Errorf("reload did not add the static route: %v", s.Routes.Prefixes)
	}
	if !waitLog(log, regexp.MustCompile(`level=DEBUG msg="route installed" prefix=198.18.53.0/24`)) {
		t.Error("the reload's new log level did not apply")
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(100 * time.Second):
		t.Fatal("transfer never ended")
	}
	if res.err != nil || !res.r.OK(n) {
		t.Fatalf("transfer across the reload: %d of %d bytes, checksums match %v, err %v",
			res.r.Bytes, n, res.r.Sent == res.r.Received, res.err)
	}
	t.Logf("%d MiB through the tunnel in %v across a SIGHUP", n>>20, res.r.Elapsed.Round(time.Millisecond))
	s = waitStatus(t, sock, exited, func(*status.Snapshot) bool { return true })
	if len(s.VPN.Peers) != 1 || s.VPN.Peers[0].Real != peer.Real {
		t.Errorf("peer changed across the reload: %+v → %+v", peer, s.VPN.Peers)
	}
	logText, _ := os.ReadFile(clientLog)
	if c := strings.Count(string(logText), "Initialization Sequence Completed"); c != 1 {
		t.Errorf("client connected %d times; the reload must not restart its tunnel", c)
	}
	if strings.Contains(string(logText), "route 198.18.53.0") {
		t.Error("the connected client was pushed the new route; established sessions keep what they were pushed")
	}

	// A client that leaves says so (explicit-exit-notify): its session,
	// tunnel entry and routes go at once, not after ping-restart (20 s).
	if err := client.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	left := time.Now()
	s = waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return len(s.VPN.Peers) == 0 && s.Routes.Tunnel == 0 })
	t.Logf("peer gone %v after the client's exit notice (the control server tears down 5 s after EXIT)", time.Since(left).Round(time.Millisecond))
	_ = client.Wait()

	// Connect again for the shutdown check.
	clientLog = filepath.Join(dir, "client2.log")
	if _, err := a.Start(nil, nil, openvpn, "--config", profile, "--log", clientLog); err != nil {
		t.Fatal(err)
	}
	waitStatusFor(t, sock, exited, 30*time.Second, func(s *status.Snapshot) bool { return len(s.VPN.Peers) == 1 })
	// The new session got the reloaded push_routes: 198.18.53.0/24 is
	// reachable from A only through the tunnel.
	waitCmd(t, a, 15*time.Second, "ping", "-c", "1", "-W", "1", "198.18.53.1")
	logText, _ = os.ReadFile(clientLog)
	if !strings.Contains(string(logText), "route 198.18.53.0") {
		t.Error("the client connecting after the reload was not pushed route 198.18.53.0/24")
	}

	// SIGTERM: the client is told to restart, ovfwd exits within 5 s.
	stopWithin5s(t, cmd, exited, "SIGTERM to exit with a VPN client")
	deadline := time.Now().Add(15 * time.Second) // the client logs it when the scheduler lets it
	for time.Now().Before(deadline) {
		logText, _ = os.ReadFile(clientLog)
		if strings.Contains(string(logText), restartNotice) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(string(logText), restartNotice) {
		t.Errorf("the client got no restart notice")
	}
}

// restartNotice is what openvpn 2.6 logs on the server's RESTART message.
const restartNotice = "server-pushed-connection-reset"

// waitStatusFor is waitStatus with a longer bound.
func waitStatusFor(t *testing.T, sock string, exited <-chan error, d time.Duration, ok func(*status.Snapshot) bool) *status.Snapshot {
	t.Helper()
	deadline := time.Now().Add(d)
	for i := 0; i < 10000; i++ {
		select {
		case err := <-exited:
			t.Fatalf("ovfwd exited: %v", err)
		default:
		}
		if s, err := status.Fetch(sock, time.Second); err == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	s, err := status.Fetch(sock, time.Second)
	j, _ := json.Marshal(s)
	t.Fatalf("status never matched in %v; last %s, err %v", d, j, err)
	return nil
}

// waitCmd retries a command in ns until it succeeds.
func waitCmd(t *testing.T, ns *netns.NS, d time.Duration, args ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	var out string
	var err error
	for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
		if out, err = ns.Run(args...); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%v never succeeded: %v\n%s", args, err, out)
}
