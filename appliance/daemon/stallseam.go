//go:build ovfwd_stallseam

package daemon

import (
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// A test build only (go build -tags ovfwd_stallseam; the systemd guest in
// appliance/testbed/vmtest builds one): SIGUSR2 stalls the heartbeats the
// watchdog judges, as a worker stuck in a driver call would, so the test
// sees systemd's watchdog restart the service. The shipped binary has no
// such signal handler.
func init() {
	var stalled atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	go func() {
		<-sig
		stalled.Store(true)
	}()
	live := watchedBeats
	var frozen []heartbeat
	watchedBeats = func(d *daemon) []heartbeat {
		if !stalled.Load() {
			return live(d)
		}
		if frozen == nil {
			frozen = make([]heartbeat, len(d.beats))
			for q := range d.beats {
				frozen[q].n.Store(d.beats[q].n.Load())
			}
		}
		return frozen
	}
}
