package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// child is a process the lab started in one of its namespaces, logging
// to a file (never a pipe: with Keep it outlives the lab, and a write to a
// closed pipe would kill it).
type child struct {
	name   string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // valid once exited is closed
}

// startChild runs args in ns with ip netns exec (which execs, so the PID
// is the program's own). Unless it must outlive the lab, the kernel sends
// it SIGTERM when the lab dies, even by SIGKILL.
func startChild(st *state, ns *netns.NS, name, logPath string, outlive bool, args ...string) (*child, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := &child{name: name, log: logPath, exited: make(chan struct{})}
	c.cmd = exec.Command("ip", append([]string{"netns", "exec", ns.Name}, args...)...)
	c.cmd.Stdout, c.cmd.Stderr = f, f
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !outlive {
		c.cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	}
	// Pdeathsig fires when the forking thread ends, not the process, and
	// the runtime ends threads (e.g. those netns.NS.Do locked). So fork
	// from a thread locked until the child is gone.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := c.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("lab: start %s: %w", name, err)
	}
	if err := st.addProc(name, c.cmd.Process.Pid); err != nil {
		c.stop(time.Second)
		return nil, err
	}
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) done() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and returns how it ended
// (nil: exit status 0).
func (c *child) stop(grace time.Duration) error {
	if !c.done() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-c.exited:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("lab: %s (pid %d) ignored SIGTERM for %v; killed", c.name, c.pid(), grace)
	}
	return c.err
}

// logTail is the end of the child's log, for errors.
func (c *child) logTail(n int) string {
	b, _ := os.ReadFile(c.log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// waitStatus polls the status socket until ok(snapshot) or the timeout or
// the daemon's exit.
func waitStatus(ctx context.Context, sock string, daemon *child, timeout time.Duration, ok func(*status.Snapshot) bool) (*status.Snapshot, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for i := 0; i < 10000 && time.Now().Before(deadline); i++ {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if daemon.done() {
			return nil, fmt.Errorf("lab: ovfwd exited (%v):\n%s", daemon.err, daemon.logTail(3000))
		}
		s, err := status.Fetch(sock, time.Second)
		if err == nil && ok(s) {
			return s, nil
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("lab: ovfwd not ready in %v (last status error: %v):\n%s", timeout, last, daemon.logTail(3000))
}

// clientName is the lab's VPN client's certificate name.
const clientName = "lab-a"

// clientProfile issues host A's client certificate and profile.
func clientProfile(pkiDir string, server netip.AddrPort) (string, error) {
	return pki.ClientProfile(pkiDir, pki.Profile{
		Name: clientName, Remotes: []string{server.String()},
		Extra: []string{"verb 3", "explicit-exit-notify 1"},
	})
}

// initDone is what openvpn logs once its tunnel is up.
const initDone = "Initialization Sequence Completed"

// waitTunnel waits until the client logged initDone and tun0 has a
// global IPv4 and IPv6 address, and returns them.
func waitTunnel(ctx context.Context, ns *netns.NS, client *child, timeout time.Duration) (v4, v6 netip.Addr, err error) {
	deadline := time.Now().Add(timeout)
	for i := 0; i < 10000 && time.Now().Before(deadline); i++ {
		if ctx.Err() != nil {
			return v4, v6, context.Cause(ctx)
		}
		if client.done() {
			return v4, v6, fmt.Errorf("lab: openvpn exited (%v):\n%s", client.err, client.logTail(3000))
		}
		b, _ := os.ReadFile(client.log)
		if strings.Contains(string(b), initDone) {
			if v4, v6, err = ns.GlobalAddrs("tun0"); err == nil && v4.IsValid() && v6.IsValid() {
				return v4, v6, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return v4, v6, fmt.Errorf("lab: openvpn client not up with an IPv4 and an IPv6 address on tun0 in %v:\n%s", timeout, client.logTail(3000))
}

// ovfwdBinary is the ovfwd executable the lab runs as the appliance:
// given, or this process's own when it is ovfwd.
func ovfwdBinary(given string) (string, error) {
	if given != "" {
		return filepath.Abs(given)
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(self, ".test") {
		return "", fmt.Errorf("lab: Options.Binary is required when not running as ovfwd (this is %s)", self)
	}
	return self, nil
}
