package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// binDir holds the ovfwd binary the tests built, removed by TestMain.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// ovfwdBin builds (once) the ovfwd binary the lab runs as its appliance,
// or takes OVFWD_BIN (make test sets it).
var ovfwdBin = sync.OnceValues(func() (string, error) {
	if os.Getenv("OVFWD_BIN") == "" {
		dir, err := os.MkdirTemp("", "ovfwd-lab-bin-")
		if err != nil {
			return "", err
		}
		binDir = dir
	}
	return netns.OvfwdBinary(binDir)
})

func testBinary(t *testing.T) string {
	t.Helper()
	bin, err := ovfwdBin()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// seen is what a test saw of a lab while it ran.
type seen struct {
	st         state
	progIDs    []uint32
	daemonPID  int
	clientPID  int
	lr         *running
	res        *outcome
	sawRunning bool
}

// hook installs the test hooks for one Run.
func hook(t *testing.T) *seen {
	s := &seen{}
	testHookRunning = func(lr *running) {
		s.sawRunning = true
		s.lr = lr
		s.st = *lr.st
		s.st.Namespaces = slices.Clone(lr.st.Namespaces)
		s.daemonPID = lr.daemon.pid()
		if lr.client != nil {
			s.clientPID = lr.client.pid()
		}
		for _, ifn := range []string{ifAppA, ifAppB} {
			out, err := lr.tp.App.Run("ip", "-d", "link", "show", "dev", ifn)
			m := regexp.MustCompile(`prog/xdp id (\d+)`).FindStringSubmatch(out)
			if err != nil || m == nil {
				t.Errorf("no XDP program on %s: %v\n%s", ifn, err, out)
				continue
			}
			id, _ := strconv.ParseUint(m[1], 10, 32)
			s.progIDs = append(s.progIDs, uint32(id))
		}
	}
	testHookDone = func(r *outcome) { s.res = r }
	t.Cleanup(func() { testHookRunning, testHookDone = nil, nil })
	return s
}

// checkGone fails unless everything s saw is gone: namespaces, processes,
// XDP programs and the work directory.
func checkGone(t *testing.T, s *seen) {
	t.Helper()
	list, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range s.st.Namespaces {
		if strings.Contains(string(list), ns) {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, p := range s.st.Procs {
		for p.alive() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if p.alive() {
			t.Errorf("%s (pid %d) still running", p.Name, p.PID)
		}
	}
	for _, id := range s.progIDs {
		for afxdp.ProgramExists(id) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if afxdp.ProgramExists(id) {
			t.Errorf("XDP program %d still loaded", id)
		}
	}
	if _, err := os.Stat(s.st.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("work directory %s left behind (%v)", s.st.Dir, err)
	}
}

// lab.Run with a short duration runs the real appliance (`ovfwd run` from
// the embedded config) and a stock openvpn client: routed and tunnel
// traffic pass over IPv4 and IPv6, the counters move, tun0 carries the
// addresses the appliance assigned, and nothing is left behind.
func TestRunShortLeavesNothing(t *testing.T) {
	nstest.RequireRoot(t)
	if _, err := exec.LookPath("openvpn"); err != nil {
		t.Fatal("openvpn is not installed (make deps installs it)")
	}
	s := hook(t)
	var out bytes.Buffer
	err := Run(context.Background(), Options{Duration: 5 * time.Second, Out: &out, Binary: testBinary(t)})
	t.Log(out.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !s.sawRunning || s.res == nil || s.res.traffic == nil {
		t.Fatal("the lab never ran traffic")
	}
	if len(s.st.Namespaces) != 3 || s.clientPID == 0 || s.daemonPID == 0 || len(s.st.Procs) != 2 {
		t.Errorf("recorded namespaces %v, procs %v", s.st.Namespaces, s.st.Procs)
	}
	if s.lr.daemonErr != nil {
		t.Errorf("ovfwd exited with %v", s.lr.daemonErr)
	}
	tr, res := s.res.traffic, s.res
	var routed, tunnel int
	for _, p := range tr.pings {
		if !p.ok {
			t.Errorf("%s", p)
		}
		if p.tunnel {
			tunnel++
		} else {
			routed++
		}
	}
	if routed != 2 || tunnel != 2 {
		t.Errorf("%d routed and %d tunnel pings, want 2 and 2 (IPv4 and IPv6 each)", routed, tunnel)
	}
	if tr.udp.Received.Load() == 0 {
		t.Errorf("UDP: %d sent, none received", tr.udp.Sent.Load())
	}
	if tr.plain.OK == 0 || tr.plain.Bad > 0 {
		t.Errorf("routed TCP: %s", tr.plain.Summary("routed", labTCPBytes))
	}
	if tr.tunnel.OK < 2 || tr.tunnel.Bad > 0 { // ≥ 2: one over IPv4 and one over IPv6 inside the tunnel
		t.Errorf("tunnel TCP: %s", tr.tunnel.Summary("tunnel", labTunnelBytes))
	}
	if res.countersPrints < 2 || !strings.Contains(out.String(), "drops: ") || !strings.Contains(out.String(), "tunnel ") {
		t.Errorf("counters printed %d times", res.countersPrints)
	}
	if res.first == nil || res.last == nil || len(res.last.Ports) != 2 {
		t.Fatal("no status snapshots")
	}
	for i, p := range res.last.Ports {
		if p.Rx.Packets <= res.first.Ports[i].Rx.Packets+1000 || p.Tx.Packets <= res.first.Ports[i].Tx.Packets+1000 {
			t.Errorf("port %s counters barely moved: rx %d→%d tx %d→%d", p.Name,
				res.first.Ports[i].Rx.Packets, p.Rx.Packets, res.first.Ports[i].Tx.Packets, p.Tx.Packets)
		}
	}
	// The client's tun0 carries exactly what the appliance assigned, from its pools.
	if res.last.VPN == nil || len(res.last.VPN.Peers) != 1 {
		t.Fatalf("VPN peers: %+v", res.last.VPN)
	}
	peer := res.last.VPN.Peers[0]
	if peer.Name != clientName || !slices.Contains(peer.Addrs, res.tunV4.String()) || !slices.Contains(peer.Addrs, res.tunV6.String()) {
		t.Errorf("peer %s with %v; tun0 has %s and %s", peer.Name, peer.Addrs, res.tunV4, res.tunV6)
	}
	if !strings.HasPrefix(res.tunV4.String(), "198.19.30.") || !strings.HasPrefix(res.tunV6.String(), "2001:db8:130::") {
		t.Errorf("tun0 addresses %s, %s are not from the lab's pools", res.tunV4, res.tunV6)
	}
	if peer.Rx.Bytes < 2*labTunnelBytes || peer.Tx.Packets == 0 {
		t.Errorf("peer counters: rx %d bytes, tx %d packets", peer.Rx.Bytes, peer.Tx.Packets)
	}
	if !strings.Contains(out.String(), "vpn "+clientName+" real 198.18.30.1:") {
		t.Error("counters do not show the VPN peer")
	}
	checkGone(t, s)
}

// Keep leaves the appliance running and forwarding after Run returns;
// Clean then removes it all.
func TestKeepThenClean(t *testing.T) {
	nstest.RequireRoot(t)
	s := hook(t)
	var out bytes.Buffer
	err := Run(context.Background(), Options{Duration: time.Second, Keep: true, NoVPN: true, Out: &out, Binary: testBinary(t)})
	t.Log(out.String())
	t.Cleanup(func() { _ = s.st.remove() }) // whatever happens below
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("ovfwd pid %d", s.daemonPID)) || !strings.Contains(out.String(), "ip netns exec") {
		t.Error("Keep did not print the appliance's PID and how to enter")
	}
	// Still forwarding: the appliance is a process of its own.
	if out, err := s.lr.tp.A.Run("ping", "-c", "2", "-i", "0.2", "-W", "2", "198.18.31.1"); err != nil {
		t.Errorf("kept lab does not forward: %v\n%s", err, out)
	}
	// A running lab is not touched by Clean; this one's process (the test)
	// is alive, so make it look gone the way a finished `ovfwd lab` does.
	if err := Clean(nil); err != nil {
		t.Fatal(err)
	}
	if !s.st.Procs[0].alive() {
		t.Fatal("Clean stopped the appliance of a lab whose process still runs")
	}
	markExited(t, s.st.Dir)
	var cl bytes.Buffer
	if err := Clean(&cl); err != nil {
		t.Fatal(err)
	}
	t.Log(cl.String())
	if !strings.Contains(cl.String(), fmt.Sprintf("ovfwd %d", s.daemonPID)) {
		t.Errorf("Clean did not report stopping ovfwd %d", s.daemonPID)
	}
	checkGone(t, s)
}

// markExited rewrites a lab's state as if its lab process had exited.
func markExited(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "state.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	st.LabStart++ // no process has this PID and this start time
	st.Dir = dir
	if err := st.save(); err != nil {
		t.Fatal(err)
	}
}

// crashHelperEnv makes the test binary a lab that runs until killed.
const crashHelperEnv = "OVFWD_LAB_CRASH_HELPER"

func TestCrashHelper(t *testing.T) {
	if os.Getenv(crashHelperEnv) == "" {
		t.Skip("helper process for TestCrashedLabIsSwept")
	}
	_ = Run(context.Background(), Options{Duration: time.Minute, Out: os.Stdout, Binary: os.Getenv(crashHelperEnv)})
}

// helperLab starts the test binary as a lab that runs for a minute, and
// waits until it prints counters; it returns the process, its exit channel
// and what its state.json recorded.
func helperLab(t *testing.T) (*exec.Cmd, chan struct{}, *netns.SyncBuffer, *seen) {
	t.Helper()
	out := &netns.SyncBuffer{}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.v")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+testBinary(t))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < 1200 && !strings.Contains(out.String(), "drops: ") && time.Now().Before(deadline); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "drops: ") {
		t.Fatalf("helper lab never printed counters:\n%s", out.String())
	}
	dir := filepath.Join(StateRoot, strconv.Itoa(cmd.Process.Pid))
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := &seen{}
	if err := json.Unmarshal(b, &s.st); err != nil {
		t.Fatal(err)
	}
	s.st.Dir = dir
	if len(s.st.Namespaces) != 3 || len(s.st.Procs) != 2 {
		t.Fatalf("helper lab recorded namespaces %v, procs %v", s.st.Namespaces, s.st.Procs)
	}
	return cmd, exited, out, s
}

// A lab whose process was killed (SIGKILL: no cleanup ran) is removed by
// the next run: its namespaces, its appliance and its work directory.
func TestCrashedLabIsSwept(t *testing.T) {
	nstest.RequireRoot(t)
	cmd, exited, _, s := helperLab(t)
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	<-exited
	list, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range s.st.Namespaces {
		if !strings.Contains(string(list), ns) {
			t.Fatalf("crashed lab's namespace %s is already gone: nothing to prove", ns)
		}
	}
	var next bytes.Buffer
	err := Run(context.Background(), Options{Duration: time.Second, NoVPN: true, Out: &next, Binary: testBinary(t)})
	t.Log(next.String())
	if err != nil {
		t.Fatalf("next Run: %v", err)
	}
	if !strings.Contains(next.String(), fmt.Sprintf("removing the lab of pid %d", cmd.Process.Pid)) {
		t.Error("the next run did not report removing the crashed lab")
	}
	checkGone(t, s)
}

// Ctrl-C (SIGINT) ends a lab that runs without a duration: it prints its
// summary, stops ovfwd and openvpn, and removes everything.
func TestInterruptCleansUp(t *testing.T) {
	nstest.RequireRoot(t)
	cmd, exited, out, s := helperLab(t)
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("lab did not end within 30 s of SIGINT:\n%s", out.String())
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "lab: removed host A") || !strings.Contains(out.String(), "tunnel tcp") {
		t.Error("the interrupted lab did not print its summary and removal")
	}
	checkGone(t, s)
}

// arpBlock is how long TestRunWaitsForSlowNextHop keeps host B from
// answering ARP: longer than one of the appliance's resolution attempts
// (3 s), so the first attempt fails whatever the machine's speed.
const arpBlock = 4 * time.Second

// A lab whose next hop resolves late — host B answers no ARP for the
// first seconds after the tunnel is up, as on a machine still coming up —
// still passes: Run waits until every path answers before the timed
// traffic. Started at once, the IPv4 pings fail, no UDP datagram arrives
// and the transfers' dials time out while the appliance holds their SYNs
// for a neighbour that does not answer.
func TestRunWaitsForSlowNextHop(t *testing.T) {
	nstest.RequireRoot(t)
	if _, err := exec.LookPath("openvpn"); err != nil {
		t.Fatal("openvpn is not installed (make deps installs it)")
	}
	s := hook(t)
	record := testHookRunning
	released := make(chan string, 1)
	testHookRunning = func(lr *running) {
		record(lr)
		// B's ARP (requests and replies) is dropped on its way out; its
		// IPv6 (ND) is not touched.
		b := lr.tp.B
		for _, args := range [][]string{
			{"nft", "add", "table", "arp", "coldstart"},
			{"nft", "add", "chain", "arp", "coldstart", "out", "{ type filter hook output priority 0; }"},
			{"nft", "add", "rule", "arp", "coldstart", "out", "counter", "drop"},
		} {
			if out, err := b.Run(args...); err != nil {
				t.Errorf("%v: %v\n%s", args, err, out)
			}
		}
		go func() {
			time.Sleep(arpBlock)
			rules, _ := b.Run("nft", "list", "table", "arp", "coldstart")
			_, _ = b.Run("nft", "delete", "table", "arp", "coldstart")
			released <- rules
		}()
	}
	var out bytes.Buffer
	err := Run(context.Background(), Options{Duration: 3 * time.Second, Out: &out, Binary: testBinary(t)})
	t.Log(out.String())
	if !s.sawRunning {
		t.Fatalf("the lab never came up: %v", err)
	}
	var rules string
	select {
	case rules = <-released:
	case <-time.After(arpBlock + 10*time.Second):
		t.Fatal("the ARP block was never lifted")
	}
	// The block was in force: B's ARP replies to the appliance were dropped.
	m := regexp.MustCompile(`counter packets (\d+)`).FindStringSubmatch(rules)
	if m == nil || m[1] == "0" {
		t.Fatalf("host B's ARP was not blocked (nothing to prove):\n%s", rules)
	}
	if err != nil {
		t.Fatalf("Run with a next hop that resolves late: %v", err)
	}
	if !strings.Contains(out.String(), "lab: paths answer: 198.18.31.1 (routed)") {
		t.Error("Run did not report the paths answering")
	}
	tr := s.res.traffic
	if tr.plain.OK == 0 || tr.plain.Bad > 0 || tr.tunnel.OK == 0 || tr.tunnel.Bad > 0 {
		t.Errorf("%s; %s", tr.plain.Summary("routed tcp", labTCPBytes), tr.tunnel.Summary("tunnel tcp", labTunnelBytes))
	}
	checkGone(t, s)
}
