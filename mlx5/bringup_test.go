package mlx5_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/model/sim"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// fastOptions uses virtual time: Sleep does nothing and timeouts become
// poll counts (CommandTimeout / PollInterval polls).
func fastOptions() mlx5.Options {
	return mlx5.Options{PollInterval: time.Millisecond, CommandTimeout: 200 * time.Millisecond,
		InitTimeout: 200 * time.Millisecond, Sleep: func(time.Duration) {}}
}

func newModel(cfg sim.Config) (mlx5.Bus, *sim.Device, *sim.Memory) {
	mem := sim.NewMemory()
	dev := sim.New(cfg, mem)
	return mlx5.Bus{MMIO: dev, DMA: mem, Config: dev}, dev, mem
}

func testPortConfig(queues int) mlx5.PortConfig {
	return mlx5.PortConfig{
		Queues: queues,
		RQ:     mlx5.RQConfig{LogWQEs: 4, LogStrides: 6, LogStrideSize: 11},
		SQ:     mlx5.SQConfig{LogWQEBBs: 8},
		MTU:    1500,
		RXCompression: mlx5.CQECompression{Enabled: true, Layout: prm.CQECompLayoutEnhanced,
			MiniFormat: prm.MiniCQECsumStridx},
		RSSKey: [40]byte{0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67},
	}
}

