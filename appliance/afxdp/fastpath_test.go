package afxdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/porttest"
)

// The differential rig: the same router as fwd tables and as fast-path
// maps. Port i of the engine is ifindex 100+i of the fast path. Port 0
// (198.18.1.1/24) receives; port 1 (198.18.2.1/24, MTU 1500) reaches
// 198.18.64.0/18 via 198.18.2.2 and has host 198.18.2.7; port 2
// (198.18.3.1/24, MTU 1400) reaches 198.18.128.0/17 via 198.18.3.2;
// 198.18.160.0/20 is a blackhole; port 3 (198.18.4.1/24, MTU 3450, past
// maxFinishLen) reaches 198.18.224.0/20 via 198.18.4.2. What the control plane would install for
// it: a next hop per resolved adjacency, punt entries for the connected
// subnets (unresolved hosts, the box's own addresses) and the blackhole.
var (
	fpMACs = []net.HardwareAddr{{2, 0, 0, 0, 0, 0x10}, {2, 0, 0, 0, 0, 0x11}, {2, 0, 0, 0, 0, 0x12}, {2, 0, 0, 0, 0, 0x13}}
	fpGW1  = net.HardwareAddr{2, 0, 0, 0, 0, 0xa1}
	fpGW2  = net.HardwareAddr{2, 0, 0, 0, 0, 0xa2}
	fpGW3  = net.HardwareAddr{2, 0, 0, 0, 0, 0xa3}
	fpHost = net.HardwareAddr{2, 0, 0, 0, 0, 0xa7}
	fpMTUs = []int{1500, 1500, 1400, 3450}
)

type fpRig struct {
	e     *fwd.Engine
	w     *fwd.Worker
	ports []*porttest.Port
	s     *Steering
	prog  *ebpf.Program
	fs    *FastSync
	out   []byte // the last frame the fast path forwarded, as it left
}

func needRoot(tb testing.TB) {
	if os.Geteuid() != 0 {
		if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
			tb.Fatal("needs root")
		}
		tb.Skip("needs root (BPF maps and BPF_PROG_TEST_RUN)")
	}
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// newRig makes a rig's engine: port i (named prefix+i) has macs[i] and
// mtus[i]. Its clock stands still: no neighbour retransmission, expiry or
// ageing adds frames to a later check's output.
func newRig(tb testing.TB, prefix string, macs []net.HardwareAddr, mtus []int, cfg fwd.Config) *fpRig {
	needRoot(tb)
	r := &fpRig{}
	pool := porttest.NewPool(1, 512, fwd.Headroom+4096)
	var fports []fwd.Port
	for i, mac := range macs {
		p := porttest.New(prefix+itoa(i), mac, mtus[i], 1, pool)
		r.ports = append(r.ports, p)
		fports = append(fports, p)
	}
	cfg.Now = func() int64 { return int64(time.Hour) }
	var err error
	r.e, err = fwd.New(cfg, fports)
	must(tb, err)
	r.w = r.e.Workers()[0]
	return r
}

// steer loads the verdict-only steering program over fp as name, set
// configuring it first.
func (r *fpRig) steer(tb testing.TB, fp *FastPath, name string, set func(*Steering) error) {
	var err error
	r.s, err = newSteering(1, 0, fp)
	must(tb, err)
	tb.Cleanup(func() { r.s.Close() })
	must(tb, set(r.s))
	r.prog, err = r.s.load(name, true)
	must(tb, err)
	tb.Cleanup(func() { r.prog.Close() })
}

