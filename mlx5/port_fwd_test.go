package mlx5_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/model/sim"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// TestNewFwdPortObjectsAndTeardown: NewFwdPort on the command model creates
// cyclic striding RQs (wq_type 3, no two-byte shift), RX windows from the DMA
// seam, and the data path; Close leaves only what Open created, and
// HCA.Close leaves nothing (objects, pages, mappings). Twice in one process.
func TestNewFwdPortObjectsAndTeardown(t *testing.T) {
	for run := 0; run < 2; run++ {
		mem := sim.NewMemory()
		dev := sim.New(sim.DefaultConfig(), mem)
		h, err := mlx5.Open(mlx5.Bus{MMIO: dev, DMA: mem, Config: dev}, mlx5.Options{})
		if err != nil {
			t.Fatal(err)
		}
		baseObjs, baseMaps := len(dev.Objects()), mem.Mapped()
		p, err := mlx5.NewFwdPort(h, mlx5.FwdPortConfig{Name: "x", Queues: 2, MTU: 9000 - 22 - 128 - 64})
		if err == nil {
			t.Fatal("a stride above 4 KiB was accepted")
		}
		if len(dev.Objects()) != baseObjs || mem.Mapped() != baseMaps {
			t.Fatalf("failed NewFwdPort leaked: %v", dev.Objects())
		}
		p, err = mlx5.NewFwdPort(h, mlx5.FwdPortConfig{Name: "x", Queues: 2})
		if err != nil {
			t.Fatal(err)
		}
		for q, rq := range p.Objects.RQs {
			info, ok := dev.RQ(rq.RQN)
			if !ok || info.WQType != prm.WQTypeCyclicStridingRQ || info.TwoByteShift || info.State != prm.QueueStateRDY {
				t.Fatalf("queue %d RQ %+v", q, info)
			}
			if 1<<info.LogStrideSize != p.Info().BufSize {
				t.Fatalf("stride %d, buffer size %d", 1<<info.LogStrideSize, p.Info().BufSize)
			}
		}
		// Per queue: RQ window + 2 × (ring + doorbell record) per CQ/WQ … at least the two windows.
		if mem.Mapped() < baseMaps+2 {
			t.Fatalf("no RX windows mapped")
		}
		if i := p.Info(); i.Queues != 2 || i.MTU != 1500 || i.Name != "x" || len(i.MAC) != 6 {
			t.Fatalf("info %+v", i)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if len(dev.Objects()) != baseObjs || mem.Mapped() != baseMaps {
			t.Fatalf("after Close: objects %v, %d regions mapped (was %d)", dev.Objects(), mem.Mapped(), baseMaps)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if len(dev.Objects()) != 0 || mem.Mapped() != 0 || dev.PagesHeld() != 0 || len(mem.Faults()) != 0 {
			t.Fatalf("after HCA.Close: objects %v, %d mapped, %d pages, faults %v", dev.Objects(), mem.Mapped(), dev.PagesHeld(), mem.Faults())
		}
	}
}

// TestNewFwdPortRejectsInlineModes: a device that wants IP or TCP/UDP
// headers inline cannot be driven by the data path, and NewFwdPort says so
// and cleans up, instead of sending WQEs the device would reject.
func TestNewFwdPortRejectsInlineModes(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.WQEInlineMode = prm.CapInlineVport
	cfg.VportMinInline = prm.InlineIP
	mem := sim.NewMemory()
	dev := sim.New(cfg, mem)
	h, err := mlx5.Open(mlx5.Bus{MMIO: dev, DMA: mem, Config: dev}, mlx5.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	base := len(dev.Objects())
	if _, err := mlx5.NewFwdPort(h, mlx5.FwdPortConfig{}); err == nil || !strings.Contains(err.Error(), "min-inline") {
		t.Fatalf("NewFwdPort with inline mode IP: %v", err)
	}
	if len(dev.Objects()) != base {
		t.Fatalf("leaked %v", dev.Objects())
	}
}

// TestOpenVFIOPortWithoutVFIO: on a host without /dev/vfio the VFIO port
// fails with Preflight's explanation and nothing to clean up.
func TestOpenVFIOPortWithoutVFIO(t *testing.T) {
	root := t.TempDir()
	paths := mlx5.Paths{Sys: filepath.Join(root, "sys"), Dev: filepath.Join(root, "dev"), Proc: filepath.Join(root, "proc")}
	p, err := mlx5.OpenVFIOPort(paths, "0000:3b:00.0", 512, mlx5.Options{}, mlx5.FwdPortConfig{})
	if err == nil || p != nil {
		t.Fatalf("OpenVFIOPort on an empty host: %v, %v", p, err)
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), "0000:3b:00.0") && !strings.Contains(strings.ToLower(err.Error()), "vfio") {
		t.Fatalf("error does not tell the operator anything: %v", err)
	}
}
