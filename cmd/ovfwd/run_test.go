package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// `ovfwd run` opens driver "mlx5-sim" ports: the binary registers the
// device model backend that the daemon itself does not link.
func TestRunRegistersMLX5Sim(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	cfg := filepath.Join(dir, "sim.toml")
	text := "[appliance]\nworkers = [0]\n[[port]]\nname = \"s0\"\ndriver = \"mlx5-sim\"\naddresses = [\"198.18.57.1/24\"]\n" +
		"[metrics]\nlisten = \"\"\n[status]\nsocket = \"" + sock + "\"\n"
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	log := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }
	cmd := exec.Command(bin, "run", "-c", cfg)
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var s *status.Snapshot
	for i := 0; i < 1200 && s == nil; i++ { // 30 s at least on a loaded machine
		select {
		case <-exited:
			t.Fatalf("ovfwd run ended: %v\n%s", waitErr, log())
		default:
		}
		s, _ = status.Fetch(sock, time.Second)
		if s == nil {
			time.Sleep(25 * time.Millisecond)
		}
	}
	if s == nil {
		t.Fatalf("no status within 30 s\n%s", log())
	}
	if len(s.Ports) != 1 || s.Ports[0].Driver != "mlx5-sim" || len(s.Ports[0].Queues) != 1 ||
		!strings.HasPrefix(s.Ports[0].Queues[0].Mode, "mlx5-sim (device model") {
		t.Errorf("ports %+v", s.Ports)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("ovfwd run after SIGTERM: %v\n%s", waitErr, log())
		}
	case <-time.After(5 * time.Second):
		t.Errorf("ovfwd run did not stop within 5 s of SIGTERM")
	}
}