// openModel brings a driver up on a fresh model with cfg.
func openModel(t *testing.T, cfg sim.Config) (*mlx5.HCA, *sim.Device, *sim.Memory) {
	t.Helper()
	bus, dev, mem := newModel(cfg)
	h, err := mlx5.Open(bus, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	return h, dev, mem
}

// closeClean closes h and checks the model is left clean.
func closeClean(t *testing.T, h *mlx5.HCA, dev *sim.Device, mem *sim.Memory) {
	t.Helper()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	assertClean(t, dev, mem)
}

// assertClean fails if the model holds objects, pages or mapped memory.
func assertClean(t *testing.T, dev *sim.Device, mem *sim.Memory) {
	t.Helper()
	assertCleanLeaving(t, dev, mem, 0)
}

// assertCleanLeaving is assertClean where the driver must leave mapped
// regions of a command slot the device never gave back (its queue page
// and the slot's two mailbox chains): freeing them could let the device
// write into reused memory.
func assertCleanLeaving(t *testing.T, dev *sim.Device, mem *sim.Memory, mapped int) {
	t.Helper()
	if v := dev.Violations(); v != (sim.Violations{}) {
		t.Errorf("model saw driver violations: %+v", v)
	}
	if objs := dev.Objects(); len(objs) != 0 {
		t.Errorf("objects left in the device: %v", objs)
	}
	if l := dev.LeakedAtTeardown(); len(l) != 0 {
		t.Errorf("objects still alive at TEARDOWN_HCA: %v", l)
	}
	if n := dev.PagesHeld(); n != 0 {
		t.Errorf("device still holds %d firmware pages", n)
	}
	if dev.Enabled() || dev.Initialized() {
		t.Errorf("function left enabled=%v initialized=%v", dev.Enabled(), dev.Initialized())
	}
	if n := mem.Mapped(); n != mapped {
		t.Errorf("%d DMA regions still mapped, want %d", n, mapped)
	}
	if f := mem.Faults(); len(f) != 0 {
		t.Errorf("device DMA faults: %v", f)
	}
}

func TestBringUpAndTeardownTwice(t *testing.T) {
	bus, dev, mem := newModel(sim.DefaultConfig())
	for round := 0; round < 2; round++ {
		h, err := mlx5.Open(bus, fastOptions())
		if err != nil {
			t.Fatalf("round %d: Open: %v", round, err)
		}
		if h.FW.String() != "22.39.1002" {
			t.Errorf("FW version %v", h.FW)
		}
		if !h.Caps.StridingRQ || h.Caps.MinLogStrides != 3 || !h.Caps.EnhancedCQECompression || !h.Caps.EnhancedMPW ||
			h.Caps.MinInline != prm.InlineNone {
			t.Errorf("caps not read from the device: %+v", h.Caps)
		}
		if got := h.PagesGiven(); got != 16+128 {
			t.Errorf("pages given %d, want boot+init = 144", got)
		}
		p, err := h.OpenPort(testPortConfig(2))
		if err != nil {
			t.Fatalf("round %d: OpenPort: %v", round, err)
		}
		checkSteering(t, dev, p)
		mtu, _, _, _, uc := dev.Vport()
		if mtu != 1522 || len(uc) != 1 || uc[0] != [6]byte(p.MAC) {
			t.Errorf("vport mtu %d uc %v, want 1522 and %v", mtu, uc, p.MAC)
		}
		link, err := h.QueryLink()
		if err != nil || !link.Up || !link.AdminUp {
			t.Errorf("link %+v, %v", link, err)
		}
		rq, sq := p.RQs[1], p.SQs[1]
		if rq.LogStrides != 6 || rq.WQType != prm.WQTypeCyclicStridingRQ || len(rq.DBRec) != 4 || rq.LKey != p.LKey {
			t.Errorf("RQ struct %+v", rq)
		}
		if sq.Doorbell != p.SQUARs[1]*4096+0x800 || len(sq.Ring) != 256*64 || sq.MaxWQEBBs != 16 {
			t.Errorf("SQ struct %+v", sq)
		}
		if cq := p.RXCQs[0]; cq.Ring[63] != 0xF1 || cq.Ring[62] != 0xFF || len(cq.Ring) != 64<<cq.LogSize {
			t.Errorf("RX CQ ring not initialised")
		}
		if len(dev.Objects()) == 0 {
			t.Fatal("model shows no objects while the port is open")
		}
		if err := p.Close(); err != nil {
			t.Fatalf("round %d: port Close: %v", round, err)
		}
		if err := h.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		assertClean(t, dev, mem)
		if s := dev.Stats(); s.PagesReclaimed != 144*(round+1) {
			t.Errorf("pages reclaimed %d", s.PagesReclaimed)
		}
	}
}

// The model refuses to destroy a CQ an SQ still uses; the driver's error
// names the command and the status.
func TestDestroyInUseCQRefused(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	p, err := h.OpenPort(testPortConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	err = h.DestroyCQ(p.TXCQs[0])
	var ce *mlx5.CmdError
	if !errors.As(err, &ce) || ce.Status != prm.StatusResourceBusy || !strings.Contains(err.Error(), "DESTROY_CQ") {
		t.Fatalf("destroying an in-use CQ: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	closeClean(t, h, dev, mem)
}

// checkSteering follows the model's NIC RX root for each traffic type and
// checks the TIR reached and its hash configuration.
func checkSteering(t *testing.T, dev *sim.Device, p *mlx5.Port) {
	t.Helper()
	l4 := uint32(prm.HashSrcIP | prm.HashDstIP | prm.HashL4SPort | prm.HashL4DPort)
	cases := []struct {
		ethertype uint16
		proto     uint8
		hashed    int // index into HashTIRs, -1 for the catch-all
		ipv6, udp bool
		fields    uint32
	}{
		{0x0800, 6, 0, false, false, l4},
		{0x0800, 17, 1, false, true, l4},
		{0x86DD, 6, 2, true, false, l4},
		{0x86DD, 17, 3, true, true, l4},
		{0x0800, 1, 4, false, false, prm.HashSrcIP | prm.HashDstIP},
		{0x86DD, 58, 5, true, false, prm.HashSrcIP | prm.HashDstIP},
		{0x0806, 0, -1, false, false, 0},
	}
	for _, c := range cases {
		tir, ok := dev.Steer(c.ethertype, c.proto)
		if !ok {
			t.Errorf("ethertype %#x proto %d: not delivered", c.ethertype, c.proto)
			continue
		}
		if c.hashed < 0 || len(p.RQs) == 1 {
			info, _ := dev.TIR(tir)
			if tir != p.TIR || info.Indirect || info.Target != p.RQs[0].RQN {
				t.Errorf("ethertype %#x proto %d: TIR %#x %+v, want direct TIR %#x to RQ %#x", c.ethertype, c.proto, tir, info, p.TIR, p.RQs[0].RQN)
			}
			continue
		}
		info, _ := dev.TIR(tir)
		if tir != p.HashTIRs[c.hashed] || !info.Indirect || info.Target != p.RQT || info.HashFn != prm.RxHashToeplitz ||
			info.IPv6 != c.ipv6 || info.UDP != c.udp || info.Fields != c.fields || info.ToeplitzKey[0] != 0x6d {
			t.Errorf("ethertype %#x proto %d: TIR %#x %+v", c.ethertype, c.proto, tir, info)
		}
	}
	if len(p.RQs) > 1 {
		buckets, ok := dev.RQT(p.RQT)
		if !ok || len(buckets) != 2 || buckets[0] != p.RQs[0].RQN || buckets[1] != p.RQs[1].RQN {
			t.Errorf("RQT buckets %v", buckets)
		}
	}
}

func TestSingleQueueSteering(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	p, err := h.OpenPort(testPortConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	checkSteering(t, dev, p)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := dev.Steer(0x0800, 17); ok {
		t.Error("traffic still delivered after the port closed")
	}
	h.Close()
	assertClean(t, dev, mem)
}

// What the driver hands the data path is what the device was told.
func TestQueuesMatchDeviceState(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	p, err := h.OpenPort(testPortConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	for q := range p.RQs {
		rq, sq, rxcq := p.RQs[q], p.SQs[q], p.RXCQs[q]
		ri, ok := dev.RQ(rq.RQN)
		if !ok || ri.State != prm.QueueStateRDY || ri.Base != rq.IOVA || ri.DBR != rq.DBRecIOVA || ri.CQN != rxcq.CQN ||
			ri.LogStrides != int8(rq.LogStrides) || ri.LogStrideSize != rq.LogStrideSize || ri.LogWQSz != rq.LogWQEs {
			t.Errorf("queue %d: RQ %+v vs device %+v", q, rq, ri)
		}
		si, ok := dev.SQ(sq.SQN)
		if !ok || si.State != prm.QueueStateRDY || si.Base != sq.IOVA || si.DBR != sq.DBRecIOVA || si.TISN != p.TIS ||
			si.UAR*4096+0x800 != sq.Doorbell || !si.AllowMPW {
			t.Errorf("queue %d: SQ %+v vs device %+v", q, sq, si)
		}
		ci, ok := dev.CQ(rxcq.CQN)
		if !ok || ci.Base != rxcq.IOVA || ci.LogSize != rxcq.LogSize || !ci.CompEn || ci.CompLayout != prm.CQECompLayoutEnhanced ||
			ci.MiniFormat != prm.MiniCQECsumStridx || ci.DBR != rxcq.DBRecIOVA {
			t.Errorf("queue %d: CQ vs device %+v", q, ci)
		}
		if rxcq.LogSize != rq.LogWQEs+rq.LogStrides {
			t.Errorf("RX CQ 2^%d entries, want one per stride 2^%d", rxcq.LogSize, rq.LogWQEs+rq.LogStrides)
		}
	}
	p.Close()
	h.Close()
	assertClean(t, dev, mem)
}

// BenchmarkBringUp measures a full bring-up, two-queue port and teardown
// against the model (control plane; allocations are expected).
func BenchmarkBringUp(b *testing.B) {
	bus, _, _ := newModel(sim.DefaultConfig())
	for i := 0; i < b.N; i++ {
		h, err := mlx5.Open(bus, fastOptions())
		if err != nil {
			b.Fatal(err)
		}
		p, err := h.OpenPort(testPortConfig(2))
		if err != nil {
			b.Fatal(err)
		}
		p.Close()
		h.Close()
	}
}
