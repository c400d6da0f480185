// Package netns builds throw-away network namespaces joined by veth pairs for
// ovfwd's privileged tests and for the lab. Every namespace it makes carries
// a prefix and the creating PID in its name, so a later run can find and
// remove what a crashed run left behind, and nothing ever touches the root
// namespace's links or routes.
package netns

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	vnetns "github.com/vishvananda/netns"
)

// Prefix starts the name of every namespace this package makes.
const Prefix = "ovfwd-"

var seq atomic.Uint32

// NS is one network namespace and the processes started in it.
type NS struct {
	Name  string
	mu    sync.Mutex
	procs []*exec.Cmd
}

// Create makes a namespace named Prefix+tag+"-"+pid+"-"+n with loopback up.
func Create(tag string) (*NS, error) {
	name := fmt.Sprintf("%s%s-%d-%d", Prefix, tag, os.Getpid(), seq.Add(1))
	if len(name) > 60 {
		return nil, fmt.Errorf("netns: name %q too long", name)
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("netns: ip netns add %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	ns := &NS{Name: name}
	if _, err := ns.Run("ip", "link", "set", "lo", "up"); err != nil {
		ns.Delete()
		return nil, err
	}
	return ns, nil
}

// Run runs a command inside the namespace and returns its combined output.
func (ns *NS) Run(args ...string) (string, error) {
	full := append([]string{"netns", "exec", ns.Name}, args...)
	ctxCmd := exec.Command("ip", full...)
	var out bytes.Buffer
	ctxCmd.Stdout, ctxCmd.Stderr = &out, &out
	if err := ctxCmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- ctxCmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return out.String(), fmt.Errorf("netns %s: %s: %v: %s", ns.Name, strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
		}
		return out.String(), nil
	case <-time.After(2 * time.Minute):
		_ = ctxCmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("netns %s: %s: timed out after 2m", ns.Name, strings.Join(args, " "))
	}
}

// MustRun is Run for setup steps: it panics on failure with the output.
func (ns *NS) MustRun(args ...string) string {
	out, err := ns.Run(args...)
	if err != nil {
		panic(err)
	}
	return out
}

// Start starts a long-running command inside the namespace in its own
// process group. Delete kills it (and only it) by PID.
func (ns *NS) Start(stdout, stderr *bytes.Buffer, args ...string) (*exec.Cmd, error) {
	full := append([]string{"netns", "exec", ns.Name}, args...)
	c := exec.Command("ip", full...)
	if stdout != nil {
		c.Stdout = stdout
	}
	if stderr != nil {
		c.Stderr = stderr
	}
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return nil, err
	}
	ns.mu.Lock()
	ns.procs = append(ns.procs, c)
	ns.mu.Unlock()
	return c, nil
}

// Do runs f on an OS thread that has entered the namespace. Sockets f opens
// stay in the namespace after Do returns.
func (ns *NS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is never returned to the pool: it dies with the
		// goroutine, so no other goroutine can inherit the namespace.
		runtime.LockOSThread()
		h, err := vnetns.GetFromName(ns.Name)
		if err != nil {
			errc <- err
			return
		}
		defer h.Close()
		if err := vnetns.Set(h); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

// Delete kills every process Start started (SIGTERM, then SIGKILL after
// 2 s), then removes the namespace. Safe to call twice.
func (ns *NS) Delete() {
	ns.mu.Lock()
	procs := ns.procs
	ns.procs = nil
	ns.mu.Unlock()
	for _, c := range procs {
		killGroup(c)
	}
	_ = exec.Command("ip", "netns", "del", ns.Name).Run()
}

func killGroup(c *exec.Cmd) {
	if c.Process == nil || c.ProcessState != nil {
		return
	}
	pid := c.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
}

// GlobalAddrs reads dev's first global IPv4 and IPv6 address in ns (an
// invalid Addr for a family it has none of).
func (ns *NS) GlobalAddrs(dev string) (v4, v6 netip.Addr, err error) {
	out, err := ns.Run("ip", "-j", "addr", "show", "dev", dev)
	if err != nil {
		return v4, v6, err
	}
	var links []struct {
		AddrInfo []struct {
			Local string `json:"local"`
			Scope string `json:"scope"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		return v4, v6, err
	}
	for _, l := range links {
		for _, a := range l.AddrInfo {
			ip, err := netip.ParseAddr(a.Local)
			if err != nil || a.Scope != "global" {
				continue
			}
			if ip.Is4() && !v4.IsValid() {
				v4 = ip
			} else if ip.Is6() && !v6.IsValid() {
				v6 = ip
			}
		}
	}
	return v4, v6, nil
}

// SyncBuffer is a bytes.Buffer one goroutine reads while a process in a
// namespace writes its output to it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Veth joins a and b with a veth pair named ifA (in a) and ifB (in b), both up.
func Veth(a *NS, ifA string, b *NS, ifB string) error {
	out, err := exec.Command("ip", "link", "add", ifA, "netns", a.Name, "type", "veth", "peer", "name", ifB, "netns", b.Name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: veth %s/%s: %v: %s", ifA, ifB, err, bytes.TrimSpace(out))
	}
	if _, err := a.Run("ip", "link", "set", ifA, "up"); err != nil {
		return err
	}
	_, err = b.Run("ip", "link", "set", ifB, "up")
	return err
}

// Stale lists namespaces with our prefix whose creating process is gone.
func Stale() []string {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil
	}
	var stale []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], Prefix) {
			continue
		}
		parts := strings.Split(f[0], "-")
		if len(parts) < 3 {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(parts[len(parts)-2], &pid); err != nil {
			continue
		}
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			continue
		}
		stale = append(stale, f[0])
	}
	return stale
}

// Sweep removes the namespaces Stale reports and returns their names.
func Sweep() []string {
	stale := Stale()
	for _, name := range stale {
		_ = exec.Command("ip", "netns", "del", name).Run()
	}
	return stale
}