func newFPRig(tb testing.TB, mssClamp uint16) *fpRig {
	r := newRig(tb, "p", fpMACs, fpMTUs, fwd.Config{Mode: fwd.ModeRouter, MSSClamp: mssClamp, ICMPRate: -1})
	for i, a := range []string{"198.18.1.1/24", "198.18.2.1/24", "198.18.3.1/24", "198.18.4.1/24"} {
		must(tb, r.e.AddAddress(i, netip.MustParsePrefix(a)))
	}
	must(tb, r.e.AddRoute(netip.MustParsePrefix("198.18.64.0/18"), fwd.NextHop{Port: 1, Via: netip.MustParseAddr("198.18.2.2")}))
	must(tb, r.e.AddRoute(netip.MustParsePrefix("198.18.128.0/17"), fwd.NextHop{Port: 2, Via: netip.MustParseAddr("198.18.3.2")}))
	must(tb, r.e.AddRoute(netip.MustParsePrefix("198.18.160.0/20"), fwd.NextHop{Blackhole: true}))
	must(tb, r.e.SetNeighbour(1, netip.MustParseAddr("198.18.2.2"), fpGW1))
	must(tb, r.e.SetNeighbour(2, netip.MustParseAddr("198.18.3.2"), fpGW2))
	must(tb, r.e.SetNeighbour(1, netip.MustParseAddr("198.18.2.7"), fpHost))
	must(tb, r.e.AddRoute(netip.MustParsePrefix("198.18.224.0/20"), fwd.NextHop{Port: 3, Via: netip.MustParseAddr("198.18.4.2")}))
	must(tb, r.e.SetNeighbour(3, netip.MustParseAddr("198.18.4.2"), fpGW3))

	for i, a := range []string{"2001:db8:1::1/64", "2001:db8:2::1/64", "2001:db8:3::1/64", "2001:db8:4::1/64"} {
		must(tb, r.e.AddAddress(i, netip.MustParsePrefix(a)))
	}
	must(tb, r.e.AddRoute(netip.MustParsePrefix("2001:db8:40::/48"), fwd.NextHop{Port: 1, Via: netip.MustParseAddr("2001:db8:2::2")}))
	must(tb, r.e.AddRoute(netip.MustParsePrefix("2001:db8:80::/48"), fwd.NextHop{Port: 2, Via: netip.MustParseAddr("2001:db8:3::2")}))
	must(tb, r.e.AddRoute(netip.MustParsePrefix("2001:db8:a0::/48"), fwd.NextHop{Blackhole: true}))
	must(tb, r.e.SetNeighbour(1, netip.MustParseAddr("2001:db8:2::2"), fpGW1))
	must(tb, r.e.SetNeighbour(2, netip.MustParseAddr("2001:db8:3::2"), fpGW2))
	must(tb, r.e.SetNeighbour(1, netip.MustParseAddr("2001:db8:2::7"), fpHost))
	must(tb, r.e.AddRoute(netip.MustParsePrefix("2001:db8:c0::/48"), fwd.NextHop{Port: 3, Via: netip.MustParseAddr("2001:db8:4::2")}))
	must(tb, r.e.SetNeighbour(3, netip.MustParseAddr("2001:db8:4::2"), fpGW3))
	// Routes over the martian destinations, so that a fast path that
	// forgot a class would forward what the engine drops (fpMartians).
	for _, m := range []string{"0.0.0.0/8", "127.0.0.0/8", "224.0.0.0/3"} {
		must(tb, r.e.AddRoute(netip.MustParsePrefix(m), fwd.NextHop{Port: 3, Via: netip.MustParseAddr("198.18.4.2")}))
	}
	for _, m := range []string{"::/8", "fe80::/10", "ff00::/8"} {
		must(tb, r.e.AddRoute(netip.MustParsePrefix(m), fwd.NextHop{Port: 3, Via: netip.MustParseAddr("2001:db8:4::2")}))
	}

	// The maps as the daemon's control loop writes them: the engine's view
	// through FastSync (port i is ifindex 100+i).
	fp, err := NewFastPath()
	must(tb, err)
	tb.Cleanup(func() { fp.Close() })
	fs, err := NewFastSync(fp, []int{100, 101, 102, 103})
	must(tb, err)
	must(tb, fs.Apply(r.e.FastView()))
	r.fs = fs
	r.steer(tb, fp, "ovfwd_fp_t", func(s *Steering) error {
		return errors.Join(s.SetLocal([]netip.Addr{netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("2001:db8:1::1")}),
			s.SetFast(true, fpMACs[0], mssClamp != 0))
	})
	return r
}

// engine runs frame through the engine from port 0 and returns what came
// out of each port.
func (r *fpRig) engine(frame []byte) [][][]byte {
	r.ports[0].Inject(0, frame)
	r.w.Poll()
	out := make([][][]byte, len(r.ports))
	for i, p := range r.ports {
		out[i] = p.Drain(0)
	}
	return out
}

