package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
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
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
)

// Topology (namespace tag "dmn", addresses 198.18.50-53.0/24):
//
//	host A a0 198.18.50.1 ── p0 198.18.50.254 [ovfwd] p1 198.18.51.254 ── b0 198.18.51.1 host B
//	                                                                     lo 198.18.52.1, 198.18.53.1
//
// 198.18.52.0/24 is reached through a kernel route added with `ip route`
// in the appliance namespace (netlink sync); 198.18.53.0/24 through a
// [[route]] a SIGHUP adds.
const baseConfig = `
[appliance]
mode = "router"
poll = "adaptive"
fast_path = "xdp" # the veths' peers run NAPI (GRO on b0)

[[port]]
name = "p0"
driver = "auto"
ifname = "p0"
addresses = ["198.18.50.254/24", "2001:db8:50::fe/64"]

[[port]]
name = "p1"
driver = "afxdp-copy"
ifname = "p1"
addresses = ["198.18.51.254/24", "2001:db8:51::fe/64"]

[netlink]
routes = true
neighbours = true

[metrics]
listen = "127.0.0.1:19469"

[status]
socket = "%s"

[log]
level = "debug"
format = "text"
`

const extraRoute = `
[[route]]
prefix = "198.18.53.0/24"
via = "198.18.51.1"
`

