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

// Regression tests for the comparison of bring-up and port set-up with the
// kernel's mlx5_core/mlx5e, rdma-core's mlx5_vfio.c and Snabb's
// connectx.lua. Each fails on the driver as it was before the fix; the
// model enforces the rule the test relies on.

// budgetDMA fails allocations once left reaches zero (a short hugepage
// budget).
type budgetDMA struct {
	mlx5.DMA
	left int
}

func (b *budgetDMA) Alloc(size, align int) ([]byte, uint64, error) {
	if b.left == 0 {
		return nil, 0, errors.New("budget exhausted")
	}
	b.left--
	return b.DMA.Alloc(size, align)
}

// Bus mastering goes on before the first wait for the initializing bit:
// the model, like firmware given a queue it cannot reach, stays
// initializing until it is on.
func TestBusMasterBeforeInitWait(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	if c, _ := dev.ReadConfig16(prm.PCICommand); c&prm.PCICommandBusMaster == 0 {
		t.Fatal("bus mastering off after bring-up")
	}
	closeClean(t, h, dev, mem)
}

// ENABLE_HCA and DISABLE_HCA carry the kernel's 12-byte output.
func TestEnableDisableHCAOutputLength(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	s := dev.Stats()
	if s.Commands[prm.OpEnableHCA] != 1 || s.Commands[prm.OpDisableHCA] != 1 {
		t.Fatalf("ENABLE_HCA %d, DISABLE_HCA %d times", s.Commands[prm.OpEnableHCA], s.Commands[prm.OpDisableHCA])
	}
	assertClean(t, dev, mem)
}

// A VF is refused before any command, so nothing the kernel does only on
// PFs (the host-endianness register) reaches it.
func TestVFRefusedBeforeAnyCommand(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.DeviceID = 0x101a // ConnectX-5 Ex VF
	bus, dev, mem := newModel(cfg)
	_, err := mlx5.Open(bus, fastOptions())
	if err == nil || !strings.Contains(err.Error(), "virtual function") {
		t.Fatalf("Open on a VF: %v", err)
	}
	if n := len(dev.Stats().Commands); n != 0 {
		t.Fatalf("%d command types sent to a VF", n)
	}
	assertClean(t, dev, mem)
}

// Link flaps fill the async EQ while nobody services it: with oi the
// device drops the excess and stays healthy (without it the model, like
// the firmware, declares an async EQ overrun); Service then drains it.
func TestEQOverrunWithoutServiceStaysHealthy(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	for i := 0; i < 600; i++ {
		dev.SetLink(i%2 == 1)
	}
	if v := dev.Violations(); v.EQOverrun != 0 {
		t.Fatalf("EQ overran without oi: %+v", v)
	}
	if err := h.Service(); err != nil {
		t.Fatalf("Service after an idle period with link flaps: %v", err)
	}
	if h.LinkEvents() != 256 {
		t.Fatalf("%d port-change events consumed, want the 256 the EQ holds", h.LinkEvents())
	}
	closeClean(t, h, dev, mem)
}

// Serviced once a (simulated) second, the EQ never overflows: every link
// flap and page request of a long idle period is seen.
func TestServiceKeepsEQDrained(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	pages := h.PagesGiven()
	for sec := 0; sec < 120; sec++ {
		for i := 0; i < 10; i++ {
			dev.SetLink(i%2 == 1)
		}
		if sec%10 == 0 {
			dev.PostPageRequest(4)
		}
		if err := h.Service(); err != nil {
			t.Fatalf("second %d: %v", sec, err)
		}
	}
	if h.LinkEvents() != 1200 || h.PagesGiven() != pages+48 {
		t.Fatalf("saw %d link events (want 1200), gave %d pages (want %d)", h.LinkEvents(), h.PagesGiven()-pages, 48)
	}
	if s := dev.Stats(); s.EQOverruns != 0 {
		t.Fatalf("%d EQ overruns", s.EQOverruns)
	}
	closeClean(t, h, dev, mem)
}

