package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// notifier speaks systemd's notify protocol (sd_notify(3); the datagram
// format is systemd's src/libsystemd/sd-daemon/sd-daemon.c
// sd_pid_notify_with_fds): READY=1 once the data plane is up, STATUS= lines
// as readiness and reloads change, STOPPING=1 at shutdown, and WATCHDOG=1
// only while every worker's heartbeat moves, so that systemd's WatchdogSec
// restarts a daemon whose data plane stalled even though its control plane
// still answers. Outside systemd (no NOTIFY_SOCKET) it is nil and its
// methods do nothing.
type notifier struct {
	conn     *net.UnixConn
	watchdog time.Duration // WATCHDOG_USEC; 0 when systemd asked for none
	done     chan struct{}
	wg       sync.WaitGroup

	ready  bool   // READY=1 sent
	status string // the last STATUS= sent
	pinged bool   // the last pass sent WATCHDOG=1 (for the log)
}

// notifyEnv is the environment the notifier reads; tests replace it.
var notifyEnv = os.Getenv

// newNotifier connects to $NOTIFY_SOCKET, or returns nil without one.
// $WATCHDOG_USEC applies only when $WATCHDOG_PID is unset or this process
// (sd_watchdog_enabled(3)).
func newNotifier() (*notifier, error) {
	path := notifyEnv("NOTIFY_SOCKET")
	if path == "" {
		return nil, nil
	}
	if path[0] != '/' && path[0] != '@' {
		return nil, fmt.Errorf("NOTIFY_SOCKET %q is neither a path nor an abstract socket", path)
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("NOTIFY_SOCKET: %w", err)
	}
	n := &notifier{conn: conn, done: make(chan struct{})}
	if us := notifyEnv("WATCHDOG_USEC"); us != "" {
		pid := notifyEnv("WATCHDOG_PID")
		v, err := strconv.ParseUint(us, 10, 63)
		switch {
		case err != nil || v == 0:
			conn.Close()
			return nil, fmt.Errorf("WATCHDOG_USEC %q is not a positive number", us)
		case pid == "" || pid == strconv.Itoa(os.Getpid()):
			n.watchdog = time.Duration(v) * time.Microsecond
		}
	}
	return n, nil
}

func (n *notifier) send(lines ...string) error {
	if n == nil {
		return nil
	}
	_, err := n.conn.Write([]byte(strings.Join(lines, "\n") + "\n"))
	return err
}

// startNotify begins reporting to systemd once start has succeeded. The
// watchdog's own health check looks at the workers only: a port whose link
// is down makes the appliance not ready (status, route export) but is no
// reason to restart it. A worker counts as stalled after [export]
// worker_stall without a heartbeat, as status reports it.
func (d *daemon) startNotify() {
	n, err := newNotifier()
	if err != nil {
		d.log.Warn("systemd notification off", "err", err)
		return
	}
	if n == nil {
		return
	}
	d.notify = n
	every := 250 * time.Millisecond
	if n.watchdog > 0 {
		every = min(every, n.watchdog/4)
	}
	h := newHealth(d.so.cfg.WorkerStall, len(d.beats), time.Now())
	d.log.Info("systemd notification", "watchdog", n.watchdog, "worker_stall", d.so.cfg.WorkerStall)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			d.notifyStep(h, time.Now())
			select {
			case <-n.done:
				return
			case <-tk.C:
			}
		}
	}()
}

// notifyStep is one pass: ready once every worker polls, the status line,
// and the watchdog ping while no worker stalls.
func (d *daemon) notifyStep(h *health, now time.Time) {
	n := d.notify
	beats := watchedBeats(d)
	stalled := h.check(now, beats, func() string { return "" })
	why := stalled
	for q := range beats {
		if why == "" && beats[q].n.Load() == 0 {
			why = fmt.Sprintf("starting: worker %d not polling yet", q)
		}
	}
	var msgs []string
	if !n.ready && why == "" {
		n.ready = true
		msgs = append(msgs, "READY=1")
	}
	if st := d.statusLine(why); st != n.status {
		n.status = st
		msgs = append(msgs, "STATUS="+st)
	}
	ping := n.watchdog > 0 && n.ready && stalled == ""
	if ping {
		msgs = append(msgs, "WATCHDOG=1")
	}
	if n.watchdog > 0 && ping != n.pinged && n.ready {
		if ping {
			d.log.Info("watchdog pings resumed")
		} else {
			d.log.Error("watchdog pings stopped: systemd restarts the service unless the workers recover", "reason", stalled, "watchdog", n.watchdog)
		}
	}
	n.pinged = ping
	if len(msgs) > 0 {
		if err := n.send(msgs...); err != nil {
			d.log.Warn("systemd notification", "err", err)
		}
	}
}

// statusLine is systemctl status's one line on the appliance: readiness
// as `ovfwd status` says it (or what the watchdog found on the workers),
// and the reloads.
func (d *daemon) statusLine(workers string) string {
	d.so.mu.Lock()
	notReady := d.so.notReady
	d.so.mu.Unlock()
	if workers != "" {
		notReady = workers
	}
	d.mu.Lock()
	rl := d.rl
	d.mu.Unlock()
	var b strings.Builder
	if notReady == "" {
		fmt.Fprintf(&b, "ready: %d ports, %d workers", len(d.ports), len(d.beats))
	} else {
		fmt.Fprintf(&b, "not ready: %s", notReady)
	}
	if rl.Count+rl.Failed > 0 {
		fmt.Fprintf(&b, "; reloads: %d ok, %d rejected", rl.Count, rl.Failed)
	}
	return b.String()
}

// stopNotify tells systemd the daemon is stopping and ends the pings.
func (d *daemon) stopNotify() {
	n := d.notify
	if n == nil {
		return
	}
	close(n.done)
	n.wg.Wait()
	err := n.send("STOPPING=1", "STATUS=stopping")
	n.conn.Close()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		d.log.Warn("systemd notification", "err", err)
	}
}

// watchedBeats is the heartbeats the watchdog judges. A test build
// (stallseam.go) replaces it to stall them on request.
var watchedBeats = func(d *daemon) []heartbeat { return d.beats }
