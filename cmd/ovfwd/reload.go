package main

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// reloadCmd is the unit's ExecReload: it reloads the running daemon and
// fails when the daemon rejects the new config, so `systemctl reload`
// reports the rejection instead of succeeding as `kill -HUP` does. With
// -c the file is checked first and a file that does not load is never
// signalled; either way the daemon keeps its old config on a rejection.
func reloadCmd(args []string) error {
	fs := newFlags("reload", "[-s SOCKET | -c FILE] [-pid PID] [-timeout D]")
	socketPath := socketFlags(fs) // with -c, loading FILE is the check
	pid := fs.Int("pid", 0, "the daemon's PID as the caller knows it (systemd's $MAINPID); refuse a socket served by another")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the daemon's verdict")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sock, err := socketPath()
	if err != nil {
		return err
	}
	before, err := status.Fetch(sock, 5*time.Second)
	if err != nil {
		return err
	}
	if *pid != 0 && before.PID != *pid {
		return fmt.Errorf("%s is served by PID %d, not %d", sock, before.PID, *pid)
	}
	seen := before.Reload.Count + before.Reload.Failed
	if err := syscall.Kill(before.PID, syscall.SIGHUP); err != nil {
		return fmt.Errorf("signalling PID %d: %w", before.PID, err)
	}
	deadline := time.Now().Add(*timeout)
	var last error
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		s, err := status.Fetch(sock, time.Second)
		if err != nil {
			last = err // the status socket restarts when [status] changed
			continue
		}
		if s.PID != before.PID {
			return fmt.Errorf("PID %d was replaced by %d during the reload", before.PID, s.PID)
		}
		if s.Reload.Count+s.Reload.Failed == seen {
			continue
		}
		if s.Reload.Failed > before.Reload.Failed {
			return fmt.Errorf("rejected, still running the previous config: %s", s.Reload.LastError)
		}
		fmt.Printf("reloaded: PID %d\n", s.PID)
		return nil
	}
	return errors.Join(fmt.Errorf("no verdict from PID %d within %v", before.PID, *timeout), last)
}
