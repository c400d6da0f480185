package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pinThread binds the calling (locked) OS thread to cpu.
func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}

// cpuTimes are /proc/stat's busy, softirq and total jiffies per CPU.
type cpuTimes struct{ busy, softirq, total []uint64 }

func readCPUTimes() cpuTimes {
	var t cpuTimes
	f, err := os.Open("/proc/stat")
	if err != nil {
		return t
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 || !strings.HasPrefix(fs[0], "cpu") || fs[0] == "cpu" {
			continue
		}
		var busy, softirq, total uint64
		for i, s := range fs[1:] {
			v, _ := strconv.ParseUint(s, 10, 64)
			total += v
			if i != 3 && i != 4 { // idle, iowait
				busy += v
			}
			if i == 6 {
				softirq = v
			}
		}
		t.busy = append(t.busy, busy)
		t.softirq = append(t.softirq, softirq)
		t.total = append(t.total, total)
	}
	return t
}

// busyPercent is each CPU's busy share between a and b.
func busyPercent(a, b cpuTimes) []float64 {
	var out []float64
	for i := range b.busy {
		if i >= len(a.busy) || b.total[i] == a.total[i] {
			out = append(out, 0)
			continue
		}
		out = append(out, 100*float64(b.busy[i]-a.busy[i])/float64(b.total[i]-a.total[i]))
	}
	return out
}

func pinPID(pid, cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(pid, &set)
}

// threadTimes returns each thread's user+system CPU seconds
// (/proc/PATH/stat fields 14 and 15, in clock ticks of 1/100 s); a thread
// is "self/task/TID" or, for a kernel thread, its PID.
func threadTimes(threads []string) []float64 {
	var out []float64
	for _, th := range threads {
		b, err := os.ReadFile("/proc/" + th + "/stat")
		var secs float64
		if err == nil {
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i >= 0 {
				f := strings.Fields(s[i+1:])
				if len(f) > 12 {
					u, _ := strconv.ParseUint(f[11], 10, 64)
					k, _ := strconv.ParseUint(f[12], 10, 64)
					secs = float64(u+k) / 100
				}
			}
		}
		out = append(out, secs)
	}
	return out
}

// busySeconds is CPU cpu's busy time (every category but idle and
// iowait) between a and b. Each tick is counted once, in one category.
func busySeconds(a, b cpuTimes, cpu int) float64 {
	if cpu >= len(a.busy) || cpu >= len(b.busy) {
		return 0
	}
	return float64(b.busy[cpu]-a.busy[cpu]) / 100
}

// softirqSeconds is the softirq time CPU cpu spent between a and b.
func softirqSeconds(a, b cpuTimes, cpu int) float64 {
	if cpu >= len(a.softirq) || cpu >= len(b.softirq) {
		return 0
	}
	return float64(b.softirq[cpu]-a.softirq[cpu]) / 100
}
