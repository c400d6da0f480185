package vpnload

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis: fields count from
	// the last ')'.
	line := "4242 (ovfwd (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 15 -5 9 0 100 0 0\n"
	got, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got.user != 1234 || got.system != 567 {
		t.Fatalf("utime, stime = %d, %d; want 1234, 567", got.user, got.system)
	}
	for _, bad := range []string{"", "4242 ovfwd S 1", "4242 (ovfwd) S 1 2 3", "4242 (ovfwd) S 1 4242 4242 0 -1 4194560 100 0 0 0 x 567 0"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q): no error", bad)
		}
	}
}

const procStat = `cpu  100 1 50 1000 2 0 30 0 0 0
cpu0 60 1 30 400 1 0 20 0 0 0
cpu1 40 0 20 600 1 3 10 5 0 0
cpu10 9 9 9 9 9 9 9 9 0 0
intr 123
`

func TestParseCPUTimes(t *testing.T) {
	got, err := parseCPUTimes([]byte(procStat), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := cpuTimes{user: 40, system: 20, idle: 600, iowait: 1, irq: 3, softirq: 10, steal: 5}
	if got != want {
		t.Fatalf("cpu1 = %+v; want %+v", got, want)
	}
	if _, err := parseCPUTimes([]byte(procStat), 2); err == nil {
		t.Error("cpu2: no error for a CPU /proc/stat does not list")
	}
	if _, err := parseCPUTimes([]byte("cpu1 1 2 x 4 5 6 7 8\n"), 1); err == nil {
		t.Error("malformed field: no error")
	}
}

// The real files parse: the bench reads them on every run.
func TestReadOwnTimes(t *testing.T) {
	if _, err := readProcTimes(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := readCPUTimes(0); err != nil {
		t.Fatal(err)
	}
	if c, err := readCPUTimes(-1); err != nil || c != (cpuTimes{}) {
		t.Fatalf("unpinned: %+v, %v; want nothing read", c, err)
	}
}

func TestSplit(t *testing.T) {
	// 2 s window, 200 ticks. The process: 60 ticks user, 80 system, of
	// which some landed in softirq; the CPU: 70 user, 90 system, 30
	// softirq, 10 idle.
	p0, p1 := procTimes{user: 1000, system: 2000}, procTimes{user: 1060, system: 2080}
	c0 := cpuTimes{user: 500, nice: 5, system: 700, idle: 9000, softirq: 100}
	c1 := cpuTimes{user: 565, nice: 10, system: 790, idle: 9010, softirq: 130}
	s := split(p0, p1, c0, c1, 2)
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v; want %v", name, got, want)
		}
	}
	near("ProcUser", s.ProcUser, 0.30)
	near("ProcSystem", s.ProcSystem, 0.40)
	near("User", s.User, 0.35)
	near("System", s.System, 0.45)
	near("Softirq", s.Softirq, 0.15)
	near("Idle", s.Idle, 0.05)
	// busy 0.35+0.45+0.15 = 0.95, the process 0.70: 0.25 was not its.
	near("Other", s.Other, 0.25)
	if !strings.Contains(s.String(), "idle   5%") {
		t.Errorf("String() = %q; want the idle share in it", s.String())
	}
	if z := split(p0, p1, c0, c1, 0); z != (CPUSplit{}) {
		t.Errorf("zero window: %+v", z)
	}
	// Counters never run backwards; if a read did, the share is 0, not huge.
	if b := split(p1, p0, c1, c0, 2); b.ProcUser != 0 || b.Idle != 0 || b.Other != 0 {
		t.Errorf("backwards: %+v", b)
	}
}

func TestParseSchedstat(t *testing.T) {
	got, err := parseSchedstat([]byte("1012331 6391066 8\n"))
	if err != nil || got != (schedTimes{run: 1012331, wait: 6391066}) {
		t.Fatalf("parseSchedstat = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "12", "x 1 2", "1 -2 3"} {
		if _, err := parseSchedstat([]byte(bad)); err == nil {
			t.Errorf("parseSchedstat(%q): no error", bad)
		}
	}
	own, err := readSchedTimes(os.Getpid())
	if err != nil || own.run == 0 {
		t.Fatalf("own threads: %+v, %v; want some run time", own, err)
	}
}