// check runs frame through the program and the engine: a frame the fast
// path forwards must leave the engine, alone, on the same port, byte for
// byte; anything else is the engine's (punted) or the kernel's.
func (r *fpRig) check(t *testing.T, frame []byte) (forwarded bool) {
	t.Helper()
	if len(frame) < ethHeaderLen || len(frame) > maxTestFrame {
		return false
	}
	ro := &ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)}
	v, err := r.prog.Run(ro)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	out := ro.DataOut
	got := r.engine(frame)
	switch v {
	case xdpTX, xdpPass:
		return false
	case xdpRedirect:
	default:
		t.Fatalf("verdict %d for % x", v, frame)
	}
	var ifindex uint32
	if err := r.s.fast.test.Lookup(uint32(0), &ifindex); err != nil {
		t.Fatal(err)
	}
	port := int(ifindex) - 100
	n := 0
	for i := range got {
		n += len(got[i])
	}
	if port < 0 || port >= len(got) || n != 1 || len(got[port]) != 1 {
		t.Fatalf("fast path sent to ifindex %d, engine sent %d frames (per port %d/%d/%d) for\n% x",
			ifindex, n, len(got[0]), len(got[1]), len(got[2]), frame)
	}
	if !bytes.Equal(got[port][0], out) {
		t.Fatalf("fast path and engine differ for\n% x\nfast   % x\nengine % x", frame, out, got[port][0])
	}
	r.out = out
	return true
}

// maxTestFrame is about the longest frame BPF_PROG_TEST_RUN takes in one
// buffer for an XDP program: a page less XDP_PACKET_HEADROOM and
// skb_shared_info (bpf_prog_test_run_xdp).
const maxTestFrame = 3500

// fpFrame builds an Ethernet/IPv4 frame to port 0 with a valid checksum.
func fpFrame(dst netip.Addr, proto uint8, ttl uint8, payload int) []byte {
	l4 := 8
	if proto == 6 {
		l4 = 20
	}
	f := make([]byte, 14+20+l4+payload)
	copy(f[0:6], fpMACs[0])
	copy(f[6:12], []byte{2, 0, 0, 0, 0, 0xee})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, ttl, proto
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[4:], 0x1234)
	copy(ip[12:16], []byte{198, 18, 1, 9})
	d := dst.As4()
	copy(ip[16:20], d[:])
	fixIPSum(ip)
	t := ip[20:]
	binary.BigEndian.PutUint16(t[0:], 4000)
	binary.BigEndian.PutUint16(t[2:], 5000)
	if proto == 6 {
		t[12] = 5 << 4
		t[13] = 0x10 // ACK
	} else {
		binary.BigEndian.PutUint16(t[4:], uint16(len(t)))
	}
	return f
}

func fixIPSum(ip []byte) {
	ip[10], ip[11] = 0, 0
	var s uint32
	for i := 0; i < int(ip[0]&0xf)*4; i += 2 {
		s += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(s))
}

// fpFrame6 builds an Ethernet/IPv6 frame to port 0.
func fpFrame6(dst netip.Addr, proto uint8, hop uint8, payload int) []byte {
	l4 := 8
	if proto == 6 {
		l4 = 20
	}
	f := make([]byte, 14+40+l4+payload)
	copy(f[0:6], fpMACs[0])
	copy(f[6:12], []byte{2, 0, 0, 0, 0, 0xee})
	binary.BigEndian.PutUint16(f[12:], 0x86dd)
	ip := f[14:]
	ip[0], ip[6], ip[7] = 0x60, proto, hop
	binary.BigEndian.PutUint16(ip[4:], uint16(l4+payload))
	src := netip.MustParseAddr("2001:db8:1::9").As16()
	copy(ip[8:24], src[:])
	d := dst.As16()
	copy(ip[24:40], d[:])
	t := ip[40:]
	binary.BigEndian.PutUint16(t[0:], 4000)
	binary.BigEndian.PutUint16(t[2:], 5000)
	if proto == 6 {
		t[12] = 5 << 4
		t[13] = 0x10
	} else {
		binary.BigEndian.PutUint16(t[4:], uint16(len(t)))
	}
	return f
}

var fpDsts6 = []string{"2001:db8:40::1", "2001:db8:40:ffff::9", "2001:db8:80::5", "2001:db8:2::7", "2001:db8:2::9",
	"2001:db8:3::2", "2001:db8:1::1", "2001:db8:2::1", "2001:db8:a0::1", "2001:db8:ff::1", "fe80::1"}

var fpDsts = []string{"198.18.64.1", "198.18.100.200", "198.18.127.255", "198.18.128.0", "198.18.200.3",
	"198.18.2.7", "198.18.2.9", "198.18.3.2", "198.18.1.1", "198.18.2.1", "198.18.161.1", "198.19.0.1", "10.1.2.3"}

