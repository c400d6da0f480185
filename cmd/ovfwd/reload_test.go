package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// TestReloadReportsVerdict runs the daemon on device-model ports and
// reloads it as the unit's ExecReload does: a good file reloads (exit 0),
// a file the daemon rejects fails the reload and leaves the old config
// running, and a file that does not load fails before any signal.
func TestReloadReportsVerdict(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	path := filepath.Join(dir, "sim.toml")
	base := "[appliance]\nworkers = [0]\n[[port]]\nname = \"s0\"\ndriver = \"mlx5-sim\"\naddresses = [\"198.18.56.1/24\"]\n" +
		"[[port]]\nname = \"s1\"\ndriver = \"mlx5-sim\"\naddresses = [\"198.18.57.1/24\"]\n" +
		"[metrics]\nlisten = \"\"\n[status]\nsocket = \"" + sock + "\"\n"
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(base)
	daemon := exec.Command(bin, "run", "-c", path)
	var logs strings.Builder
	daemon.Stderr = &logs
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	t.Cleanup(func() {
		daemon.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			daemon.Process.Kill()
			<-exited
		}
	})
	var s *status.Snapshot
	for i := 0; i < 600 && s == nil; i++ { // 60 s at most
		select {
		case err := <-exited:
			t.Fatalf("ovfwd run exited: %v\n%s", err, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		s, _ = status.Fetch(sock, time.Second)
	}
	if s == nil {
		t.Fatalf("no status from ovfwd run\n%s", logs.String())
	}
	pid := strconv.Itoa(daemon.Process.Pid)
	fetch := func() *status.Snapshot {
		t.Helper()
		s, err := status.Fetch(sock, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	write(base + "[[route]]\nprefix = \"198.18.70.0/24\"\nvia = \"198.18.57.2\"\n")
	out, errOut, code := run(t, bin, "reload", "-c", path, "-pid", pid)
	if code != 0 || !strings.Contains(out, "reloaded") {
		t.Fatalf("reload of a good file: exit %d, %q %q\n%s", code, out, errOut, logs.String())
	}
	if r := fetch().Reload; r.Count != 1 || r.Failed != 0 {
		t.Errorf("after a good reload: %+v", r)
	}

	// Valid on its own, but names a port the running daemon lacks (ports
	// change only at restart): the daemon rejects it.
	write(base + "[[port]]\nname = \"s2\"\ndriver = \"mlx5-sim\"\n" +
		"[[route]]\nprefix = \"198.18.71.0/24\"\nport = \"s2\"\n")
	if _, errOut, code := run(t, bin, "check", path); code != 0 {
		t.Fatalf("the rejected file must pass ovfwd check for this test: %s", errOut)
	}
	out, errOut, code = run(t, bin, "reload", "-c", path, "-pid", pid)
	if code != 1 || !strings.Contains(errOut, "rejected, still running the previous config") {
		t.Errorf("reload of a file the daemon rejects: exit %d, %q %q", code, out, errOut)
	}
	s = fetch()
	if s.Reload.Count != 1 || s.Reload.Failed != 1 {
		t.Errorf("after a rejected reload: %+v", s.Reload)
	}
	if s.PID != daemon.Process.Pid {
		t.Errorf("status PID %d, daemon %s", s.PID, pid)
	}

	// Does not load: reported, and the daemon never hears of it.
	write(base + "[appliance\n")
	if _, errOut, code = run(t, bin, "reload", "-c", path, "-pid", pid); code != 1 || errOut == "" {
		t.Errorf("reload of a broken file: exit %d, %q", code, errOut)
	}
	if r := fetch().Reload; r.Count != 1 || r.Failed != 1 {
		t.Errorf("a broken file reached the daemon: %+v", r)
	}

	// A socket served by another PID than the caller's is refused.
	write(base)
	if _, errOut, code = run(t, bin, "reload", "-s", sock, "-pid", "1"); code != 1 || !strings.Contains(errOut, "not 1") {
		t.Errorf("reload with another PID: exit %d, %q", code, errOut)
	}
	select {
	case err := <-exited:
		t.Fatalf("ovfwd run exited during the reloads: %v\n%s", err, logs.String())
	default:
	}
}
