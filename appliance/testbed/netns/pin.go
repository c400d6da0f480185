package netns

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// PinProcess binds every thread of this process to cpu, and with them
// every process it starts from now on (a child inherits its creator's
// affinity), and returns the undo. Benches use it to keep the load they
// generate off the CPU of the server they measure.
func PinProcess(cpu int) (func(), error) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, err
	}
	set.Set(cpu)
	each := func(s *unix.CPUSet) error {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		var errs []error
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, s); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	if err := each(&set); err != nil {
		_ = each(&old)
		return nil, err
	}
	return func() { _ = each(&old) }, nil
}
