package vpnload

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procTimes is a process's user and system time in clock ticks
// (/proc/PID/stat utime and stime).
type procTimes struct{ user, system uint64 }

func readProcTimes(pid int) (procTimes, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procTimes{}, err
	}
	return parseProcStat(b)
}

// parseProcStat reads utime and stime, fields 14 and 15 (1-based) of
// proc(5), counted after the parenthesised command name, which may hold
// spaces and parentheses itself.
func parseProcStat(b []byte) (procTimes, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procTimes{}, errors.New("vpnload: malformed /proc/pid/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return procTimes{}, errors.New("vpnload: short /proc/pid/stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return procTimes{}, fmt.Errorf("vpnload: /proc/pid/stat: %w", err)
	}
	return procTimes{user: ut, system: st}, nil
}

func (p procTimes) seconds() float64 { return float64(p.user+p.system) / clockTicks }

// cpuTimes is one CPU's line of /proc/stat in clock ticks (proc(5): user,
// nice, system, idle, iowait, irq, softirq, steal; guest time is inside
// user and nice already).
type cpuTimes struct {
	user, nice, system, idle, iowait, irq, softirq, steal uint64
}

// readCPUTimes reads CPU cpu's line; cpu < 0 reads nothing (an unpinned
// run has no one CPU to split).
func readCPUTimes(cpu int) (cpuTimes, error) {
	if cpu < 0 {
		return cpuTimes{}, nil
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	return parseCPUTimes(b, cpu)
}

func parseCPUTimes(b []byte, cpu int) (cpuTimes, error) {
	want := "cpu" + strconv.Itoa(cpu)
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != want {
			continue
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[1+i], 10, 64)
			if err != nil {
				return cpuTimes{}, fmt.Errorf("vpnload: /proc/stat %s: %w", want, err)
			}
			v[i] = n
		}
		return cpuTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}, nil
	}
	return cpuTimes{}, fmt.Errorf("vpnload: /proc/stat has no %s", want)
}

// CPUSplit is where one CPU's time went over a window, each a share of
// the window (0..1), from /proc/stat's tick accounting; with the server's
// own user and system time beside it. The kernel charges each tick to one
// /proc/stat field, but a softirq tick landing while a process runs (a
// softirq run at the end of its system call, say) is also that process's
// system time: Softirq overlaps ProcSystem, and Other is the CPU's busy
// share that was not the process's.
type CPUSplit struct {
	ProcUser, ProcSystem float64 // the process: utime, stime
	User, System         float64 // the CPU: user+nice, system
	Softirq, Irq         float64
	Idle                 float64 // idle+iowait
	Steal                float64
	Other                float64 // busy (not idle, not steal) minus the process's time
	// Wait is the time the process's threads were runnable but waiting
	// for a CPU (schedstat), summed over threads: high when other load
	// on its CPU starved the server, about 0 on a quiet machine.
	Wait float64
}

func split(p0, p1 procTimes, c0, c1 cpuTimes, seconds float64) CPUSplit {
	if seconds <= 0 {
		return CPUSplit{}
	}
	share := func(a, b uint64) float64 {
		if b < a {
			return 0
		}
		return float64(b-a) / clockTicks / seconds
	}
	s := CPUSplit{
		ProcUser:   share(p0.user, p1.user),
		ProcSystem: share(p0.system, p1.system),
		User:       share(c0.user+c0.nice, c1.user+c1.nice),
		System:     share(c0.system, c1.system),
		Softirq:    share(c0.softirq, c1.softirq),
		Irq:        share(c0.irq, c1.irq),
		Idle:       share(c0.idle+c0.iowait, c1.idle+c1.iowait),
		Steal:      share(c0.steal, c1.steal),
	}
	s.Other = max(0, s.User+s.System+s.Softirq+s.Irq-s.ProcUser-s.ProcSystem)
	return s
}

func (s CPUSplit) String() string {
	return fmt.Sprintf("user %3.0f%% sys %3.0f%% waiting %3.0f%% | cpu: softirq %3.0f%% idle %3.0f%% other %3.0f%%",
		100*s.ProcUser, 100*s.ProcSystem, 100*s.Wait, 100*s.Softirq, 100*s.Idle, 100*s.Other)
}

// schedTimes is what the scheduler says of a set of threads
// (/proc/PID/task/TID/schedstat, CONFIG_SCHED_INFO): nanoseconds on a CPU
// and nanoseconds runnable but waiting for one, summed.
type schedTimes struct{ run, wait uint64 }

// readSchedTimes sums the schedstat of every thread of pid (a kernel
// thread is its own only thread).
func readSchedTimes(pid int) (schedTimes, error) {
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(files) == 0 {
		return schedTimes{}, fmt.Errorf("vpnload: no schedstat for %d", pid)
	}
	var sum schedTimes
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that exited meanwhile
		}
		st, err := parseSchedstat(b)
		if err != nil {
			return schedTimes{}, err
		}
		sum.run += st.run
		sum.wait += st.wait
	}
	return sum, nil
}

// parseSchedstat reads one schedstat line: run ns, wait ns, timeslices.
func parseSchedstat(b []byte) (schedTimes, error) {
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return schedTimes{}, errors.New("vpnload: short schedstat")
	}
	run, err1 := strconv.ParseUint(f[0], 10, 64)
	wait, err2 := strconv.ParseUint(f[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return schedTimes{}, fmt.Errorf("vpnload: schedstat: %w", err)
	}
	return schedTimes{run: run, wait: wait}, nil
}