func TestDaemonNetns(t *testing.T) {
	nstest.RequireRoot(t)
	bin := nstest.BuildOvfwd(t)
	a, app, b := routerNS(t, "dmn", "198.18.50", "198.18.51")
	nstest.Run(t, a, "ip", "route", "add", "default", "via", "198.18.50.254")
	nstest.Run(t, b, "ip", "addr", "add", "198.18.52.1/32", "dev", "lo")
	nstest.Run(t, b, "ip", "addr", "add", "198.18.53.1/32", "dev", "lo")
	nstest.Run(t, b, "ip", "route", "add", "default", "via", "198.18.51.254")

	dir := unitDir(t)
	sock := filepath.Join(dir, "run", "ovfwd.sock")
	cfgPath := filepath.Join(dir, "ovfwd.toml")
	writeConfig(t, cfgPath, fmt.Sprintf(baseConfig, sock))

	cmd, exited, log := startUnit(t, app, bin, cfgPath)

	snap := waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ready && len(s.Ports) == 2 })
	for _, p := range snap.Ports {
		if len(p.Queues) == 0 || p.Link != "up" {
			t.Fatalf("port %s: queues %v, link %s", p.Name, p.Queues, p.Link)
		}
		t.Logf("port %s: %s (%s); %v", p.Name, p.Driver, p.Reason, p.Queues)
	}
	if got := snap.Ports[1].Driver; got != "afxdp-copy" {
		t.Errorf("p1 driver %q, want afxdp-copy", got)
	}
	if !strings.Contains(snap.Ports[0].Reason, "auto") {
		t.Errorf("p0 reason %q does not explain the auto choice", snap.Ports[0].Reason)
	}
	if !waitLog(log, regexp.MustCompile(`msg="queue mode" port=p0 .*queue=0`)) {
		t.Errorf("no per-queue mode in the log")
	}

	// Forwarding between the host namespaces.
	ping(t, a, "198.18.51.1")
	// The kernel keeps the port addresses (management traffic).
	ping(t, a, "198.18.50.254")

	// A kernel route reaches the FIB and carries traffic.
	if _, err := a.Run("ping", "-c", "1", "-W", "1", "198.18.52.1"); err == nil {
		t.Fatal("198.18.52.1 answered before any route to it existed")
	}
	nstest.Run(t, app, "ip", "route", "add", "198.18.52.0/24", "via", "198.18.51.1")
	added := time.Now()
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return hasRoute(s, "198.18.52.0/24 via 198.18.51.1 dev p1 (kernel)")
	})
	t.Logf("kernel route in the FIB after %v (status round trip included)", time.Since(added).Round(time.Microsecond))
	ping(t, a, "198.18.52.1")
	// The operator's view: `ovfwd status`, text and JSON.
	out, err := exec.Command(bin, "status", "-s", sock).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "198.18.52.0/24 via 198.18.51.1 dev p1 (kernel)") ||
		!strings.Contains(string(out), "p1 (p1) driver afxdp-copy, link up") {
		t.Errorf("ovfwd status: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "status", "-c", cfgPath, "-json").Output()
	var js status.Snapshot
	if err != nil || json.Unmarshal(out, &js) != nil || len(js.Ports) != 2 {
		t.Errorf("ovfwd status -json: %v\n%s", err, out)
	}

	// Counters move, in status and in metrics.
	before := waitStatus(t, sock, exited, func(*status.Snapshot) bool { return true })
	m0 := scrape(t, app, "127.0.0.1:19469", `ovfwd_port_rx_packets_total{port="p0"}`)
	ping(t, a, "198.18.51.1")
	after := waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ports[0].Rx.Packets >= before.Ports[0].Rx.Packets+3 })
	if after.Ports[1].Tx.Packets < before.Ports[1].Tx.Packets+3 {
		t.Errorf("p1 tx packets %d → %d after 3 pings", before.Ports[1].Tx.Packets, after.Ports[1].Tx.Packets)
	}
	if m1 := scrape(t, app, "127.0.0.1:19469", `ovfwd_port_rx_packets_total{port="p0"}`); m1 < m0+3 {
		t.Errorf("metrics p0 rx packets %d → %d after 3 pings", m0, m1)
	}

	// The XDP fast path forwards UDP from A to B in the kernel once B is
	// resolved; status counts it on p0's ingress, and B's kernel takes the
	// datagrams (TTL and checksums right). Out of a veth the redirect needs
	// NAPI on its peer: GRO on b0.
	nstest.Run(t, b, "ethtool", "-K", "b0", "gro", "on")
	got := nstest.CountUDP(t, b, netip.MustParseAddrPort("198.18.51.1:9"))
	sendUDP := func(n int) {
		t.Helper()
		if err := a.Do(func() error {
			c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP("198.18.51.1"), Port: 9})
			if err != nil {
				return err
			}
			defer c.Close()
			for range n {
				c.Write([]byte("fast path"))
				time.Sleep(time.Millisecond)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// waitGot waits for B to have received want datagrams: B's reader may
	// still be behind its socket buffer on a loaded machine.
	waitGot := func(want int64, what string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); got.Load() < want && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if n := got.Load(); n < want {
			t.Errorf("host B received %d datagrams, want %d (%s)", n, want, what)
		}
	}
	// A keeps a veth's checksum offload: its datagrams leave a0 with the
	// checksum unfinished, which the fast path finishes itself
	// (fast_csum_finished, in metrics too), and B takes them.
	sendUDP(300)
	finished := waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return s.Ports[0].Backend["fast_csum_finished"] >= 100
	})
	t.Logf("unfinished checksums: p0 %v, engine csum_partial %d", finished.Ports[0].Backend, finished.Engine["csum_partial"])
	if p := finished.Ports[0].Backend["fast_punt_csum_partial"]; p != 0 {
		t.Errorf("the fast path left %d unfinished checksums to the engine", p)
	}
	if m := scrape(t, app, "127.0.0.1:19469", `ovfwd_port_backend_packets_total{counter="fast_csum_finished",port="p0"}`); m < 100 {
		t.Errorf("metrics: fast_csum_finished on p0 is %d, want ≥ 100", m)
	}
	waitGot(290, "unfinished checksums, finished by the fast path")
	// A NIC's received checksums are finished; so are A's from here on,
	// and the rest is about the fast path's own forwarding.
	nstest.Run(t, a, "ethtool", "-K", "a0", "tx", "off")
	base := got.Load()
	sendUDP(300)
	fast := waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ports[0].Backend["fast_forwarded"] >= 100 })
	t.Logf("fast path on p0: %v", fast.Ports[0].Backend)
	waitGot(base+290, "finished checksums, through the fast path")
	// sendUntil sends datagrams 5 at a time until ok holds for the fast
	// path's counters on p0 (10 s at most): the daemon applies a link
	// change to the fast path at its next control tick (50 ms), which a
	// loaded machine can delay well past that.
	sendUntil := func(what string, ok func(c status.Counters) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			sendUDP(5)
			if ok(waitStatus(t, sock, exited, func(*status.Snapshot) bool { return true }).Ports[0].Backend) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("fast path: %s not seen within 10 s", what)
			}
		}
	}
	// Link down on p1: once the daemon has seen it the fast path sends
	// nothing out of p1 (the workers get the frames and count them as
	// link_down); link up: it forwards again.
	nstest.Run(t, b, "ip", "link", "set", "b0", "down")
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ports[1].Link == "down" })
	dn := waitStatus(t, sock, exited, func(*status.Snapshot) bool { return true }).Ports[0].Backend
	sendUntil("a frame for the downed p1 punted", func(c status.Counters) bool {
		return c["fast_punt_next_hop"] > dn["fast_punt_next_hop"]
	})
	d0 := waitStatus(t, sock, exited, func(*status.Snapshot) bool { return true })
	sendUDP(50)
	d1 := waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return s.Ports[0].Backend["fast_punt_next_hop"] >= d0.Ports[0].Backend["fast_punt_next_hop"]+50
	})
	if f0, f1 := d0.Ports[0].Backend["fast_forwarded"], d1.Ports[0].Backend["fast_forwarded"]; f1 != f0 {
		t.Errorf("fast path forwarded %d frames out of a port whose link is down", f1-f0)
	}
	nstest.Run(t, b, "ip", "link", "set", "b0", "up")
	nstest.Run(t, b, "ip", "route", "replace", "default", "via", "198.18.51.254") // the kernel dropped it with the link
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ports[1].Link == "up" })
	sendUntil("a frame forwarded out of p1 again", func(c status.Counters) bool {
		return c["fast_forwarded"] > d1.Ports[0].Backend["fast_forwarded"]
	})
	d2 := waitStatus(t, sock, exited, func(*status.Snapshot) bool { return true })
	sendUDP(50)
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return s.Ports[0].Backend["fast_forwarded"] >= d2.Ports[0].Backend["fast_forwarded"]+45
	})

	// SIGHUP with a changed config applies it.
	if _, err := a.Run("ping", "-c", "1", "-W", "1", "198.18.53.1"); err == nil {
		t.Fatal("198.18.53.1 answered before its route was configured")
	}
	// The new file also moves the metrics endpoint.
	changed := strings.Replace(fmt.Sprintf(baseConfig, sock), "127.0.0.1:19469", "127.0.0.1:19470", 1) + extraRoute
	writeConfig(t, cfgPath, changed)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return s.Reload.Count == 1 && hasRoute(s, "198.18.53.0/24 via 198.18.51.1 dev p1 (static)")
	})
	ping(t, a, "198.18.53.1")
	if m2 := scrape(t, app, "127.0.0.1:19470", `ovfwd_reloads_total{result="ok"}`); m2 != 1 {
		t.Errorf("metrics on the new address: %d reloads, want 1", m2)
	}

	// SIGHUP with a broken config keeps the running one and logs why.
	broken := strings.Replace(changed, `mode = "router"`, `mode = "routr"`, 1)
	writeConfig(t, cfgPath, broken)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	s := waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Reload.Failed == 1 })
	if s.Reload.Count != 1 || !hasRoute(s, "198.18.53.0/24 via 198.18.51.1 dev p1 (static)") {
		t.Errorf("after a rejected reload: reloads %+v, routes %v", s.Reload, s.Routes.Prefixes)
	}
	if !waitLog(log, regexp.MustCompile(`config error.*line=\d+ key=appliance.mode`)) {
		t.Errorf("the rejected reload's error (with its line) is not in the log:\n%s", log.String())
	}
	ping(t, a, "198.18.53.1")
	ping(t, a, "198.18.52.1")

	// An address an operator adds to a port later reaches the kernel too
	// (the steering program learns it from netlink).
	nstest.Run(t, app, "ip", "addr", "add", "198.18.50.253/24", "dev", "p0")
	waitCmd(t, a, 5*time.Second, "ping", "-c", "1", "-W", "1", "198.18.50.253")
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Routes.Connected == 5 })
	nstest.Run(t, app, "ip", "addr", "del", "198.18.50.253/24", "dev", "p0")
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Routes.Connected == 4 })

	// A pinned kernel neighbour reaches the engine; ovfwd's own mirrored
	// entries (NUD_PERMANENT too) do not come back as pins.
	nstest.Run(t, app, "ip", "neigh", "replace", "198.18.51.77", "lladdr", "02:00:00:00:00:77", "dev", "p1", "nud", "permanent")
	s = waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Engine["neighbours_pinned"] >= 1 })
	if s.Engine["neighbours_pinned"] != 1 || s.Engine["neighbours_mirrored"] == 0 {
		t.Errorf("pinned %d (want 1), mirrored %d (want > 0)", s.Engine["neighbours_pinned"], s.Engine["neighbours_mirrored"])
	}
	nstest.Run(t, app, "ip", "neigh", "del", "198.18.51.77", "dev", "p1")
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Engine["neighbours_pinned"] == 0 })

	// Link down withdraws the routes out of the port; up restores them.
	nstest.Run(t, app, "ip", "link", "set", "p1", "down")
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return s.Ports[1].Link == "down" && !hasRoute(s, "198.18.53.0/24 via 198.18.51.1 dev p1 (static)")
	})
	nstest.Run(t, app, "ip", "link", "set", "p1", "up")
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return s.Ports[1].Link == "up" && hasRoute(s, "198.18.53.0/24 via 198.18.51.1 dev p1 (static)")
	})
	waitCmd(t, a, 10*time.Second, "ping", "-c", "1", "-W", "1", "198.18.53.1")

	// A kernel route deleted with `ip route` leaves the FIB.
	nstest.Run(t, app, "ip", "route", "replace", "198.18.52.0/24", "via", "198.18.51.1")
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return hasRoute(s, "198.18.52.0/24 via 198.18.51.1 dev p1 (kernel)") })
	nstest.Run(t, app, "ip", "route", "del", "198.18.52.0/24")
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return !hasRoute(s, "198.18.52.0/24 via 198.18.51.1 dev p1 (kernel)")
	})
	if _, err := a.Run("ping", "-c", "1", "-W", "1", "198.18.52.1"); err == nil {
		t.Error("198.18.52.1 still answers after its kernel route was deleted")
	}

	// SIGTERM: out within 5 s, no XDP program left, addresses given back.
	stopWithin5s(t, cmd, exited, "SIGTERM to exit")
	for _, ifn := range []string{"p0", "p1"} {
		if out := nstest.Run(t, app, "ip", "-d", "link", "show", ifn); strings.Contains(out, "xdp") {
			t.Errorf("%s still has an XDP program after exit:\n%s", ifn, out)
		}
	}
	if out := nstest.Run(t, app, "ip", "addr", "show", "p0"); strings.Contains(out, "198.18.50.254") {
		t.Errorf("p0 keeps the address ovfwd added:\n%s", out)
	}
	if !waitLog(log, regexp.MustCompile(`msg=stopped`)) {
		t.Errorf("no clean stop in the log")
	}
}

