package afxdp

import (
	"encoding/binary"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// steerModel is the steering rule in Go, written from the spec (Steering's
// doc comment), not from the program: true means "to ovfwd".
func steerModel(f []byte, local map[netip.Addr]bool, vpnPort, natLo, natHi uint16) bool {
	if len(f) < 14 {
		return true
	}
	et, l3 := binary.BigEndian.Uint16(f[12:]), 14
	if et == 0x8100 {
		if len(f) < 18 {
			return true
		}
		et, l3 = binary.BigEndian.Uint16(f[16:]), 18
	}
	ip := f[l3:]
	var dst netip.Addr
	var l4 []byte
	switch et {
	case 0x0800:
		if len(ip) < 20 {
			return true
		}
		dst = netip.AddrFrom4([4]byte(ip[16:20]))
		if !local[dst] {
			return true
		}
		if natHi != 0 && steerNAT(ip, vpnPort, natLo, natHi) {
			return true
		}
		// Fragments are the kernel's: it reassembles them.
		if vpnPort == 0 || ip[9] != 17 || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
			return false
		}
		ihl := int(ip[0]&0x0f) * 4
		if ihl > len(ip) {
			return false
		}
		l4 = ip[ihl:]
	case 0x86dd:
		if len(ip) < 40 {
			return true
		}
		dst = netip.AddrFrom16([16]byte(ip[24:40]))
		if !local[dst] {
			return true
		}
		proto := ip[6]
		l4 = ip[40:]
		if proto == 58 {
			return len(l4) >= 1 && (l4[0] == 135 || l4[0] == 136)
		}
		if vpnPort == 0 || proto != 17 {
			return false
		}
	default:
		return true
	}
	if len(l4) < 9 {
		return false
	}
	return binary.BigEndian.Uint16(l4[2:]) == vpnPort && l4[8]>>3 == 9
}

// modelFrags are the first fragments the model saw NAT claim (the
// program's LRU map, whose evictions the model cannot predict: past a few
// entries a later fragment of a claimed first is not checked).
var (
	modelFrags  = map[[12]byte]bool{}
	modelUnsure bool
)

func fragKey(ip []byte) (k [12]byte) {
	copy(k[0:8], ip[12:20])
	copy(k[8:10], ip[4:6])
	k[10] = ip[9]
	return k
}

// steerNAT: what NAT owns on a local IPv4 address (Steering's doc).
func steerNAT(ip []byte, vpnPort, lo, hi uint16) bool {
	frag := binary.BigEndian.Uint16(ip[6:])
	if frag&0x1fff != 0 {
		seen := modelFrags[fragKey(ip)]
		modelUnsure = seen && len(modelFrags) > 64
		return seen
	}
	claimed := steerNATPorts(ip, vpnPort, lo, hi)
	if claimed && frag&0x2000 != 0 {
		modelFrags[fragKey(ip)] = true
	}
	return claimed
}

func steerNATPorts(ip []byte, vpnPort, lo, hi uint16) bool {
	in := func(p uint16) bool { return p >= lo && p <= hi }
	ihl := int(ip[0]&0x0f) * 4
	if ihl > len(ip) {
		return false
	}
	l4 := ip[ihl:]
	switch ip[9] {
	case 6, 17:
		if len(l4) < 4 {
			return false
		}
		p := binary.BigEndian.Uint16(l4[2:])
		return p != vpnPort && in(p)
	case 1:
		if len(l4) < 8 {
			return false
		}
		switch l4[0] {
		case 0:
			return in(binary.BigEndian.Uint16(l4[4:]))
		case 3, 4, 11, 12:
			q := l4[8:]
			if len(q) < 20 {
				return false
			}
			qihl := int(q[0]&0x0f) * 4
			if len(q) < qihl+8 {
				return false
			}
			switch q[9] {
			case 6, 17:
				return in(binary.BigEndian.Uint16(q[qihl:]))
			case 1:
				return in(binary.BigEndian.Uint16(q[qihl+4:]))
			}
		}
	}
	return false
}

var (
	modelLocal4 = netip.MustParseAddr("198.18.8.3")
	modelLocal6 = netip.MustParseAddr("2001:db8:8::3")
)

const (
	modelVPNPort = 1194
	modelNATLo   = 1024
	modelNATHi   = 32767
)

// modelShapes are the program shapes checked: no VPN, VPN, VPN with NAT.
var modelShapes = [3]struct{ vpn, natLo, natHi uint16 }{{0, 0, 0}, {modelVPNPort, 0, 0}, {modelVPNPort, modelNATLo, modelNATHi}}

