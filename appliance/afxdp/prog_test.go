package afxdp

import (
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// The steering program encodes for every shape (with and without a VPN
// port, redirecting or verdict-only): every jump label resolves and is
// unique, and every map load names one of the steering maps. A label error
// would only show at load time otherwise. Loading (the verifier) needs
// root: TestSteeringLoads.
func TestSteeringAssembles(t *testing.T) {
	for _, port := range []uint16{0, 1194} {
		for _, verdictOnly := range []bool{false, true} {
			insns := steeringProgram(port, verdictOnly, false)
			refs := map[string]bool{}
			for _, in := range insns {
				if in.IsLoadFromMap() {
					refs[in.Reference()] = true
				}
			}
			if !refs[mapLocal4] || !refs[mapLocal6] || refs[mapXSKs] == verdictOnly || !refs[mapNAT] || !refs[mapNATFrag] || len(refs) != 5-btoi(verdictOnly) {
				t.Errorf("vpn port %d verdictOnly %v: map references %v", port, verdictOnly, refs)
			}
			if err := insns.Marshal(io.Discard, binary.LittleEndian); err != nil {
				t.Fatalf("vpn port %d verdictOnly %v: %v", port, verdictOnly, err)
			}
			if len(insns) < 40 {
				t.Fatalf("vpn port %d: only %d instructions", port, len(insns))
			}
		}
	}
	if err := dropCounterProgram().Marshal(io.Discard, binary.LittleEndian); err != nil {
		t.Fatalf("drop counter: %v", err)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The encoder this package relies on for labels rejects what the hand
// assembler it replaced rejected: unknown and duplicate labels.
func TestEncodeRejectsBadLabels(t *testing.T) {
	bad := asm.Instructions{asm.Ja.Label("nowhere"), asm.Return()}
	if err := bad.Marshal(io.Discard, binary.LittleEndian); !errors.Is(err, asm.ErrUnsatisfiedProgramReference) {
		t.Errorf("unknown label: %v", err)
	}
	dup := asm.Instructions{
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("x"),
		asm.Ja.Label("x"),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("x"),
		asm.Return(),
	}
	if err := dup.Marshal(io.Discard, binary.LittleEndian); err == nil {
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

// The filtered drop counter drops and counts only IPv4 packets to its
// prefix; everything else goes to the kernel uncounted.
func TestDropCounterFor(t *testing.T) {
	nstest.RequireRoot(t)
	c, err := NewDropCounterFor(netip.MustParsePrefix("198.18.82.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := func(etype uint16, dst string) []byte {
		f := make([]byte, 60)
		binary.BigEndian.PutUint16(f[12:], etype)
		f[14] = 0x45
		d := netip.MustParseAddr(dst).As4()
		copy(f[30:], d[:])
		return f
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  uint32
	}{
		{"ipv4 in prefix", frame(0x0800, "198.18.82.7"), xdpDrop},
		{"ipv4 prefix edge", frame(0x0800, "198.18.82.255"), xdpDrop},
		{"ipv4 next prefix", frame(0x0800, "198.18.83.1"), xdpPass},
		{"ipv4 sink host", frame(0x0800, "198.18.81.2"), xdpPass},
		{"arp", frame(0x0806, "198.18.82.7"), xdpPass},
		{"ipv6", frame(0x86dd, "198.18.82.7"), xdpPass},
		{"short", frame(0x0800, "198.18.82.7")[:30], xdpPass},
	} {
		v, err := c.prog.Run(&ebpf.RunOptions{Data: tc.frame})
		if err != nil {
			t.Fatalf("%s: test run: %v", tc.name, err)
		}
		if v != tc.want {
			t.Errorf("%s: verdict %d, want %d", tc.name, v, tc.want)
		}
	}
	if n, _, err := c.Count(); err != nil || n != 2 {
		t.Fatalf("counted %d (err %v), want the 2 dropped", n, err)
	}
	if _, err := NewDropCounterFor(netip.MustParsePrefix("2001:db8::/32")); err == nil {
		t.Error("an IPv6 prefix was accepted")
	}
}
