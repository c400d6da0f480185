package vpnload

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// Targets.
const (
	TargetOvfwd   = "ovfwd"
	TargetOpenVPN = "openvpn"
	// TargetOvfwdB is Options.OvfwdBinB, the B side of an A/B of two
	// ovfwd builds, run right after each ovfwd run.
	TargetOvfwdB = "ovfwd-b"
)

// Generators (Options.Generator).
const (
	// GenRaw seals into pre-addressed frames and sends them from packet
	// sockets on the client link, several threads (gen_raw.go).
	GenRaw = "raw"
	// GenSocket sends through each client's own UDP socket, one
	// goroutine per client (load.go).
	GenSocket = "socket"
)

// server is one running server under test.
type server struct {
	target string
	cmd    *exec.Cmd
	exited chan struct{}
	log    func() string
	stop   func()
	status string // ovfwd's status socket
	// helpers are kernel threads doing the server's work (the threaded
	// NAPI of Options.IngressOnServer), counted in its CPU time.
	helpers []int
	waitErr error // the process's exit, once exited is closed
}

// pid is the server process (ip netns exec execs it, keeping the pid).
func (s *server) pid() int { return s.cmd.Process.Pid }

// cpuSeconds is the process's user+system time so far.
func (s *server) cpuSeconds() (float64, error) {
	t, err := s.times()
	return t.seconds(), err
}

// times is the process's user and system time so far, with its helper
// threads'.
func (s *server) times() (procTimes, error) {
	t, err := readProcTimes(s.pid())
	for _, h := range s.helpers {
		ht, herr := readProcTimes(h)
		t.user, t.system, err = t.user+ht.user, t.system+ht.system, errors.Join(err, herr)
	}
	return t, err
}

// sched is the scheduler's run and wait time of the process's threads
// and its helpers.
func (s *server) sched() (schedTimes, error) {
	t, err := readSchedTimes(s.pid())
	for _, h := range s.helpers {
		ht, herr := readSchedTimes(h)
		t.run, t.wait, err = t.run+ht.run, t.wait+ht.wait, errors.Join(err, herr)
	}
	return t, err
}