// loadModelPrograms loads the verdict-only program with a local address of
// each family, for both program shapes (VPN port / none).
func loadModelPrograms(tb testing.TB) (progs [3]*ebpf.Program) {
	clear(modelFrags) // fresh programs, fresh maps
	if os.Geteuid() != 0 {
		if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
			tb.Fatal("needs root")
		}
		tb.Skip("needs root (BPF_PROG_TEST_RUN)")
	}
	for i, sh := range modelShapes {
		s, err := NewSteering(1, sh.vpn)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		if err := s.SetLocal([]netip.Addr{modelLocal4, modelLocal6}); err != nil {
			tb.Fatal(err)
		}
		if err := s.SetNAT(sh.natLo, sh.natHi); err != nil {
			tb.Fatal(err)
		}
		prog, err := s.load("ovfwd_steer_t", true)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { prog.Close() })
		progs[i] = prog
	}
	return
}

func checkSteering(t *testing.T, progs [3]*ebpf.Program, frame []byte) {
	if len(frame) < 14 || len(frame) > 1500 {
		return // BPF_PROG_TEST_RUN takes Ethernet frames of at least a header
	}
	local := map[netip.Addr]bool{modelLocal4: true, modelLocal6: true}
	for i, prog := range progs {
		v, err := prog.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatalf("test run: %v", err)
		}
		sh := modelShapes[i]
		if v != xdpPass && v != xdpTX {
			t.Fatalf("shape %+v: verdict %d for % x", sh, v, frame)
		}
		modelUnsure = false
		if want := steerModel(frame, local, sh.vpn, sh.natLo, sh.natHi); (v == xdpTX) != want && !modelUnsure {
			t.Fatalf("shape %+v: program says ovfwd=%v, model says %v, frame % x", sh, v == xdpTX, want, frame)
		}
	}
}

func TestSteeringDecisions(t *testing.T) {
	progs := loadModelPrograms(t)
	for _, f := range steeringSeeds() {
		checkSteering(t, progs, f)
	}
}

func FuzzSteering(f *testing.F) {
	for _, s := range steeringSeeds() {
		f.Add(s)
	}
	progs := loadModelPrograms(f)
	f.Fuzz(func(t *testing.T, frame []byte) { checkSteering(t, progs, frame) })
}

