package mlx5_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/model/sim"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// Every command of bring-up and of port creation, failed by the firmware
// with a bad status: the driver must return a CmdError naming that command
// and status, and undo everything so the model holds nothing.
func TestEveryCommandFailureIsCleanedUp(t *testing.T) {
	type step struct {
		op     uint16
		opMod  int
		inPort bool
	}
	steps := []step{
		{prm.OpEnableHCA, 0, false}, {prm.OpQueryISSI, 0, false}, {prm.OpSetISSI, 0, false},
		{prm.OpQueryPages, prm.PagesBoot, false}, {prm.OpManagePages, prm.ManagePagesGive, false},
		{prm.OpAccessReg, -1, false}, {prm.OpQueryHCACap, -1, false}, {prm.OpSetHCACap, -1, false},
		{prm.OpQueryPages, prm.PagesInit, false}, {prm.OpInitHCA, 0, false}, {prm.OpAllocUAR, 0, false},
		{prm.OpCreateEQ, 0, false},
		{prm.OpAllocPD, 0, true}, {prm.OpAllocTransportDomain, 0, true}, {prm.OpCreateMkey, 0, true},
		{prm.OpCreateTIS, 0, true}, {prm.OpCreateCQ, 0, true}, {prm.OpCreateRQ, 0, true}, {prm.OpModifyRQ, 0, true},
		{prm.OpCreateSQ, 0, true}, {prm.OpModifySQ, 0, true}, {prm.OpCreateRQT, 0, true}, {prm.OpCreateTIR, 0, true},
		{prm.OpCreateFlowTable, 0, true}, {prm.OpCreateFlowGroup, 0, true}, {prm.OpSetFlowTableEntry, 0, true},
		{prm.OpSetFlowTableRoot, 0, true}, {prm.OpAccessReg, -1, true}, {prm.OpQueryNICVportContext, 0, true}, {prm.OpModifyNICVportContext, 0, true},
	}
	for _, s := range steps {
		name := fmt.Sprintf("%s_opmod%d", prm.OpcodeName(s.op), s.opMod)
		t.Run(name, func(t *testing.T) {
			bus, dev, mem := newModel(sim.DefaultConfig())
			faults := sim.Faults{FailOpcode: s.op, FailOpMod: s.opMod, FailStatus: prm.StatusBadParam}
			if s.op == prm.OpManagePages || s.op == prm.OpAllocUAR || s.op == prm.OpCreateCQ {
				faults.FailCount = 1 // first execution
			}
			var h *mlx5.HCA
			var err error
			if s.inPort {
				if h, err = mlx5.Open(bus, fastOptions()); err != nil {
					t.Fatal(err)
				}
				dev.SetFaults(faults)
				_, err = h.OpenPort(testPortConfig(2))
			} else {
				dev.SetFaults(faults)
				h, err = mlx5.Open(bus, fastOptions())
			}
			var ce *mlx5.CmdError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a CmdError", err)
			}
			if ce.Opcode != s.op || ce.Status != prm.StatusBadParam || ce.Syndrome != uint32(s.op)<<16|0x12 {
				t.Errorf("CmdError %+v, want opcode %#x BAD_PARAM with the injected syndrome", ce, s.op)
			}
			if msg := err.Error(); !strings.Contains(msg, prm.OpcodeName(s.op)) || !strings.Contains(msg, "BAD_PARAM") {
				t.Errorf("error %q does not name the command and status", msg)
			}
			dev.SetFaults(sim.Faults{})
			if h != nil {
				if err := h.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
			assertClean(t, dev, mem)
		})
	}
}

func TestInitTimeout(t *testing.T) {
	bus, dev, mem := newModel(sim.DefaultConfig())
	dev.SetFaults(sim.Faults{InitTimeout: true})
	_, err := mlx5.Open(bus, fastOptions())
	if err == nil || !strings.Contains(err.Error(), "initializing") {
		t.Fatalf("got %v, want an initializing timeout", err)
	}
	assertClean(t, dev, mem)
}

