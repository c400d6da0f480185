package afxdp

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/ovfwd/ovfwd/fwd"
)

// The bridge's differential rig: one bridge as an engine in bridge mode
// and as fast-path maps (port i is ifindex 100+i). Port 0 receives (VLAN
// 1 untagged, 20 tagged); ports 1 and 2 carry VLAN 1 untagged (port 2 with
// MTU 1400); port 3 carries VLAN 20 untagged and 1 tagged; port 4 carries
// VLAN 1 but is no redirect target (a veth under fast_path = "auto").
// Stations: fbA sends from port 0, fbB on 1, fbC on 2, fbD on 3 (VLAN 1,
// tagged there), fbE on 4, fbF on 0 too, fbG on 3 (VLAN 20).
var (
	fbMACs = []net.HardwareAddr{{2, 0, 0, 0, 1, 0x10}, {2, 0, 0, 0, 1, 0x11}, {2, 0, 0, 0, 1, 0x12}, {2, 0, 0, 0, 1, 0x13}, {2, 0, 0, 0, 1, 0x14}}
	fbMTUs = []int{1500, 1500, 1400, 1500, 1500}
	fbA    = net.HardwareAddr{2, 0, 0, 0, 2, 0xa}
	fbB    = net.HardwareAddr{2, 0, 0, 0, 2, 0xb}
	fbC    = net.HardwareAddr{2, 0, 0, 0, 2, 0xc}
	fbD    = net.HardwareAddr{2, 0, 0, 0, 2, 0xd}
	fbE    = net.HardwareAddr{2, 0, 0, 0, 2, 0xe}
	fbF    = net.HardwareAddr{2, 0, 0, 0, 2, 0xf}
	fbG    = net.HardwareAddr{2, 0, 0, 0, 2, 0x10}
)

// fbHome is where each station lives: port, and the VLAN tag its frames
// carry there (0: untagged).
var fbHome = []struct {
	mac  net.HardwareAddr
	port int
	tag  uint16
}{{fbA, 0, 0}, {fbB, 1, 0}, {fbC, 2, 0}, {fbD, 3, 1}, {fbE, 4, 0}, {fbF, 0, 0}, {fbG, 3, 0}}

type fbRig struct {
	*fpRig
	fs *FastSync
}

func newFBRig(tb testing.TB) *fbRig {
	r := &fbRig{fpRig: newRig(tb, "b", fbMACs, fbMTUs, fwd.Config{Mode: fwd.ModeBridge, BridgeTable: 1024})}
	must(tb, r.e.SetPortVLAN(0, fwd.PortVLAN{Untagged: 1, Tagged: []uint16{20}}))
	must(tb, r.e.SetPortVLAN(3, fwd.PortVLAN{Untagged: 20, Tagged: []uint16{1}}))

	fp, err := NewFastPath()
	must(tb, err)
	tb.Cleanup(func() { fp.Close() })
	r.fs, err = NewFastSync(fp, []int{100, 101, 102, 103, 0})
	must(tb, err)
	// The box's own address on the bridge: IPv4 to it is the kernel's.
	r.steer(tb, fp, "ovfwd_fb_t", func(s *Steering) error {
		return errors.Join(s.SetLocal([]netip.Addr{netip.MustParseAddr("198.18.1.1")}), s.SetFastBridge(true, fbMACs[0], 0, 1))
	})
	r.teach(tb)
	return r
}

// teach has every station send a broadcast from its home, so the engine
// learns (or re-learns) where it is, and mirrors the table into the maps
// as the daemon's control loop does on its tick.
func (r *fbRig) teach(tb testing.TB) {
	for _, h := range fbHome {
		r.ports[h.port].Inject(0, fbFrame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, h.mac, h.tag, 0x88b5, 46))
		r.w.Poll()
		for _, p := range r.ports {
			p.Drain(0)
		}
	}
	if err := r.fs.ApplyBridge(r.e.FastBridge()); err != nil {
		tb.Fatal(err)
	}
}

// check is fpRig.check, then the stations taught again: the engine learnt
// the frame's source, which may have moved a station.
func (r *fbRig) check(t *testing.T, frame []byte) bool {
	t.Helper()
	fw := r.fpRig.check(t, frame)
	r.teach(t)
	return fw
}