// fpSeeds are frames for every branch: forwarded by both, each punt.
func fpSeeds() [][]byte {
	var out [][]byte
	for _, d := range fpDsts {
		a := netip.MustParseAddr(d)
		out = append(out, fpFrame(a, 17, 64, 18), fpFrame(a, 6, 64, 100), fpFrame(a, 17, 1, 10), fpFrame(a, 17, 2, 1400))
	}
	f := fpFrame(netip.MustParseAddr("198.18.64.1"), 17, 64, 30)
	f[24] ^= 1 // bad checksum
	out = append(out, f)
	f = fpFrame(netip.MustParseAddr("198.18.64.1"), 17, 64, 30)
	f[0] = 0x04 // not our MAC
	out = append(out, f)
	f = append(fpFrame(netip.MustParseAddr("198.18.64.1"), 17, 64, 10), 0, 0, 0, 0) // padding
	out = append(out, f)
	f = fpFrame(netip.MustParseAddr("198.18.64.1"), 17, 64, 30)
	f[20] = 0x20 // MF
	fixIPSum(f[14:])
	out = append(out, f)
	f = fpFrame(netip.MustParseAddr("198.18.64.1"), 6, 64, 0)
	f[14+20+13] = 0x02 // SYN
	out = append(out, f)
	f = fpFrame(netip.MustParseAddr("198.18.64.1"), 1, 64, 30) // ICMP
	out = append(out, f)
	// CHECKSUM_PARTIAL from a host with offloads: the field holds the
	// pseudo-header sum; both finish it up to maxFinishLen, and the fast
	// path leaves longer segments to the engine.
	rng := rand.New(rand.NewPCG(3, 4))
	for _, proto := range []uint8{6, 17} {
		for _, n := range []int{40, 41, 1001, maxFinishLen - 1, maxFinishLen, maxFinishLen + 1} {
			out = append(out, partialFrame(rng, false, "198.18.224.9", proto, n), partialFrame(rng, true, "2001:db8:c0::9", proto, n))
		}
	}
	for _, d := range fpDsts6 {
		a := netip.MustParseAddr(d)
		out = append(out, fpFrame6(a, 17, 64, 18), fpFrame6(a, 6, 64, 100), fpFrame6(a, 17, 1, 10), fpFrame6(a, 17, 2, 1400))
	}
	f = fpFrame6(netip.MustParseAddr("2001:db8:40::1"), 0, 64, 30) // hop-by-hop header
	out = append(out, f)
	f = fpFrame6(netip.MustParseAddr("2001:db8:40::1"), 58, 64, 30) // ICMPv6
	out = append(out, f)
	f = fpFrame6(netip.MustParseAddr("2001:db8:40::1"), 6, 64, 0)
	f[14+40+13] = 0x02 // SYN
	out = append(out, f)
	for _, m := range append(fpMartians, fpNotMartians...) {
		out = append(out, addressed(m[0], m[1], 17), addressed(m[0], m[1], 6))
	}
	return out
}

// fpMartians are a frame's addresses (source, destination) in every
// martian class of fwd's martian.go; each has a route (newFPRig).
var fpMartians = [][2]string{
	{"198.18.1.9", "255.255.255.255"}, {"198.18.1.9", "224.0.0.251"}, {"198.18.1.9", "239.255.255.250"},
	{"198.18.1.9", "127.0.0.1"}, {"198.18.1.9", "0.1.2.3"}, {"127.0.0.1", "198.18.64.1"}, {"0.0.0.0", "198.18.64.1"},
	{"224.0.0.5", "198.18.64.1"}, {"255.255.255.255", "198.18.64.1"},
	{"198.18.1.1", "198.18.64.1"}, // our address on the ingress port
	{"198.18.3.1", "198.18.64.1"}, // on another port
	{"fe80::a", "2001:db8:40::1"}, {"2001:db8:1::9", "fe80::b"}, {"2001:db8:1::9", "ff0e::1"}, {"2001:db8:1::9", "::1"},
	{"::1", "2001:db8:40::1"}, {"::", "2001:db8:40::1"}, {"2001:db8:1::9", "::"}, {"ff02::1", "2001:db8:40::1"},
}

// fpNotMartians are their neighbours that are not: the class tests'
// edges, a source whose last byte is one of our addresses', an IPv4-mapped
// address, and a link-local source to one of our addresses.
var fpNotMartians = [][2]string{
	{"198.18.1.9", "255.255.255.254"}, {"198.18.1.9", "240.0.0.1"}, {"198.18.5.1", "198.18.64.1"},
	{"1.0.0.1", "198.18.64.1"}, {"126.255.255.255", "198.18.64.1"}, {"223.255.255.255", "198.18.64.1"},
	{"2001:db8:1::9", "::ffff:198.18.64.1"}, {"2001:db8:1::9", "::2"}, {"fec0::1", "2001:db8:40::1"},
	{"fe80::a", "2001:db8:2::1"},
}