// rssBytes is the process's resident set size.
func (s *server) rssBytes() (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid()))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			kb, err := strconv.ParseUint(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("vpnload: no VmRSS")
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

func startProcess(t *topology, target string, log func() string, stdout *netns.SyncBuffer, args ...string) (*server, error) {
	full := append([]string{"netns", "exec", t.srv.Name}, args...)
	cmd := exec.Command("ip", full...)
	if stdout != nil {
		cmd.Stdout, cmd.Stderr = stdout, stdout
	}
	// A session of its own puts the server in its own scheduler autogroup:
	// sharing one with the load clients would split one group's CPU weight
	// between the server and the load it is measured against.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{target: target, cmd: cmd, exited: make(chan struct{}), log: log}
	go func() { s.waitErr = cmd.Wait(); close(s.exited) }()
	s.stop = func() {
		// Ours, by pid: SIGTERM, then SIGKILL if it lingers.
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	}
	return s, nil
}

// waitReady polls ok until it holds, the process exits, or d passes.
func (s *server) waitReady(d time.Duration, ok func() bool) error {
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline) && i < 10000; i++ {
		select {
		case <-s.exited:
			return fmt.Errorf("vpnload: %s exited during start (%v):\n%s", s.target, s.waitErr, tail(s.log(), 2000))
		default:
		}
		if ok() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("vpnload: %s not ready after %v:\n%s", s.target, d, tail(s.log(), 2000))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// startOpenVPN runs openvpn 2.6 --server pinned to o.ServerCPU (-1:
// unpinned), at the nice of ovfwd's workers.
func startOpenVPN(t *topology, dir string, o *Options) (*server, error) {
	if err := t.kernelRouting(true); err != nil {
		return nil, err
	}
	conf := strings.Join([]string{
		"dev tun", "proto udp", "port " + strconv.Itoa(vpnPort), "topology subnet",
		"server " + poolNet + " " + poolMask,
		"ca " + filepath.Join(dir, pki.CACertFile), "cert " + filepath.Join(dir, pki.ServerCertFile),
		"key " + filepath.Join(dir, pki.ServerKeyFile), "tls-crypt " + filepath.Join(dir, pki.TLSCryptFile),
		"dh none", "data-ciphers AES-256-GCM", "keepalive 10 60", "explicit-exit-notify 1",
		"max-clients 2048", "connect-freq-initial 100000 10", "reneg-sec 0",
		"sndbuf 4194304", "rcvbuf 4194304", "txqueuelen 10000",
		"push \"route " + "198.18.82.0 255.255.255.0\"",
		// The priority ovfwd's workers give themselves.
		fmt.Sprintf("nice %d", runner.WorkerNice),
		"verb 1",
	}, "\n") + "\n"
	confPath := filepath.Join(dir, "openvpn-server.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "openvpn-server.log")
	_ = os.Remove(logPath)
	readLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	args := []string{o.OpenVPNBin, "--config", confPath, "--log", logPath}
	if o.ServerCPU >= 0 {
		args = append([]string{"taskset", "-c", strconv.Itoa(o.ServerCPU)}, args...)
	}
	s, err := startProcess(t, TargetOpenVPN, readLog, nil, args...)
	if err != nil {
		return nil, err
	}
	inner := s.stop
	s.stop = func() { inner(); _ = t.kernelRouting(false) }
	if err := s.waitReady(15*time.Second, func() bool { return strings.Contains(readLog(), "Initialization Sequence Completed") }); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

const ovfwdConfig = `
[appliance]
mode = "router"
# Every client sits behind one address (one next hop): hold more than the
# default 4 packets while it resolves, or the first handshake replies to
# a burst of clients are dropped and retried 2 s later.
neighbour_hold = 64
%s

[[port]]
name = "p0"
driver = "%s"
ifname = "p0"
addresses = ["198.18.80.1/24"]

[[port]]
name = "p1"
driver = "%s"
ifname = "p1"
addresses = ["198.18.81.1/24"]

[[route]]
prefix = "198.18.82.0/24"
via = "198.18.81.2"

[vpn]
enabled = true
port = 1194
ca = "%s"
cert = "%s"
key = "%s"
tls_crypt = "%s"
pool_v4 = "198.18.84.0/22"
push_routes = ["198.18.82.0/24"]
ciphers = ["AES-256-GCM"]
keepalive_interval = "%s"
keepalive_timeout = "%s"
reneg_sec = 0
max_peers = 2048
max_half_open = 1024
max_half_open_per_source = 1024
handshake_timeout = "60s"
handshake_rate = 100000

[metrics]
listen = ""

[status]
socket = "%s"

[log]
level = "warn"
`

// startOvfwd runs the ovfwd daemon bin with the VPN server on AF_XDP ports,
// as its unit runs it, in dir: the work directory (layout), the PKI in
// pkiIn(dir).
func startOvfwd(t *topology, dir, bin string, o *Options) (*server, error) {
	workers := ""
	if o.ServerCPU >= 0 {
		workers = fmt.Sprintf("workers = [%d]", o.ServerCPU)
	}
	if o.OvfwdPoll != "" {
		workers += fmt.Sprintf("\npoll = %q", o.OvfwdPoll)
	}
	sock := filepath.Join(dir, "run", "ovfwd.sock")
	pkiDir := pkiIn(dir)
	conf := fmt.Sprintf(ovfwdConfig, workers, o.OvfwdDriver, o.OvfwdDriver,
		filepath.Join(pkiDir, pki.CACertFile), filepath.Join(pkiDir, pki.ServerCertFile),
		filepath.Join(pkiDir, pki.ServerKeyFile), filepath.Join(pkiDir, pki.TLSCryptFile),
		durationText(o.Keepalive), durationText(o.KeepaliveTimeout), sock)
	confPath := filepath.Join(dir, "ovfwd.toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	// As packaging/ovfwd.service runs it; the tree laid out again (state/
	// and run/ given to the unit's user, as systemd does before each start).
	u, err := loadUnit()
	if err != nil {
		return nil, err
	}
	args, err := u.Command(dir, bin, "run", "-c", confPath)
	if err != nil {
		return nil, err
	}
	out := &netns.SyncBuffer{}
	if o.ServerCPU >= 0 {
		args = append([]string{"taskset", "-c", strconv.Itoa(o.ServerCPU)}, args...)
	}
	s, err := startProcess(t, TargetOvfwd, out.String, out, args...)
	if err != nil {
		return nil, err
	}
	s.status = sock
	if err := u.Report(s.cmd.Process.Pid, o.Logf); err != nil {
		s.stop()
		return nil, fmt.Errorf("vpnload: %v\n%s", err, tail(out.String(), 2000))
	}
	if err := s.waitReady(20*time.Second, func() bool {
		st, err := status.Fetch(sock, time.Second)
		return err == nil && st.VPN != nil
	}); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func durationText(d time.Duration) string { return strconv.Itoa(int(d/time.Second)) + "s" }