// A firmware page request arriving while a command waits must be served on
// the page slot, or the command never completes (kernel cmd.c / pagealloc.c).
func TestPageRequestDuringCommand(t *testing.T) {
	for _, op := range []uint16{prm.OpCreateCQ, prm.OpCreateRQ, prm.OpCreateMkey} {
		t.Run(prm.OpcodeName(op), func(t *testing.T) {
			bus, dev, mem := newModel(sim.DefaultConfig())
			dev.SetFaults(sim.Faults{PageRequestOpcode: op, PageRequestPages: 8})
			h, err := mlx5.Open(bus, fastOptions())
			if err != nil {
				t.Fatal(err)
			}
			p, err := h.OpenPort(testPortConfig(1))
			if err != nil {
				t.Fatalf("OpenPort with a page request pending: %v", err)
			}
			if got := h.PagesGiven(); got != 144+8 {
				t.Errorf("pages given %d, want 152", got)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			assertClean(t, dev, mem)
		})
	}
}

// Firmware taking pages back at run time (negative PAGE_REQUEST).
func TestPageReclaimRequest(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	if !dev.PostPageRequest(20) {
		t.Fatal("no page-request EQ")
	}
	if err := h.PollEvents(); err != nil {
		t.Fatal(err)
	}
	if h.PagesGiven() != 164 || dev.PagesHeld() != 164 {
		t.Fatalf("after +20: driver %d, device %d pages", h.PagesGiven(), dev.PagesHeld())
	}
	dev.PostPageRequest(-20)
	if err := h.PollEvents(); err != nil {
		t.Fatal(err)
	}
	if h.PagesGiven() != 144 || dev.PagesHeld() != 144 {
		t.Fatalf("after -20: driver %d, device %d pages", h.PagesGiven(), dev.PagesHeld())
	}
	closeClean(t, h, dev, mem)
}

func TestStuckOwnershipTimesOut(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	dev.SetFaults(sim.Faults{StuckOpcode: prm.OpCreateTIS})
	_, err := h.OpenPort(testPortConfig(1))
	var te *mlx5.TimeoutError
	if !errors.As(err, &te) || te.Opcode != prm.OpCreateTIS || !errors.Is(err, mlx5.ErrTimeout) {
		t.Fatalf("got %v, want a CREATE_TIS timeout", err)
	}
	dev.SetFaults(sim.Faults{})
	// Slot 0 still belongs to the device: cleanup and teardown must run on
	// another slot (the model counts a doorbell on an owned slot as a
	// violation), and slot 0's memory stays mapped.
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	assertCleanLeaving(t, dev, mem, 3)
}

// A firmware crash (health syndrome) makes the waiting command fail fast
// with the syndrome instead of a minute-long timeout.
func TestHealthSyndrome(t *testing.T) {
	bus, dev, mem := newModel(sim.DefaultConfig())
	dev.SetFaults(sim.Faults{HealthSyndrome: 0x7})
	_, err := mlx5.Open(bus, fastOptions())
	var he *mlx5.HealthError
	if !errors.As(err, &he) || he.Syndrome != 0x7 || !strings.Contains(err.Error(), "IRISC not responding") {
		t.Fatalf("got %v, want health syndrome 0x7", err)
	}
	if !strings.Contains(err.Error(), "ENABLE_HCA") {
		t.Errorf("error %q does not name the command", err)
	}
	assertCleanLeaving(t, dev, mem, 3) // ENABLE_HCA's slot was never given back
}

func TestHealthCounterStall(t *testing.T) {
	bus, dev, _ := newModel(sim.DefaultConfig())
	h, err := mlx5.Open(bus, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i := 0; i < 5; i++ {
		if err := h.CheckHealth(); err != nil {
			t.Fatalf("healthy device: %v", err)
		}
	}
	dev.SetFaults(sim.Faults{FreezeHealthCounter: true})
	var err2 error
	for i := 0; i < 5 && err2 == nil; i++ {
		err2 = h.CheckHealth()
	}
	if err2 == nil || !strings.Contains(err2.Error(), "health counter") {
		t.Fatalf("frozen counter: %v", err2)
	}
	dev.SetFaults(sim.Faults{})
}

// CX4-Lx style inline requirement read from the vport context.
func TestMinInlineFromVport(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.WQEInlineMode = prm.CapInlineVport
	cfg.VportMinInline = prm.InlineIP
	cfg.EnhancedMPW = false
	h, dev, mem := openModel(t, cfg)
	if h.Caps.MinInline != prm.InlineIP || h.Caps.EnhancedMPW {
		t.Errorf("caps %+v", h.Caps)
	}
	p, err := h.OpenPort(testPortConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	if p.SQs[0].MinInline != prm.InlineIP || p.SQs[0].EnhancedMPW {
		t.Errorf("SQ %+v", p.SQs[0])
	}
	p.Close()
	h.Close()
	assertClean(t, dev, mem)
}

// Features the device lacks are refused by the driver from the caps.
func TestCapsDecideFeatures(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.ExtStrideNumRange = false
	cfg.EnhancedCQECompression = false
	h, dev, mem := openModel(t, cfg)
	if _, err := h.OpenPort(testPortConfig(1)); err == nil || !strings.Contains(err.Error(), "enhanced") {
		t.Errorf("enhanced compression on a device without it: %v", err)
	}
	pc := testPortConfig(1)
	pc.RXCompression.Layout = prm.CQECompLayoutBasic
	if _, err := h.OpenPort(pc); err == nil || !strings.Contains(err.Error(), "strides") {
		t.Errorf("64 strides without ext_stride_num_range: %v", err)
	}
	pc.RQ.LogStrides = 9
	p, err := h.OpenPort(pc)
	if err != nil {
		t.Fatalf("legal config: %v", err)
	}
	p.Close()
	h.Close()
	assertClean(t, dev, mem)
}

// A function left up by an owner that died without teardown is recovered.
func TestOpenRecoversFunctionLeftEnabled(t *testing.T) {
	bus, dev, _ := newModel(sim.DefaultConfig())
	if _, err := mlx5.Open(bus, fastOptions()); err != nil { // never closed: the owner "died"
		t.Fatal(err)
	}
	h, err := mlx5.Open(bus, fastOptions())
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	if !dev.Initialized() {
		t.Fatal("not initialized")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if dev.Enabled() || len(dev.Objects()) != 0 {
		t.Fatalf("enabled=%v objects %v", dev.Enabled(), dev.Objects())
	}
}

// The driver must publish its EQ consumer index: 600 page requests through
// a 256-entry EQ only fit if it does (the model counts overruns).
func TestEQConsumerIndexPublished(t *testing.T) {
	h, dev, mem := openModel(t, sim.DefaultConfig())
	for i := 0; i < 600; i++ {
		dev.PostPageRequest(1)
		if i%100 == 99 {
			if err := h.PollEvents(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := h.PollEvents(); err != nil {
		t.Fatal(err)
	}
	if s := dev.Stats(); s.EQOverruns != 0 {
		t.Fatalf("%d EQ overruns", s.EQOverruns)
	}
	if h.PagesGiven() != 144+600 {
		t.Fatalf("pages %d", h.PagesGiven())
	}
	closeClean(t, h, dev, mem)
}
