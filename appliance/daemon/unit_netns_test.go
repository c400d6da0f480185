package daemon_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

const unitConfig = `
[appliance]
mode = "router"
mss_clamp = 1300

[[port]]
name = "p0"
driver = "afxdp-copy"
ifname = "p0"
addresses = ["198.18.60.254/24"]

[[port]]
name = "p1"
driver = "afxdp-copy"
ifname = "p1"
addresses = ["198.18.61.254/24", "2001:db8:61::fe/64"]

[vpn]
enabled = true
port = 1194
ca = "state/pki/ca.crt"
cert = "state/pki/server.crt"
key = "state/pki/server.key"
tls_crypt = "state/pki/tls-crypt.key"
pool_v4 = "198.19.60.0/24"
push_routes = ["198.18.61.0/24"]
keepalive_interval = "2s"
keepalive_timeout = "20s"

[netlink]
routes = true
neighbours = true

[metrics]
listen = "127.0.0.1:19471"
socket = "%[1]s/run/metrics.sock"

[status]
socket = "%[1]s/run/ovfwd.sock"

[log]
level = "info"
`

// TestUnitPrivileges runs `ovfwd run` as packaging/ovfwd.service does — a
// non-root user, only the unit's capabilities, its limits, no_new_privs —
// and checks that everything an operator uses works: routing (static,
// connected and kernel routes through netlink), the VPN with a stock
// openvpn client, status, metrics (TCP and unix socket), SIGHUP reload,
// the workers' nice level, and a clean SIGTERM.
func TestUnitPrivileges(t *testing.T) {
	nstest.RequireRoot(t)
	openvpn, err := exec.LookPath("openvpn")
	if err != nil {
		t.Fatal("openvpn is not installed (make deps installs it)")
	}
	u := unittest.Load(t)
	dir := unitDir(t)
	bin := nstest.BuildOvfwd(t)
	a, app, b := routerNS(t, "unt", "198.18.60", "198.18.61")
	nstest.Run(t, a, "ip", "route", "add", "default", "via", "198.18.60.254")
	nstest.Run(t, b, "ip", "addr", "add", "198.18.62.1/32", "dev", "lo")
	nstest.Run(t, b, "ip", "addr", "add", "198.18.63.1/32", "dev", "lo")
	nstest.Run(t, b, "ip", "route", "add", "default", "via", "198.18.61.254")

	pkiDir := filepath.Join(dir, "state", "pki")
	if err := pki.Init(pkiDir); err != nil {
		t.Fatal(err)
	}
	profile, err := pki.ClientProfile(pkiDir, pki.Profile{Name: "alice", Remotes: []string{"198.18.60.254:1194"}, Extra: []string{"verb 3"}})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "ovfwd.toml")
	cfgText := fmt.Sprintf(unitConfig, dir)
	writeConfig(t, cfgPath, cfgText)
	sock := filepath.Join(dir, "run", "ovfwd.sock")

	// startUnit checks in /proc that the process is what the unit makes:
	// its uid, exactly its capabilities, no_new_privs, its limits.
	cmd, exited, log := startUnit(t, app, bin, cfgPath)
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ready && len(s.Ports) == 2 && s.VPN != nil })

	// The workers run at the nice level the daemon asks for (-5), which the
	// unit's LimitNICE allows without CAP_SYS_NICE. Where the test could
	// not give that limit, the daemon must say the workers stay at 0.
	if nice, _ := u.Limit("nice"); !nice.Capped {
		if n := threadsAtNice(t, cmd.Process.Pid, -5); n == 0 {
			t.Errorf("no thread at nice -5: the workers could not raise their priority under the unit's limits")
		}
	} else if !waitLog(log, regexp.MustCompile(`msg="worker priority not raised".*nice=-5`)) {
		t.Errorf("the workers' priority was not raised (LimitNICE not applicable here) and the daemon did not say so")
	} else {
		t.Log("LimitNICE could not be applied here: the workers' nice -5 is not verified (the daemon's warning is)")
	}

	// Routing, connected and a kernel route learned through netlink.
	ping(t, a, "198.18.61.1")
	nstest.Run(t, app, "ip", "route", "add", "198.18.62.0/24", "via", "198.18.61.1")
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return hasRoute(s, "198.18.62.0/24 via 198.18.61.1 dev p1 (kernel)") })
	ping(t, a, "198.18.62.1")

	// The VPN: a stock client connects and reaches B.
	clientLog := filepath.Join(dir, "client.log")
	if _, err := a.Start(nil, nil, openvpn, "--config", profile, "--log", clientLog); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(clientLog)
			t.Logf("openvpn client log:\n%s", out)
		}
	})
	s := waitStatusFor(t, sock, exited, 30*time.Second, func(s *status.Snapshot) bool {
		return s.VPN != nil && len(s.VPN.Peers) == 1 && len(s.VPN.Peers[0].Addrs) > 0
	})
	clientAddr := s.VPN.Peers[0].Addrs[0]
	waitCmd(t, b, 15*time.Second, "ping", "-c", "1", "-W", "1", clientAddr)
	ping(t, b, clientAddr)

	// Status, as an operator runs it.
	if out, err := exec.Command(bin, "status", "-s", sock).CombinedOutput(); err != nil || !strings.Contains(string(out), "alice") {
		t.Errorf("ovfwd status: %v\n%s", err, out)
	}
	// Metrics on TCP and on the unix socket; other paths are 404.
	if v := scrape(t, app, "127.0.0.1:19471", `ovfwd_vpn_peers`); v != 1 {
		t.Errorf("metrics: %d VPN peers, want 1", v)
	}
	if body := scrapeUnix(t, filepath.Join(dir, "run", "metrics.sock"), "/metrics"); !strings.Contains(body, `ovfwd_port_rx_packets_total{port="p0"}`) {
		t.Errorf("metrics on the unix socket:\n%.300s", body)
	}

	// SIGHUP: a new static route applies, twice in a row with one warning
	// about a [[port]] change that waits for a restart.
	writeConfig(t, cfgPath, cfgText+"\n[[route]]\nprefix = \"198.18.63.0/24\"\nvia = \"198.18.61.1\"\n")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return s.Reload.Count == 1 && hasRoute(s, "198.18.63.0/24 via 198.18.61.1 dev p1 (static)")
	})
	ping(t, a, "198.18.63.1")
	portChange := cfgText + "\n[[route]]\nprefix = \"198.18.63.0/24\"\nvia = \"198.18.61.1\"\n"
	portChange = strings.Replace(portChange, `addresses = ["198.18.60.254/24"]`, `addresses = ["198.18.60.254/24"]
mtu = 1400`, 1)
	for i := 2; i <= 3; i++ {
		writeConfig(t, cfgPath, portChange)
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Reload.Count == i })
	}
	waitLog(log, regexp.MustCompile(`msg=reloaded.*\n(?s:.*)msg=reloaded.*\n(?s:.*)msg=reloaded`))
	if n := strings.Count(log.String(), "take effect at the next restart"); n != 1 {
		t.Errorf("the [[port]] change was warned about %d times over two reloads, want once", n)
	}
	ping(t, b, clientAddr)

	stopWithin5s(t, cmd, exited, "SIGTERM as the unit's user")
	if out := nstest.Run(t, app, "ip", "neigh", "show", "nud", "permanent"); strings.Contains(out, "extern_learn") {
		t.Errorf("mirrored neighbours left after a clean stop:\n%s", out)
	}
}

// procStatus reads /proc/PID/status into a map.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// threadsAtNice counts pid's threads whose nice value (proc(5) stat field
// 19) is nice.
func threadsAtNice(t *testing.T, pid, nice int) int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 on
		if len(f) > 16 && f[16] == strconv.Itoa(nice) {
			n++
		}
	}
	return n
}

// scrapeUnix GETs path from the metrics endpoint on a unix socket.
func scrapeUnix(t *testing.T, sockPath, path string) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Dial: func(string, string) (net.Conn, error) {
		return net.Dial("unix", sockPath)
	}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://ovfwd" + path)
	if err != nil {
		t.Fatalf("metrics on %s: %v", sockPath, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}