// addressed is a UDP or TCP frame to port 0 from src to dst.
func addressed(src, dst string, proto uint8) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	if s.Is4() {
		f := fpFrame(d, proto, 64, 20)
		copy(f[14+12:], s.AsSlice())
		fixIPSum(f[14:])
		return f
	}
	f := fpFrame6(d, proto, 64, 20)
	copy(f[14+8:], s.AsSlice())
	return f
}

// partialFrame is a frame to dst whose TCP or UDP segment of n bytes
// (random payload) carries an unfinished checksum.
func partialFrame(rng *rand.Rand, v6 bool, dst string, proto uint8, n int) []byte {
	hdr := 8
	if proto == 6 {
		hdr = 20
	}
	var f []byte
	if v6 {
		f = fpFrame6(netip.MustParseAddr(dst), proto, 64, n-hdr)
	} else {
		f = fpFrame(netip.MustParseAddr(dst), proto, 64, n-hdr)
	}
	l3, addrs := 20, 12
	if v6 {
		l3, addrs = ipv6HeaderLen, 8 // RFC 8200 §8.1 pseudo-header
	}
	for i := 14 + l3 + hdr; i < len(f); i++ {
		f[i] = byte(rng.Uint32())
	}
	setPartial(f[14:], proto, addrs, l3)
	return f
}