// waitLog waits up to 10 s for re to match the log: a line the daemon has
// written may still be in the pipe when its effect shows in status.
func waitLog(log *netns.SyncBuffer, re *regexp.Regexp) bool {
	for i := 0; i < 500; i++ {
		if re.MatchString(log.String()) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func writeConfig(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// waitStatus polls the status socket (up to 30 s: a loaded machine can take
// seconds to start ovfwd and load its programs) until ok holds.
func waitStatus(t *testing.T, sock string, exited <-chan error, ok func(*status.Snapshot) bool) *status.Snapshot {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last *status.Snapshot
	var lastErr error
	for i := 0; time.Now().Before(deadline) && i < 1500; i++ {
		select {
		case err := <-exited:
			t.Fatalf("ovfwd exited: %v", err)
		default:
		}
		s, err := status.Fetch(sock, time.Second)
		if err == nil && ok(s) {
			return s
		}
		last, lastErr = s, err
		time.Sleep(20 * time.Millisecond)
	}
	j, _ := json.Marshal(last)
	t.Fatalf("status never matched; last %s, err %v", j, lastErr)
	return nil
}

func hasRoute(s *status.Snapshot, line string) bool {
	for _, p := range s.Routes.Prefixes {
		if p == line {
			return true
		}
	}
	return false
}

func ping(t *testing.T, ns *netns.NS, addr string) {
	t.Helper()
	// With a deadline ping sends until 3 replies came back, however late
	// (ovfwd may still be resolving the next hop for the first probes),
	// and fails unless they did within 10 s.
	out, err := ns.Run("ping", "-c", "3", "-i", "0.2", "-w", "10", addr)
	if err != nil {
		t.Fatalf("ping %s: %v\n%s", addr, err, out)
	}
}

// scrape reads one sample from the metrics endpoint inside ns. The
// request is written by hand on a socket opened in the namespace (net/http
// would dial from another thread, outside it).
func scrape(t *testing.T, ns *netns.NS, addr, sample string) uint64 {
	t.Helper()
	var body []byte
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		body, err = io.ReadAll(c)
		return err
	})
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			// client_golang writes large counters in exponent form.
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", sc.Text(), err)
			}
			return uint64(f)
		}
	}
	t.Fatalf("metrics: no %s in\n%s", sample, body)
	return 0
}

