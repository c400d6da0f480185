package vpne2e

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit"
)

var loadUnit = sync.OnceValues(unit.Load)

// startUnit runs `bin args` in ns as packaging/ovfwd.service runs ovfwd
// (see appliance/testbed/unit), its output appended to logPath. dir is
// laid out as the unit's (state/ and run/ given to its user, as systemd
// does before each start); bin is copied there when the user cannot run it
// where it is; pre goes in front of the unit's command (taskset). The
// started process is checked in /proc, and logf (if not nil) gets, once per
// process, what the daemon runs with.
func startUnit(ns *netns.NS, dir, logPath string, pre []string, logf func(string, ...any), bin string, args ...string) (*proc, error) {
	u, err := loadUnit()
	if err != nil {
		return nil, err
	}
	argv, err := u.Command(dir, bin, args...)
	if err != nil {
		return nil, err
	}
	p, err := start(ns, logPath, append(pre, argv...)...)
	if err != nil {
		return nil, err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := u.Report(p.PID(), logf); err != nil {
		p.stop(syscall.SIGKILL, 0)
		return nil, fmt.Errorf("vpne2e: %v\n%s", err, logTail(logPath, 4000))
	}
	return p, nil
}