// steeringSeeds covers every branch: ARP, transit v4/v6, local ping,
// control and data to the VPN port (v4, v6, VLAN), ND, a fragment,
// options in the IPv4 header, truncated headers.
func steeringSeeds() [][]byte {
	eth := func(et uint16, payload []byte) []byte {
		f := make([]byte, 14, 14+len(payload))
		f[0] = 0x02
		binary.BigEndian.PutUint16(f[12:], et)
		return append(f, payload...)
	}
	vlan := func(et uint16, payload []byte) []byte {
		f := make([]byte, 18, 18+len(payload))
		binary.BigEndian.PutUint16(f[12:], 0x8100)
		binary.BigEndian.PutUint16(f[16:], et)
		return append(f, payload...)
	}
	v4 := func(dst netip.Addr, proto uint8, ihl int, frag uint16, l4 []byte) []byte {
		h := make([]byte, ihl*4)
		h[0] = 0x40 | byte(ihl)
		h[8], h[9] = 64, proto
		binary.BigEndian.PutUint16(h[6:], frag)
		a := dst.As4()
		copy(h[16:], a[:])
		return append(h, l4...)
	}
	v6 := func(dst netip.Addr, next uint8, l4 []byte) []byte {
		h := make([]byte, 40)
		h[0], h[6], h[7] = 0x60, next, 64
		a := dst.As16()
		copy(h[24:], a[:])
		return append(h, l4...)
	}
	udp := func(port uint16, first byte) []byte {
		u := make([]byte, 8, 16)
		binary.BigEndian.PutUint16(u[0:], 40000)
		binary.BigEndian.PutUint16(u[2:], port)
		return append(u, first, 0, 0, 1)
	}
	other4 := netip.MustParseAddr("198.18.9.9")
	other6 := netip.MustParseAddr("2001:db8:9::9")
	return [][]byte{
		eth(0x0806, make([]byte, 28)),
		// NAT: TCP/UDP to a port in and out of the range, echo replies,
		// errors quoting a NAT port, a later fragment.
		eth(0x0800, v4(modelLocal4, 6, 5, 0, udp(2000, 0))),
		eth(0x0800, v4(modelLocal4, 17, 5, 0, udp(40000, 0))),
		eth(0x0800, v4(modelLocal4, 1, 5, 0, []byte{0, 0, 0, 0, 0x05, 0xdc, 0, 1})),
		eth(0x0800, v4(modelLocal4, 1, 5, 0, []byte{0, 0, 0, 0, 0x9c, 0x40, 0, 1})),
		eth(0x0800, v4(modelLocal4, 1, 5, 0, append([]byte{11, 0, 0, 0, 0, 0, 0, 0}, v4(other4, 17, 5, 0, []byte{0x05, 0xdc, 0, 53, 0, 8, 0, 0})...))),
		eth(0x0800, v4(modelLocal4, 1, 5, 0, append([]byte{3, 3, 0, 0, 0, 0, 0, 0}, v4(other4, 6, 6, 0, make([]byte, 12))...))),
		eth(0x0800, v4(modelLocal4, 1, 5, 0, append([]byte{3, 1, 0, 0, 0, 0, 0, 0}, v4(other4, 1, 5, 0, []byte{8, 0, 0, 0, 0x05, 0xdc, 0, 1})...))),
		eth(0x0800, v4(modelLocal4, 17, 5, 0x0020, nil)),
		// A first fragment NAT claims, then its later fragment (to ovfwd),
		// then a later fragment of a datagram nobody claimed (the kernel's).
		eth(0x0800, v4(modelLocal4, 17, 5, 0x2000, udp(2000, 0))),
		eth(0x0800, v4(modelLocal4, 17, 5, 0x0003, []byte("later data"))),
		eth(0x0800, v4(modelLocal4, 17, 5, 0x2000, udp(modelVPNPort, 9<<3))),
		eth(0x0800, v4(modelLocal4, 6, 5, 0x0003, []byte("other later"))),
		eth(0x0800, v4(other4, 17, 5, 0, udp(modelVPNPort, 9<<3))),
		eth(0x0800, v4(modelLocal4, 1, 5, 0, []byte{8, 0, 0, 0, 0, 0, 0, 0})),
		eth(0x0800, v4(modelLocal4, 17, 5, 0, udp(modelVPNPort, 9<<3))),
		eth(0x0800, v4(modelLocal4, 17, 5, 0, udp(modelVPNPort, 7<<3))),
		eth(0x0800, v4(modelLocal4, 17, 5, 0, udp(53, 9<<3))),
		eth(0x0800, v4(modelLocal4, 17, 7, 0, udp(modelVPNPort, 9<<3|1))),
		eth(0x0800, v4(modelLocal4, 17, 5, 0x0010, udp(modelVPNPort, 9<<3))),
		// The first fragment of a P_DATA_V2 datagram (MF, offset 0), and
		// the last one (offset, no MF): both the kernel's.
		eth(0x0800, v4(modelLocal4, 17, 5, 0x2000, udp(modelVPNPort, 9<<3))),
		eth(0x0800, v4(modelLocal4, 17, 5, 0x00b9, udp(modelVPNPort, 9<<3))),
		// An IPv6 first fragment: next header 44, the kernel's.
		eth(0x86dd, v6(modelLocal6, 44, append([]byte{17, 0, 0, 1, 0, 0, 0, 1}, udp(modelVPNPort, 9<<3)...))),
		eth(0x0800, v4(modelLocal4, 17, 15, 0, nil)),
		eth(0x0800, v4(modelLocal4, 17, 5, 0, udp(modelVPNPort, 9<<3))[:28]),
		eth(0x0800, []byte{0x45, 0}),
		vlan(0x0800, v4(modelLocal4, 17, 5, 0, udp(modelVPNPort, 9<<3))),
		vlan(0x0800, v4(modelLocal4, 6, 5, 0, make([]byte, 20))),
		eth(0x86dd, v6(other6, 17, udp(modelVPNPort, 7<<3))),
		eth(0x86dd, v6(modelLocal6, 17, udp(modelVPNPort, 9<<3))),
		eth(0x86dd, v6(modelLocal6, 17, udp(modelVPNPort, 4<<3))),
		eth(0x86dd, v6(modelLocal6, 58, []byte{128, 0, 0, 0})),
		eth(0x86dd, v6(modelLocal6, 58, []byte{135, 0, 0, 0})),
		eth(0x86dd, v6(modelLocal6, 58, []byte{136, 0, 0, 0})),
		eth(0x86dd, v6(modelLocal6, 58, nil)),
		eth(0x86dd, v6(modelLocal6, 0, udp(modelVPNPort, 9<<3))),
		eth(0x86dd, make([]byte, 20)),
		make([]byte, 14),
	}
}