// routerNS makes hosts a and b and the appliance's namespace app between
// them (a0–p0, p1–b0), a at lanA.1/24 and b at lanB.1/24. The hosts keep
// a veth's default offloads: ovfwd finishes the checksums they leave
// unfinished (engine event csum_partial).
func routerNS(t *testing.T, tag, lanA, lanB string) (a, app, b *netns.NS) {
	a, app, b = nstest.New(t, tag), nstest.New(t, tag), nstest.New(t, tag)
	nstest.Link(t, a, "a0", app, "p0")
	nstest.Link(t, app, "p1", b, "b0")
	nstest.Run(t, a, "ip", "addr", "add", lanA+".1/24", "dev", "a0")
	nstest.Run(t, b, "ip", "addr", "add", lanB+".1/24", "dev", "b0")
	return a, app, b
}

// startUnit runs ovfwd in app with the config at cfgPath as
// packaging/ovfwd.service runs it (its user, capabilities and limits; see
// appliance/testbed/unit), and checks in /proc that it does (see start).
// The config's directory is the test's unitDir; like systemd before each
// start, startUnit gives its state/ (e.g. a PKI the test made) and run/ to
// the unit's user.
func startUnit(t *testing.T, app *netns.NS, bin, cfgPath string) (*exec.Cmd, <-chan error, *netns.SyncBuffer) {
	t.Helper()
	u := unittest.Load(t)
	if err := u.Layout(filepath.Dir(cfgPath)); err != nil {
		t.Fatal(err)
	}
	if err := u.Access(cfgPath, unit.Read); err != nil {
		t.Fatal(err)
	}
	bin, err := u.Executable(bin, filepath.Dir(cfgPath))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", app.Name}, u.Argv(bin, "run", "-c", cfgPath)...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	exited, log := start(t, cmd)
	unittest.Check(t, u, cmd.Process.Pid)
	return cmd, exited, log
}

