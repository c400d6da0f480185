package netns

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// PinProcess binds every thread, and its undo gives each its old set back.
func TestPinProcess(t *testing.T) {
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for c := 0; cpu < 0 && c < 1024; c++ {
		if old.IsSet(c) {
			cpu = c
		}
	}
	threads := func(check func(tid int, s unix.CPUSet)) {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tasks {
			tid, _ := strconv.Atoi(e.Name())
			var s unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &s); err == nil {
				check(tid, s)
			}
		}
	}
	restore, err := PinProcess(cpu)
	if err != nil {
		t.Fatal(err)
	}
	threads(func(tid int, s unix.CPUSet) {
		if s.Count() != 1 || !s.IsSet(cpu) {
			t.Errorf("thread %d may run on %d CPUs, want CPU %d only", tid, s.Count(), cpu)
		}
	})
	restore()
	threads(func(tid int, s unix.CPUSet) {
		if s != old {
			t.Errorf("thread %d not given its CPUs back", tid)
		}
	})
}
