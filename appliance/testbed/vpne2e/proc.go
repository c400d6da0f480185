package vpne2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// proc is one long-running process this package started in a namespace,
// in a session of its own. `ip netns exec` execs the command, so the PID
// is the command's own (what CPU accounting reads).
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // valid after exited is closed
	once   sync.Once
}

// start runs args in ns with stdout and stderr appended to logPath.
func start(ns *netns.NS, logPath string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := exec.Command("ip", append([]string{"netns", "exec", ns.Name}, args...)...)
	c.Stdout, c.Stderr = f, f
	// A session of its own is a scheduler autogroup of its own: a server
	// sharing one with the client and iperf3 (and the test itself) would
	// share one CPU weight with the load it is measured against, and the
	// two servers must be placed alike. Its process group is its PID.
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: c, exited: make(chan struct{})}
	go func() { p.err = c.Wait(); close(p.exited) }()
	return p, nil
}

func (p *proc) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *proc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop sends sig to the process group, waits up to grace, then SIGKILLs
// the group. A process that already ended is left alone; only the first
// call acts.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) {
	p.once.Do(func() {
		pid := p.cmd.Process.Pid
		if p.Exited() {
			return
		}
		_ = syscall.Kill(-pid, sig)
		select {
		case <-p.exited:
		case <-time.After(grace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-p.exited
		}
	})
}

// clockTicks is USER_HZ, what /proc/PID/stat counts in (100 on every
// Linux architecture Go runs on).
const clockTicks = 100

// CPUSeconds is the process's user+system CPU time so far (all threads),
// from /proc/PID/stat fields 14 and 15.
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("vpne2e: bad /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("vpne2e: short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseUint(f[14-3], 10, 64)
	st, err2 := strconv.ParseUint(f[15-3], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("vpne2e: bad /proc/%d/stat times", pid)
	}
	return float64(ut+st) / clockTicks, nil
}