// unitDir is the test's directory laid out as the package lays out the
// daemon's (config files readable, run/ and state/ owned by the unit's
// user), removed when the test ends.
func unitDir(t *testing.T) string { return unittest.TempDir(t, unittest.Load(t)) }

// start starts ovfwd's cmd and returns its exit (closed after its one
// value: waitStatus may take it) and its log (stdout and stderr), whose
// tail the test prints when it fails. The cleanup kills it unless it has
// exited.
func start(t *testing.T, cmd *exec.Cmd) (<-chan error, *netns.SyncBuffer) {
	log := &netns.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("ovfwd log (last 64 KiB):\n%s", tail(log.String(), 64<<10))
		}
	})
	return exited, log
}

// stopWithin5s sends SIGTERM and fails the test unless ovfwd exits cleanly
// within the 5 s the daemon promises.
func stopWithin5s(t *testing.T, cmd *exec.Cmd, exited <-chan error, what string) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("ovfwd exited with %v", err)
		}
		t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		// Where it is stuck: Go's goroutine dump on SIGQUIT lands in the
		// log the test prints when it fails (the cleanup then kills it).
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		time.Sleep(2 * time.Second)
		t.Fatal("ovfwd still running 5 s after SIGTERM (goroutine dump in its log)")
	}
}
