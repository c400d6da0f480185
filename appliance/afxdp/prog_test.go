package afxdp

import (
	"os"
	"testing"
)

// The steering program assembles for every shape (with and without a VPN
// port); a label error would only show at load time otherwise. Loading
// (the verifier) needs root: TestSteeringLoads.
func TestSteeringAssembles(t *testing.T) {
	for _, port := range []uint16{0, 1194} {
		insns, err := steeringProgram(3, 4, 5, port, false).assemble()
		if err != nil {
			t.Fatalf("vpn port %d: %v", port, err)
		}
		if len(insns) < 40 {
			t.Fatalf("vpn port %d: only %d instructions", port, len(insns))
		}
	}
}

func TestAssembleRejectsBadLabels(t *testing.T) {
	p := &prog{}
	p.Ja("nowhere")
	if _, err := p.assemble(); err == nil {
		t.Error("unknown label accepted")
	}
	p = &prog{}
	p.Label("x")
	p.Return(xdpPass)
	p.Label("x")
	p.Return(xdpPass)
	if _, err := p.assemble(); err == nil {
		t.Error("duplicate label accepted")
	}
}

// The kernel's verifier accepts both shapes of the steering program and
// the drop counter.
func TestSteeringLoads(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
			t.Fatal("needs root")
		}
		t.Skip("needs root")
	}
	for _, port := range []uint16{0, 1194} {
		s, err := NewSteering(2, port)
		if err != nil {
			t.Fatalf("vpn port %d: %v", port, err)
		}
		s.Close()
	}
	c, err := NewDropCounter()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
