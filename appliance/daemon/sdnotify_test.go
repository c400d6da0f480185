package daemon

import (
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/config"
)

// TestNotifyWatchdogFollowsWorkers drives the notifier against a socket
// standing in for systemd's: READY=1 only once every worker polls, and
// WATCHDOG=1 only while every worker's heartbeat moves; a stalled worker
// stops the pings (and says why in STATUS=) until it moves again.
func TestNotifyWatchdogFollowsWorkers(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	env := map[string]string{"NOTIFY_SOCKET": sock, "WATCHDOG_USEC": "2000000"}
	old := notifyEnv
	notifyEnv = func(k string) string { return env[k] }
	t.Cleanup(func() { notifyEnv = old })

	n, err := newNotifier()
	if err != nil || n == nil {
		t.Fatalf("newNotifier: %v, %v", n, err)
	}
	if n.watchdog != 2*time.Second {
		t.Fatalf("watchdog %v, want 2s from WATCHDOG_USEC", n.watchdog)
	}
	d := &daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil)), beats: make([]heartbeat, 2),
		so: newScaleOut(config.Export{WorkerStall: time.Second}), notify: n}
	d.so.notReady = ""
	t0 := time.Unix(1000, 0)
	h := newHealth(time.Second, 2, t0)
	recv := func() string {
		t.Helper()
		l.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		buf := make([]byte, 4096)
		k, err := l.Read(buf)
		if err != nil {
			return "" // nothing sent
		}
		return string(buf[:k])
	}
	step := func(at time.Duration, beat0, beat1 bool, want, notWant []string) {
		t.Helper()
		if beat0 {
			d.beats[0].n.Add(1)
		}
		if beat1 {
			d.beats[1].n.Add(1)
		}
		d.notifyStep(h, t0.Add(at))
		got := recv()
		for _, w := range want {
			if !strings.Contains(got, w+"\n") {
				t.Errorf("at %v: sent %q, want a line %q", at, got, w)
			}
		}
		for _, w := range notWant {
			if strings.Contains(got, w) {
				t.Errorf("at %v: sent %q, must not send %q", at, got, w)
			}
		}
	}
	// Worker 1 has not polled yet: not ready, no ping.
	step(0, true, false, []string{"STATUS=not ready: starting: worker 1 not polling yet"}, []string{"READY=1", "WATCHDOG=1"})
	step(100*time.Millisecond, true, true, []string{"READY=1", "WATCHDOG=1", "STATUS=ready: 0 ports, 2 workers"}, nil)
	step(500*time.Millisecond, true, true, []string{"WATCHDOG=1"}, []string{"READY=1"})
	// Worker 1 stops; within worker_stall it still counts as running.
	step(time.Second, true, false, []string{"WATCHDOG=1"}, nil)
	step(1800*time.Millisecond, true, false, []string{"STATUS=not ready: worker 1 stalled (no poll for over 1s)"}, []string{"WATCHDOG=1"})
	step(2500*time.Millisecond, true, false, nil, []string{"WATCHDOG=1"})
	// It moves again: pings resume.
	step(2600*time.Millisecond, true, true, []string{"WATCHDOG=1", "STATUS=ready: 0 ports, 2 workers"}, nil)

	close(n.done) // no loop runs; stopNotify waits for none
	n.done = make(chan struct{})
	d.stopNotify()
	if got := recv(); !strings.Contains(got, "STOPPING=1\n") {
		t.Errorf("stop sent %q, want STOPPING=1", got)
	}
}

// TestNotifyOutsideSystemd: without NOTIFY_SOCKET nothing is sent and a
// WATCHDOG_PID naming another process turns the watchdog off.
func TestNotifyOutsideSystemd(t *testing.T) {
	old := notifyEnv
	t.Cleanup(func() { notifyEnv = old })
	notifyEnv = func(string) string { return "" }
	if n, err := newNotifier(); n != nil || err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v, %v", n, err)
	}
	sock := filepath.Join(t.TempDir(), "notify")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	env := map[string]string{"NOTIFY_SOCKET": sock, "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"}
	notifyEnv = func(k string) string { return env[k] }
	n, err := newNotifier()
	if err != nil || n == nil || n.watchdog != 0 {
		t.Fatalf("WATCHDOG_PID of another process: %+v, %v", n, err)
	}
	n.conn.Close()
	env["WATCHDOG_USEC"] = "soon"
	if _, err := newNotifier(); err == nil {
		t.Error("a WATCHDOG_USEC that is no number was accepted")
	}
}
