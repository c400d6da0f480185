package daemon_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/vpn/pki"
	"golang.org/x/sys/unix"
)

// unit is what packaging/ovfwd.service gives the daemon, read from the
// unit file itself so the tests and the package cannot drift apart.
type unit struct {
	user, group       string
	ambient, bounding []string // lower-case capability names without CAP_
	limits            []limit  // the unit's Limit*= lines
	noNewPrivs        bool
}

func readUnit(t *testing.T) unit {
	t.Helper()
	f, err := os.Open("../../packaging/ovfwd.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var u unit
	caps := func(v string) []string {
		var out []string
		for _, c := range strings.Fields(v) {
			out = append(out, strings.ToLower(strings.TrimPrefix(c, "CAP_")))
		}
		return out
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		switch k {
		case "User":
			u.user = v
		case "Group":
			u.group = v
		case "AmbientCapabilities":
			u.ambient = append(u.ambient, caps(v)...)
		case "CapabilityBoundingSet":
			u.bounding = append(u.bounding, caps(v)...)
		case "NoNewPrivileges":
			u.noNewPrivs = v == "yes" || v == "true"
		case "LimitMEMLOCK", "LimitNOFILE":
			l := limit{name: strings.ToLower(strings.TrimPrefix(k, "Limit")), resource: unix.RLIMIT_MEMLOCK, value: ^uint64(0)}
			if k == "LimitNOFILE" {
				l.resource = unix.RLIMIT_NOFILE
			}
			if v != "infinity" {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("unit %s=%s: teach readUnit this form", k, v)
				}
				l.value = n
			}
			u.limits = append(u.limits, l)
		case "LimitNICE":
			// systemd.exec(5): "+N"/"-N" is a nice level, a bare number
			// the raw rlimit (20 - nice).
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("unit LimitNICE=%s: %v", v, err)
			}
			if strings.HasPrefix(v, "+") || strings.HasPrefix(v, "-") {
				n = 20 - n
			}
			u.limits = append(u.limits, limit{name: "nice", resource: unix.RLIMIT_NICE, value: uint64(n)})
		case "LimitRTPRIO", "LimitAS", "LimitNPROC", "LimitCORE":
			t.Fatalf("the unit sets %s; teach readUnit to apply it", k)
		}
	}
	if u.user == "" || len(u.ambient) == 0 || len(u.bounding) == 0 {
		t.Fatalf("unit file: user %q, ambient %v, bounding %v", u.user, u.ambient, u.bounding)
	}
	return u
}

// limit is one Limit*= line as an rlimit: both soft and hard (systemd
// sets both); ^uint64(0) is infinity.
type limit struct {
	name     string // prlimit's option name
	resource int
	value    uint64
}

// ids is the unit's user and group, or nobody/nogroup (65534) where the
// package's system user does not exist (it is made by the package's
// postinstall script, which the namespace tests do not run).
func (u unit) ids(t *testing.T) (uid, gid int) {
	uid, gid = 65534, 65534
	if usr, err := user.Lookup(u.user); err == nil {
		uid, _ = strconv.Atoi(usr.Uid)
		gid, _ = strconv.Atoi(usr.Gid)
	} else {
		t.Logf("no user %q here; running as uid %d like it (a non-root uid with only the unit's capabilities)", u.user, uid)
	}
	return uid, gid
}

