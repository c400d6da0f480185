package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
)

func TestRunRejectsBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(path, []byte("[appliance]\nmode = \"routr\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), path, slog.New(slog.DiscardHandler))
	var list config.ErrorList
	if !errors.As(err, &list) || len(list) != 2 || list[1].Line != 2 || list[1].Key != "appliance.mode" {
		t.Fatalf("Run on a bad config: %v", err)
	}
}

// On a machine without VFIO a vfio port fails to start with the reason,
// and Run cleans up after itself.
func TestRunVFIOUnavailable(t *testing.T) {
	if _, err := os.Stat("/dev/vfio/vfio"); err == nil {
		t.Skip("this machine has VFIO")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "vfio.toml")
	text := "[[port]]\nname = \"p0\"\ndriver = \"vfio\"\npci = \"0000:03:00.0\"\n[metrics]\nlisten = \"\"\n[status]\nsocket = \"" + filepath.Join(dir, "s") + "\"\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), path, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "0000:03:00.0") || !strings.Contains(err.Error(), "port p0") {
		t.Fatalf("Run with an unusable vfio port: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "s")); err == nil {
		t.Error("status socket left behind by a failed start")
	}
}

func TestMLX5PortConfig(t *testing.T) {
	cfg, err := config.Parse("m.toml", []byte("[[port]]\nname = \"p0\"\ndriver = \"vfio\"\npci = \"0000:03:00.0\"\nmtu = 9000\n[port.mlx5]\nstrides_per_wqe = 256\nprefetch_distance = 0\ntx_edge_policy = \"nop\"\ntx_fragment_size = 8192\nrq_log_size = 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	pc := mlx5PortConfig(&cfg.Ports[0], 2, 4, true)
	if pc.Name != "p0" || pc.Queues != 4 || pc.MTU != 9000 || pc.PoolID != 3 || !pc.Promiscuous ||
		pc.LogStrides != 8 || pc.LogWQEs != 5 || pc.Rx.PrefetchDistance != 0 || !pc.Tx.PadToEdge || pc.Tx.FragmentWQEBBs != 128 {
		t.Errorf("mapped to %+v", pc)
	}
	if n := vfioHugepages(pc); n < 4+4*3 {
		t.Errorf("budget of %d hugepages cannot hold 4 queues of ≥ 4 MiB RX windows", n)
	}
	if modes := mlx5Modes(pc, "vfio"); len(modes) != 4 || !strings.Contains(modes[3], "tx edge nop") {
		t.Errorf("modes %v", modes)
	}
}

// The mlx5-sim backend runs the whole userspace driver on the device
// model inside the daemon: bring-up, objects, data path, teardown.
func TestRunMLX5Sim(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	path := filepath.Join(dir, "sim.toml")
	text := "[appliance]\nworkers = [0]\n[[port]]\nname = \"s0\"\ndriver = \"mlx5-sim\"\naddresses = [\"198.18.56.1/24\"]\n" +
		"[[port]]\nname = \"s1\"\ndriver = \"mlx5-sim\"\n[port.mlx5]\nprefetch_distance = 0\n" +
		"[metrics]\nlisten = \"\"\n[status]\nsocket = \"" + sock + "\"\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, path, slog.New(slog.DiscardHandler)) }()
	var s *status.Snapshot
	for i := 0; i < 1200; i++ { // 30 s at least: a loaded machine under -race starts it slowly
		select {
		case err := <-done:
			cancel()
			t.Fatalf("Run ended early: %v", err)
		default:
		}
		var err error
		if s, err = status.Fetch(sock, time.Second); err == nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop within 5 s")
	}
	if s == nil {
		t.Fatal("no status from the running daemon")
	}
	if len(s.Ports) != 2 || s.Ports[0].Driver != "mlx5-sim" || s.Ports[0].Link != "unknown" || len(s.Ports[0].Queues) != 1 ||
		!strings.Contains(s.Ports[1].Queues[0].Mode, "prefetch distance 0") {
		t.Errorf("status of the sim ports: %+v", s.Ports)
	}
	if s.Routes.Connected != 1 || len(s.Workers) != 1 {
		t.Errorf("routes %+v, workers %+v", s.Routes, s.Workers)
	}
}