// fbFrame builds an Ethernet frame, 802.1Q-tagged when tag is not 0, with
// an IPv4-looking payload of n bytes.
func fbFrame(dst, src net.HardwareAddr, tag uint16, etype uint16, n int) []byte {
	f := append(append([]byte{}, dst...), src...)
	if tag != 0 {
		f = binary.BigEndian.AppendUint16(f, 0x8100)
		f = binary.BigEndian.AppendUint16(f, tag)
	}
	f = binary.BigEndian.AppendUint16(f, etype)
	body := make([]byte, n)
	if n >= 20 {
		body[0], body[8], body[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(body[2:], uint16(n))
		copy(body[12:], []byte{198, 18, 1, 9, 198, 18, 1, 77})
		fixIPSum(body)
	}
	for i := 20; i < n; i++ {
		body[i] = byte(i)
	}
	return append(f, body...)
}

func fbSeeds() [][]byte {
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	mcast := net.HardwareAddr{0x01, 0, 0x5e, 0, 0, 1}
	unknown := net.HardwareAddr{2, 0, 0, 0, 3, 1}
	var out [][]byte
	for _, dst := range []net.HardwareAddr{fbB, fbC, fbD, fbE, fbF, fbG, bcast, mcast, unknown, fbMACs[0], fbMACs[1]} {
		for _, src := range []net.HardwareAddr{fbA, fbF, fbB, unknown, mcast} {
			for _, et := range []uint16{0x0800, 0x86dd, 0x0806} {
				out = append(out, fbFrame(dst, src, 0, et, 46), fbFrame(dst, src, 0, et, 1200))
			}
			out = append(out, fbFrame(dst, src, 1, 0x0800, 46), fbFrame(dst, src, 20, 0x0800, 46))
		}
		out = append(out, fbFrame(dst, fbA, 0, 0x0800, 1402), fbFrame(dst, fbA, 0, 0x0800, 1450), fbFrame(dst, fbA, 0, 0x0800, 1500))
	}
	qinq := fbFrame(fbB, fbA, 1, 0x0800, 46)
	binary.BigEndian.PutUint16(qinq[12:], 0x88a8)
	out = append(out, qinq, fbFrame(fbB, fbA, 0, 0x0800, 0))
	// IPv4 to the box's own address: the kernel's, before any bridging.
	local := fbFrame(fbB, fbA, 0, 0x0800, 46)
	copy(local[14+16:], []byte{198, 18, 1, 1})
	fixIPSum(local[14:])
	return append(out, local)
}

// Every seed: the bridge fast path forwards what the engine forwards the
// same way, or leaves it to the engine; it forwards the plain cases, and
// every punt reason of the bridge moves.
func TestFastPathBridgeMatchesEngine(t *testing.T) {
	r := newFBRig(t)
	forwarded, bytes := 0, 0
	for _, f := range fbSeeds() {
		if r.check(t, f) {
			forwarded++
			bytes += len(f)
		}
	}
	// Known sources A and F to B and C at most sizes, in three ethertypes.
	if forwarded < 20 {
		t.Fatalf("bridge fast path forwarded only %d seeds", forwarded)
	}
	st, err := r.s.FastStats()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []FastStat{FastForwarded, FastPuntVLAN, FastPuntFlood, FastPuntLearn, FastPuntNextHop, FastPuntMTU} {
		if st[s] == 0 {
			t.Errorf("counter %s never moved: %v", s, st)
		}
	}
	if st[FastForwarded] != uint64(forwarded) || st[FastBytes] != uint64(bytes) {
		t.Errorf("counted %d forwarded, %d bytes; saw %d, %d bytes", st[FastForwarded], st[FastBytes], forwarded, bytes)
	}
	// The routed path is off on a bridge port: nothing counted there.
	for _, s := range []FastStat{FastPuntTTL, FastPuntNoRoute, FastPuntChecksum} {
		if st[s] != 0 {
			t.Errorf("routed counter %s moved on a bridge: %v", s, st)
		}
	}
}

// A station that moves: while the maps still say its old port, the fast
// path punts its frames (unknown source here) and, once the control plane
// mirrored the move, forwards to the new port.
func TestFastPathBridgeFollowsMove(t *testing.T) {
	r := newFBRig(t)
	toB := fbFrame(fbB, fbA, 0, 0x0800, 100)
	if !r.check(t, toB) {
		t.Fatal("A → B not forwarded")
	}
	// B moves to port 2.
	r.ports[2].Inject(0, fbFrame(fbA, fbB, 0, 0x0800, 100))
	r.w.Poll()
	for _, p := range r.ports {
		p.Drain(0)
	}
	if err := r.fs.ApplyBridge(r.e.FastBridge()); err != nil {
		t.Fatal(err)
	}
	ro := runOpts(toB)
	if v, err := r.prog.Run(ro); err != nil || v != xdpRedirect {
		t.Fatalf("A → B after the move: verdict %d, %v", v, err)
	}
	var ifindex uint32
	if err := r.s.fast.test.Lookup(uint32(0), &ifindex); err != nil || ifindex != 102 {
		t.Fatalf("A → B after the move left ifindex %d (%v), want 102", ifindex, err)
	}
}

// Random mutations of the seeds (a byte flipped, cut, grown, a random
// MAC): the differential property must hold for all.
func TestFastPathBridgeRandomFrames(t *testing.T) {
	r := newFBRig(t)
	rng := rand.New(rand.NewPCG(21, 22))
	seeds := fbSeeds()
	// Half the mutations start from a seed the fast path forwards.
	var fwSeeds [][]byte
	for _, s := range seeds {
		if r.check(t, s) {
			fwSeeds = append(fwSeeds, s)
		}
	}
	fw := 0
	const n = 3000
	for i := range n {
		from := seeds
		if i%2 == 0 {
			from = fwSeeds
		}
		f := append([]byte(nil), from[rng.IntN(len(from))]...)
		switch rng.IntN(4) {
		case 0:
			f[rng.IntN(len(f))] ^= byte(1 + rng.IntN(255))
		case 1:
			f = f[:14+rng.IntN(len(f)-13)]
		case 2:
			f = append(f, make([]byte, rng.IntN(8))...)
		case 3:
			h := fbHome[rng.IntN(len(fbHome))].mac
			copy(f[6*rng.IntN(2):], h)
		}
		if r.check(t, f) {
			fw++
		}
	}
	if fw < n/5 {
		t.Fatalf("only %d of %d mutated frames forwarded: the test would not see a divergence", fw, n)
	}
}

func FuzzFastPathBridge(f *testing.F) {
	for _, s := range fbSeeds() {
		f.Add(s)
	}
	r := newFBRig(f)
	f.Fuzz(func(t *testing.T, frame []byte) { r.check(t, frame) })
}

func runOpts(frame []byte) *ebpf.RunOptions {
	return &ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)}
}