// A page request the host cannot meet is answered with CANT_GIVE, so the
// command the firmware held for it completes; the slot is never reused
// while the device owns it, and Service reports the shortage.
func TestPageRequestCantGive(t *testing.T) {
	bus, dev, mem := newModel(sim.DefaultConfig())
	budget := &budgetDMA{DMA: bus.DMA, left: -1}
	bus.DMA = budget
	h, err := mlx5.Open(bus, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	pd, err := h.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	dev.SetFaults(sim.Faults{PageRequestOpcode: prm.OpAllocTransportDomain, PageRequestPages: 8})
	budget.left = 0
	td, err := h.AllocTransportDomain()
	budget.left = -1
	if err != nil {
		t.Fatalf("the held command did not complete after CANT_GIVE: %v", err)
	}
	if s := dev.Stats(); s.CantGive != 1 {
		t.Fatalf("%d CANT_GIVE answers", s.CantGive)
	}
	var pb *mlx5.PageBudgetError
	if err := h.Service(); !errors.As(err, &pb) {
		t.Fatalf("Service: %v, want the page shortage", err)
	}
	if err := errors.Join(h.DeallocTransportDomain(td), h.DeallocPD(pd), h.Close()); err != nil {
		t.Fatal(err)
	}
	assertClean(t, dev, mem)
}

// A bring-up whose firmware pages do not fit the DMA budget names the
// total the firmware wants, so the caller can size the budget.
func TestPageBudgetErrorNamesTheNeed(t *testing.T) {
	bus, dev, mem := newModel(sim.DefaultConfig())
	bus.DMA = &budgetDMA{DMA: bus.DMA, left: 3 + 2 + 16 + 50}
	_, err := mlx5.Open(bus, fastOptions())
	var pb *mlx5.PageBudgetError
	if !errors.As(err, &pb) || pb.Asked != 16+128 || pb.Stage != "init" {
		t.Fatalf("got %v (%+v), want a budget error for 144 pages at init", err, pb)
	}
	assertClean(t, dev, mem)
}

// The port MTU (PMTU) is written before the vport MTU: the model holds
// frames to the PMTU the previous owner left (1522).
func TestPortMTUSet(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	cfg := testPortConfig(1)
	cfg.MTU = 9000
	p, err := h.OpenPort(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m := dev.PortMTU(); m != 9000+prm.HWMTUOverhead {
		t.Fatalf("port MTU %d, want %d", m, 9000+prm.HWMTUOverhead)
	}
	if mtu, _, _, _, _ := dev.Vport(); mtu != 9000+prm.HWMTUOverhead {
		t.Fatalf("frames held to %d bytes", mtu)
	}
	cfg.MTU = 9978
	if _, err := h.OpenPort(cfg); err == nil || !strings.Contains(err.Error(), "maximum") {
		t.Fatalf("MTU above max_mtu: %v", err)
	}
	if err := errors.Join(p.Close(), h.Close()); err != nil {
		t.Fatal(err)
	}
	assertClean(t, dev, mem)
}

// Local loopback is turned off, as the kernel leaves it.
func TestLocalLoopbackDisabled(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	p, err := h.OpenPort(testPortConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	if uc, mc := dev.LocalLoopback(); uc || mc {
		t.Fatalf("local loopback uc %v mc %v after OpenPort", uc, mc)
	}
	if err := errors.Join(p.Close(), h.Close()); err != nil {
		t.Fatal(err)
	}
	assertClean(t, dev, mem)
}

// RQ/SQ ts_format follows the caps: a device offering only the real-time
// clock format refuses free-running queues.
func TestTSFormatFromCaps(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.RQTSFormat, cfg.SQTSFormat = prm.TSCapRealTime, prm.TSCapRealTime
	h, dev, mem := openModel(t, cfg)
	p, err := h.OpenPort(testPortConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(p.Close(), h.Close()); err != nil {
		t.Fatal(err)
	}
	assertClean(t, dev, mem)
}

// allow_multi_pkt_send_wqe is set only with cap multi_pkt_send_wqe, and
// without it the SQ does not offer eMPWQE to the data path.
func TestAllowMultiPktGatedOnCap(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.MultiPktSendWQE = 0
	h, dev, mem := openModel(t, cfg)
	p, err := h.OpenPort(testPortConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	if p.SQs[0].EnhancedMPW {
		t.Fatal("eMPWQE offered on an SQ created without allow_multi_pkt_send_wqe")
	}
	if err := errors.Join(p.Close(), h.Close()); err != nil {
		t.Fatal(err)
	}
	assertClean(t, dev, mem)
}

// Rings over 2 MiB are described with 2 MiB pages, one aligned pas entry
// each: the DMA seam aligns no further, and the model refuses a pas entry
// not aligned to its page size.
func TestLargeRingPageList(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	for _, log := range []uint8{14, 15, 16, 17} { // 1, 2, 4 and 8 MiB of CQEs
		cq, err := h.CreateCQ(mlx5.CQConfig{LogSize: log})
		if err != nil {
			t.Fatalf("CQ of 2^%d CQEs: %v", log, err)
		}
		info, _ := dev.CQ(cq.CQN)
		if info.Base != cq.IOVA {
			t.Fatalf("model sees the CQ at %#x, driver at %#x", info.Base, cq.IOVA)
		}
		if err := h.DestroyCQ(cq); err != nil {
			t.Fatal(err)
		}
	}
	closeClean(t, h, dev, mem)
}

// CreateCQ refuses the mini-CQE format the data path cannot decode
// (FTAG_STRIDX) before the firmware sees it.
func TestMiniFormatFTagRefusedByCreateCQ(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	_, err := h.CreateCQ(mlx5.CQConfig{LogSize: 8, Compression: mlx5.CQECompression{Enabled: true, MiniFormat: prm.MiniCQEFtagStridx}})
	if err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("CreateCQ with FTAG_STRIDX: %v", err)
	}
	closeClean(t, h, dev, mem)
}

// RunService drains the EQ in the background (the daemon runs it once a
// second per function): link flaps posted while it runs are all seen, and
// stop waits for it.
func TestRunServiceDrainsEvents(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	var errs []error
	stop := h.RunService(5*time.Millisecond, func(err error) { errs = append(errs, err) })
	for i := 0; i < 2000; i++ {
		dev.SetLink(i%2 == 1)
		if i%100 == 99 {
			time.Sleep(20 * time.Millisecond) // fewer than 256 events between services
		}
	}
	time.Sleep(50 * time.Millisecond)
	stop()
	if len(errs) != 0 || h.LinkEvents() != 2000 {
		t.Fatalf("service saw %d of 2000 link events, errors %v (model %+v)", h.LinkEvents(), errs, dev.Stats())
	}
	closeClean(t, h, dev, mem)
}