// command runs bin with args in ns exactly as the unit would: its limits
// (prlimit, as systemd sets them before the exec), its user, only its
// capabilities (ambient, inheritable and bounding set), no supplementary
// groups, and no_new_privs. A limit above what this machine's hard limit
// allows cannot be raised where the tests' root lacks CAP_SYS_RESOURCE (a
// container): it is applied at that hard limit, and reported in applied.
func (u unit) command(t *testing.T, ns *netns.NS, bin string, args ...string) (cmd *exec.Cmd, applied map[string]bool) {
	uid, gid := u.ids(t)
	plus := func(cs []string) string {
		out := []string{"-all"}
		for _, c := range cs {
			out = append(out, "+"+c)
		}
		return strings.Join(out, ",")
	}
	argv := []string{"netns", "exec", ns.Name, "prlimit"}
	applied = map[string]bool{}
	for _, l := range u.limits {
		var cur unix.Rlimit
		if err := unix.Getrlimit(l.resource, &cur); err != nil {
			t.Fatal(err)
		}
		v, ok := l.value, true
		if v > cur.Max && !haveCap(t, 24) { // CAP_SYS_RESOURCE
			v, ok = cur.Max, false
			t.Logf("unit %s limit %d is above this machine's hard limit %d, which the tests cannot raise (no CAP_SYS_RESOURCE here): applied at %d", l.name, l.value, cur.Max, v)
		}
		s := strconv.FormatUint(v, 10)
		if v == ^uint64(0) {
			s = "unlimited"
		}
		argv = append(argv, "--"+l.name+"="+s)
		applied[l.name] = ok
	}
	argv = append(argv, "--", "setpriv", "--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(gid), "--clear-groups",
		"--inh-caps", plus(u.ambient), "--ambient-caps", plus(u.ambient), "--bounding-set", plus(u.bounding))
	if u.noNewPrivs {
		argv = append(argv, "--no-new-privs")
	}
	argv = append(argv, "--", bin)
	cmd = exec.Command("ip", append(argv, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, applied
}

// haveCap reports whether the test process has capability bit c in its
// effective set.
func haveCap(t *testing.T, c uint) bool {
	v, err := strconv.ParseUint(procStatus(t, os.Getpid())["CapEff"], 16, 64)
	return err == nil && v&(1<<c) != 0
}

// unitDir is a directory the unit's user can read (t.TempDir is root's
// 0700), removed at the end of the test.
func unitDir(t *testing.T, uid, gid int) string {
	dir, err := os.MkdirTemp("", "ovfwd-unit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(dir, 0o755))
	// /run/ovfwd (RuntimeDirectory) and /var/lib/ovfwd (StateDirectory)
	// belong to the unit's user, mode 0750.
	for _, d := range []string{"run", "state"} {
		must(os.Mkdir(filepath.Join(dir, d), 0o750))
		must(os.Chown(filepath.Join(dir, d), uid, gid))
	}
	return dir
}

// capMask is the kernel's capability bit set for names (linux/capability.h).
func capMask(t *testing.T, names []string) uint64 {
	bits := map[string]uint{"net_admin": 12, "net_raw": 13, "ipc_lock": 14, "sys_nice": 23,
		"sys_resource": 24, "sys_admin": 21, "perfmon": 38, "bpf": 39}
	var m uint64
	for _, n := range names {
		b, ok := bits[n]
		if !ok {
			t.Fatalf("capMask: add %s", n)
		}
		m |= 1 << b
	}
	return m
}

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
	netns.RequireRoot(t)
	openvpn, err := exec.LookPath("openvpn")
	if err != nil {
		t.Fatal("openvpn is not installed (make deps installs it)")
	}
	u := readUnit(t)
	uid, gid := u.ids(t)
	dir := unitDir(t, uid, gid)
	bin := filepath.Join(dir, "ovfwd")
	src := netns.BuildOvfwd(t)
	if out, err := exec.Command("cp", src, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	a, app, b := routerNS(t, "unt", "198.18.60", "198.18.61")
	netns.Run(t, a, "ip", "route", "add", "default", "via", "198.18.60.254")
	netns.Run(t, b, "ip", "addr", "add", "198.18.62.1/32", "dev", "lo")
	netns.Run(t, b, "ip", "addr", "add", "198.18.63.1/32", "dev", "lo")
	netns.Run(t, b, "ip", "route", "add", "default", "via", "198.18.61.254")

	pkiDir := filepath.Join(dir, "state", "pki")
	if err := pki.Init(pkiDir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", uid, gid), pkiDir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	profile, err := pki.ClientProfile(pkiDir, pki.Profile{Name: "alice", Remotes: []string{"198.18.60.254:1194"}, Extra: []string{"verb 3"}})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "ovfwd.toml")
	cfgText := fmt.Sprintf(unitConfig, dir)
	writeConfig(t, cfgPath, cfgText)
	if err := os.Chmod(cfgPath, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "run", "ovfwd.sock")

	cmd, applied := u.command(t, app, bin, "run", "-c", cfgPath)
	cmd.Dir = dir
	exited, log := start(t, cmd)
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return len(s.Ports) == 2 && s.VPN != nil })

	// The process is what the unit makes: its uid, exactly its
	// capabilities, no_new_privs.
	proc := procStatus(t, cmd.Process.Pid)
	if got := strings.Fields(proc["Uid"]); len(got) == 0 || got[0] != strconv.Itoa(uid) {
		t.Errorf("Uid %q, want %d", proc["Uid"], uid)
	}
	for field, want := range map[string]uint64{"CapEff": capMask(t, u.ambient), "CapAmb": capMask(t, u.ambient), "CapBnd": capMask(t, u.bounding)} {
		if got, _ := strconv.ParseUint(proc[field], 16, 64); got != want {
			t.Errorf("%s %#x, want %#x", field, got, want)
		}
	}
	if u.noNewPrivs && proc["NoNewPrivs"] != "1" {
		t.Errorf("NoNewPrivs %q", proc["NoNewPrivs"])
	}
	// The workers run at the nice level the daemon asks for (-5), which the
	// unit's LimitNICE allows without CAP_SYS_NICE. Where the test could
	// not give that limit, the daemon must say the workers stay at 0.
	if applied["nice"] {
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
	netns.Run(t, app, "ip", "route", "add", "198.18.62.0/24", "via", "198.18.61.1")
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
	if out := netns.Run(t, app, "ip", "neigh", "show", "nud", "permanent"); strings.Contains(out, "extern_learn") {
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