// setPartial stores the folded pseudo-header sum (proto, the L4 length,
// the addresses at ip[addrs:hdr]) in the checksum field of the TCP or UDP
// header at ip[hdr:], as Linux leaves it for the device.
func setPartial(ip []byte, proto byte, addrs, hdr int) {
	l4 := ip[hdr:]
	n, field := len(l4), 16
	if proto == 17 {
		n, field = int(binary.BigEndian.Uint16(l4[4:])), 6
	}
	s := uint32(proto) + uint32(n)
	for i := addrs; i < hdr; i += 2 {
		s += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	binary.BigEndian.PutUint16(l4[field:], uint16(s))
}

// Every seed: the fast path forwards what the engine forwards the same
// way, or leaves it to the engine; and it does forward the plain cases.
func TestFastPathMatchesEngine(t *testing.T) {
	r := newFPRig(t, 0)
	forwarded, forwarded6, bytes := 0, 0, 0
	for _, f := range fpSeeds() {
		if r.check(t, f) {
			forwarded++
			bytes += len(f)
			if binary.BigEndian.Uint16(f[12:]) == 0x86dd {
				forwarded6++
			}
		}
	}
	if forwarded < 20 || forwarded6 < 8 {
		t.Fatalf("fast path forwarded only %d seeds, %d of them IPv6", forwarded, forwarded6)
	}
	st, err := r.s.FastStats()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []FastStat{FastForwarded, FastPuntTTL, FastPuntChecksum, FastPuntLength, FastPuntFragment,
		FastPuntSYN, FastPuntL4, FastPuntNoRoute, FastPuntNextHop, FastPuntMTU, FastPuntPartial, FastCsumFinished, FastPuntMartian} {
		if s == FastPuntSYN {
			continue // only with MSS clamping (TestFastPathPuntsSYNWhenClamping)
		}
		if st[s] == 0 {
			t.Errorf("counter %s never moved: %v", s, st)
		}
	}
	if st[FastForwarded] != uint64(forwarded) || st[FastBytes] != uint64(bytes) {
		t.Errorf("counted %d forwarded, %d bytes; saw %d, %d bytes", st[FastForwarded], st[FastBytes], forwarded, bytes)
	}
}

// Every martian class of both families, with a route: the fast path
// punts it (counted as punt_martian) and the engine drops it as a martian;
// the addresses next to the classes are forwarded by both alike.
func TestFastPathMartians(t *testing.T) {
	r := newFPRig(t, 0)
	for _, m := range fpMartians {
		for _, proto := range []uint8{17, 6} {
			f := addressed(m[0], m[1], proto)
			ro := &ebpf.RunOptions{Data: f, DataOut: make([]byte, len(f)+256)}
			v, err := r.prog.Run(ro)
			if err != nil {
				t.Fatal(err)
			}
			if v != xdpTX {
				t.Errorf("%s -> %s (proto %d): verdict %d, want the engine's (%d)", m[0], m[1], proto, v, xdpTX)
			}
			out := r.engine(f)
			for p := range out {
				if len(out[p]) != 0 {
					t.Errorf("%s -> %s: the engine forwarded it out of port %d", m[0], m[1], p)
				}
			}
		}
	}
	st, err := r.s.FastStats()
	must(t, err)
	want := uint64(2 * len(fpMartians))
	if st[FastPuntMartian] != want {
		t.Errorf("punt_martian %d, want %d", st[FastPuntMartian], want)
	}
	if got := r.e.Stats().Drops[fwd.DropMartian]; got != want {
		t.Errorf("engine martian drops %d, want %d", got, want)
	}
	forwarded := 0
	for _, m := range fpNotMartians {
		for _, proto := range []uint8{17, 6} {
			if r.check(t, addressed(m[0], m[1], proto)) {
				forwarded++
			}
		}
	}
	if st2, _ := r.s.FastStats(); st2[FastPuntMartian] != want {
		t.Errorf("punt_martian moved to %d for addresses that are not martians", st2[FastPuntMartian])
	}
	if got := r.e.Stats().Drops[fwd.DropMartian]; got != want {
		t.Errorf("engine martian drops %d after the non-martians, want %d", got, want)
	}
	// All but the last (to our address: the engine's) are forwarded.
	if want := 2 * (len(fpNotMartians) - 1); forwarded != want {
		t.Errorf("%d of the non-martian frames forwarded, want %d", forwarded, want)
	}
}

// The own addresses follow the engine's: an address added to a port makes
// its source a martian in the fast path at the next Apply, a removed one
// stops being one (both as the engine judges them).
func TestFastPathOwnAddressesFollow(t *testing.T) {
	r := newFPRig(t, 0)
	added, removed := "198.18.5.77", "198.18.3.1"
	if !r.check(t, addressed(added, "198.18.64.1", 17)) {
		t.Fatalf("%s -> 198.18.64.1 not forwarded before it is ours", added)
	}
	if r.check(t, addressed(removed, "198.18.64.1", 17)) {
		t.Fatalf("%s, ours, forwarded as a source", removed)
	}
	must(t, r.e.AddAddress(3, netip.MustParsePrefix(added+"/24")))
	must(t, r.e.RemoveAddress(2, netip.MustParsePrefix(removed+"/24")))
	must(t, r.fs.Apply(r.e.FastView()))
	before, _ := r.s.FastStats()
	if r.check(t, addressed(added, "198.18.64.1", 17)) {
		t.Fatalf("%s, now ours, forwarded as a source", added)
	}
	if !r.check(t, addressed(removed, "198.18.64.1", 17)) {
		t.Fatalf("%s, no longer ours, not forwarded", removed)
	}
	after, _ := r.s.FastStats()
	if after[FastPuntMartian]-before[FastPuntMartian] != 1 {
		t.Fatalf("punt_martian moved by %d, want 1", after[FastPuntMartian]-before[FastPuntMartian])
	}
	var last [256]byte
	must(t, r.fs.fp.own.Lookup(uint32(0), &last))
	var one uint32
	if last[77] != 1 || r.fs.fp.own4.Lookup(netip.MustParseAddr(added).AsSlice(), &one) != nil ||
		r.fs.fp.own4.Lookup(netip.MustParseAddr(removed).AsSlice(), &one) == nil {
		t.Fatalf("own addresses not as the engine's: last byte 77 %d, own4 %v", last[77], r.fs.own)
	}
}

// l4Sum is the one's-complement sum, folded to [1, 0xffff], of the TCP or
// UDP segment (length from the UDP header, or all that follows the IP
// header) of the IPv4 or IPv6 datagram ip with its pseudo-header: 0xffff
// when the checksum verifies (RFC 1071). It also returns the segment.
func l4Sum(ip []byte) (uint16, []byte) {
	l3, addrs, proto := 20, ip[12:20], ip[9]
	if ip[0]>>4 == 6 {
		l3, addrs, proto = ipv6HeaderLen, ip[8:40], ip[6]
	}
	seg := ip[l3:]
	if proto == 17 {
		seg = seg[:binary.BigEndian.Uint16(seg[4:])]
	}
	s := uint64(proto) + uint64(len(seg))
	for _, b := range [][]byte{addrs, seg} {
		for i := 0; i < len(b); i += 2 {
			w := uint64(b[i]) << 8
			if i+1 < len(b) {
				w |= uint64(b[i+1])
			}
			s += w
		}
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s), seg
}

// Unfinished TCP and UDP checksums (CHECKSUM_PARTIAL from a host with
// offloads) over segments of random lengths, odd ones and those around
// maxFinishLen among them, both families: the fast path finishes them as
// the engine does, byte for byte, and what leaves verifies; it leaves
// longer segments to the engine (punt_csum_partial), and a checksum that
// verifies already (one that equals the pseudo-header sum) alone. A UDP
// checksum that comes out 0 leaves as 0xffff (RFC 768), a TCP one as 0.
func TestFastPathFinishesPartialChecksums(t *testing.T) {
	r := newFPRig(t, 0)
	rng := rand.New(rand.NewPCG(21, 22))
	var finished, long, zeroUDP, zeroTCP, odd, verified, shortUDP int
	for i := 0; i < 3000; i++ {
		v6, proto := rng.IntN(2) == 0, []uint8{6, 17}[rng.IntN(2)]
		l3, addrs, dst := 20, 12, "198.18.224.9"
		if v6 {
			l3, addrs, dst = ipv6HeaderLen, 8, "2001:db8:c0::9"
		}
		var n int
		switch rng.IntN(4) {
		case 0:
			n = maxFinishLen - 40 + rng.IntN(81)
		case 1:
			n = 22 + rng.IntN(80)
		default:
			n = 22 + rng.IntN(fpMTUs[3]-l3-21)
		}
		n = min(n, fpMTUs[3]-l3) // within the egress MTU: a longer datagram is the engine's
		f := partialFrame(rng, v6, dst, proto, n)
		ip, hdr, field := f[14:], 20, 16
		if proto == 17 {
			hdr, field = 8, 6
		}
		seg := ip[l3:]
		kind := rng.IntN(8)
		switch {
		case kind == 0 && proto == 17 && n > 16:
			// A UDP length short of the IP payload: the rest is not summed.
			binary.BigEndian.PutUint16(seg[4:], uint16(n-1-rng.IntN(8)))
			setPartial(ip, proto, addrs, l3)
		case kind == 1, kind == 2:
			// A word of payload chosen so that the finished checksum is 0
			// (kind 1), or so that the segment verifies as it is (kind 2).
			if kind == 1 {
				binary.BigEndian.PutUint16(seg[field:], 0)
			}
			binary.BigEndian.PutUint16(seg[hdr:], 0)
			s, _ := l4Sum(ip)
			binary.BigEndian.PutUint16(seg[hdr:], 0xffff-s)
			if kind == 1 {
				setPartial(ip, proto, addrs, l3)
			}
		}
		segLen := n
		if proto == 17 {
			segLen = int(binary.BigEndian.Uint16(seg[4:]))
		}
		before := append([]byte(nil), f...)
		fw := r.check(t, f)
		if fw != (segLen <= maxFinishLen) {
			t.Fatalf("segment of %d bytes (v6 %v, proto %d): forwarded %v", segLen, v6, proto, fw)
		}
		if !fw {
			long++
			continue
		}
		out := r.out[14:]
		if s, _ := l4Sum(out); s != 0xffff {
			t.Fatalf("forwarded segment of %d bytes (v6 %v, proto %d) does not verify: sum %#04x\nin  % x\nout % x", segLen, v6, proto, s, before, r.out)
		}
		c := binary.BigEndian.Uint16(out[l3+field:])
		if kind == 2 {
			verified++
			if !bytes.Equal(out[l3:], before[14+l3:]) {
				t.Fatalf("a segment that verified was changed")
			}
			continue
		}
		finished++
		if segLen%2 == 1 {
			odd++
		}
		if segLen < n {
			shortUDP++
		}
		if kind == 1 {
			want := uint16(0)
			if proto == 17 {
				want, zeroUDP = 0xffff, zeroUDP+1
			} else {
				zeroTCP++
			}
			if c != want {
				t.Fatalf("checksum that finishes to 0 (proto %d) left as %#04x", proto, c)
			}
		}
	}
	t.Logf("finished %d (odd length %d, UDP shorter than its datagram %d, to 0: UDP %d TCP %d), verified already %d, longer than %d: %d",
		finished, odd, shortUDP, zeroUDP, zeroTCP, verified, maxFinishLen, long)
	if finished < 1000 || odd < 200 || long < 50 || zeroUDP < 50 || zeroTCP < 50 || verified < 100 || shortUDP < 20 {
		t.Fatal("too few cases of some kind for the test to mean anything")
	}
	st, err := r.s.FastStats()
	must(t, err)
	if st[FastCsumFinished] != uint64(finished) || st[FastPuntPartial] != uint64(long) {
		t.Fatalf("csum_finished %d, punt_csum_partial %d; want %d, %d", st[FastCsumFinished], st[FastPuntPartial], finished, long)
	}
}

// With MSS clamping on, SYNs go to the engine (which clamps them).
func TestFastPathPuntsSYNWhenClamping(t *testing.T) {
	r := newFPRig(t, 1300)
	f := fpFrame(netip.MustParseAddr("198.18.64.1"), 6, 64, 0)
	f[14+20+13] = 0x02
	if r.check(t, f) {
		t.Fatal("SYN forwarded by the fast path while clamping")
	}
	if !r.check(t, fpFrame(netip.MustParseAddr("198.18.64.1"), 6, 64, 0)) {
		t.Fatal("a plain TCP segment was not forwarded")
	}
	if st, _ := r.s.FastStats(); st[FastPuntSYN] != 1 {
		t.Fatalf("punt_syn = %d", st[FastPuntSYN])
	}
}

// Random mutations of the seeds: a byte flipped, the length cut or grown,
// the TTL or IHL changed; the differential property must hold for all.
func TestFastPathRandomFrames(t *testing.T) {
	r := newFPRig(t, 0)
	rng := rand.New(rand.NewPCG(11, 12))
	seeds := fpSeeds()
	fw := 0
	for i := 0; i < 5000; i++ {
		f := append([]byte(nil), seeds[rng.IntN(len(seeds))]...)
		switch rng.IntN(5) {
		case 0:
			f[rng.IntN(len(f))] ^= byte(1 + rng.IntN(255))
		case 1:
			f = f[:14+rng.IntN(len(f)-13)]
		case 2:
			f = append(f, make([]byte, rng.IntN(8))...)
		case 3:
			f[14+8] = byte(rng.IntN(4))
			fixIPSum(f[14:])
		case 4:
			i := 14 + rng.IntN(20)
			f[i] = byte(rng.Uint32())
			if rng.IntN(2) == 0 && f[14]&0xf >= 5 && len(f) >= 14+int(f[14]&0xf)*4 {
				fixIPSum(f[14:])
			}
		}
		if r.check(t, f) {
			fw++
		}
	}
	if fw < 500 {
		t.Fatalf("only %d of 5000 mutated frames forwarded: the test would not see a divergence", fw)
	}
}

func FuzzFastPath(f *testing.F) {
	for _, s := range fpSeeds() {
		f.Add(s)
	}
	r := newFPRig(f, 0)
	f.Fuzz(func(t *testing.T, frame []byte) { r.check(t, frame) })
}

// BenchmarkFastPathProgram times the real steering program (not the
// verdict-only test shape) in the kernel over a routed UDP frame that it
// forwards, and one it punts: BPF_PROG_TEST_RUN's own per-run time, the
// program and its helpers without the driver around it. The redirect
// target is not in the devmap, so bpf_redirect_map takes its fallback.
// One run per call: repeated runs would see the frame as the last run
// left it (its TTL one lower each time, its checksum finished).
func BenchmarkFastPathProgram(b *testing.B) {
	r := newFPRig(b, 0)
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"udp4", fpFrame(netip.MustParseAddr("198.18.64.5"), 17, 64, 18)},
		{"tcp4", fpFrame(netip.MustParseAddr("198.18.64.5"), 6, 64, 6)},
		{"udp6", fpFrame6(netip.MustParseAddr("2001:db8:40::5"), 17, 64, 18)},
		// A full-sized TCP segment, its checksum finished and unfinished.
		{"tcp4_1480", fpFrame(netip.MustParseAddr("198.18.64.5"), 6, 64, 1460)},
		{"tcp4_1480_partial", partialFrame(rand.New(rand.NewPCG(1, 2)), false, "198.18.64.5", 6, 1480)},
		{"tcp6_1460_partial", partialFrame(rand.New(rand.NewPCG(1, 2)), true, "2001:db8:40::5", 6, 1460)},
		{"punt_noroute4", fpFrame(netip.MustParseAddr("198.19.0.5"), 17, 64, 18)},
	} {
		b.Run(c.name, func(b *testing.B) {
			var sum time.Duration
			for range b.N {
				_, d, err := r.s.prog.Benchmark(c.frame, 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				sum += d
			}
			b.ReportMetric(float64(sum.Nanoseconds())/float64(b.N), "kernel-ns/run")
		})
	}
}
