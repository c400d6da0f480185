package daemon

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/porttest"
)

// checkOuter: b is an IP packet fwd parses, from → to over UDP with a
// valid checksum, carrying payload.
func checkOuter(t *testing.T, b []byte, from, to netip.AddrPort, payload []byte) {
	t.Helper()
	buf := make([]byte, fwd.Headroom+len(b))
	p := fwd.Packet{Buf: buf, Off: fwd.Headroom, Len: uint16(copy(buf[fwd.Headroom:], b)), Flags: fwd.FlagL3Only}
	if r := fwd.Parse(&p); r != fwd.DropNone || p.Flags&fwd.FlagUDP == 0 {
		t.Fatalf("rebuilt datagram does not parse as UDP: %v, flags %#x", r, p.Flags)
	}
	hl := int(p.L4Off)
	u := b[hl:]
	var src, dst netip.Addr
	if b[0]>>4 == 4 {
		src, dst = netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
	} else {
		src, dst = netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
	}
	if src != from.Addr().Unmap() || dst != to.Addr().Unmap() || binary.BigEndian.Uint16(u) != from.Port() ||
		binary.BigEndian.Uint16(u[2:]) != to.Port() || string(u[8:]) != string(payload) {
		t.Fatalf("rebuilt datagram %v → %v says %v:%d → %v:%d", from, to, src, binary.BigEndian.Uint16(u), dst, binary.BigEndian.Uint16(u[2:]))
	}
	sum := sum16(0, b[hl-2*src.BitLen()/8:hl]) + 17 + uint32(len(u))
	if foldSum(sum16(sum, u)) != 0xffff {
		t.Fatal("UDP checksum does not verify")
	}
}

func TestOuterDatagram(t *testing.T) {
	buf := make([]byte, fwd.MaxUplinkPacket)
	payload := make([]byte, 1524)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for _, c := range []struct{ from, to string }{
		{"198.18.140.1:40000", "198.18.140.254:1194"},
		{"[::ffff:198.18.140.1]:40000", "[::ffff:198.18.140.254]:1194"},
		{"[2001:db8:140::1]:40000", "[2001:db8:140::fe]:1194"},
	} {
		from, to := netip.MustParseAddrPort(c.from), netip.MustParseAddrPort(c.to)
		b, ok := outerDatagram(buf, from, to, payload)
		if !ok {
			t.Fatalf("%s → %s: refused", from, to)
		}
		checkOuter(t, b, from, to, payload)
	}
	if _, ok := outerDatagram(buf, netip.MustParseAddrPort("198.18.140.1:1"), netip.MustParseAddrPort("[2001:db8::1]:2"), payload); ok {
		t.Error("mixed families accepted")
	}
	if _, ok := outerDatagram(buf, netip.MustParseAddrPort("198.18.140.1:1"), netip.MustParseAddrPort("198.18.140.2:2"), make([]byte, len(buf))); ok {
		t.Error("a datagram larger than the inject slot accepted")
	}
}

// FuzzOuterDatagram: any payload and addresses either are refused or give
// a datagram that parses and checksums; nothing panics.
func FuzzOuterDatagram(f *testing.F) {
	f.Add([]byte{9 << 3, 0, 0, 1}, []byte{198, 18, 140, 1}, []byte{198, 18, 140, 254}, uint16(40000), uint16(1194))
	f.Add(make([]byte, 1524), make([]byte, 16), make([]byte, 16), uint16(1), uint16(2))
	f.Add([]byte{}, []byte{1}, []byte{2, 3, 4, 5}, uint16(0), uint16(0))
	buf := make([]byte, fwd.MaxUplinkPacket)
	f.Fuzz(func(t *testing.T, payload, a, b []byte, sp, dp uint16) {
		sa, _ := netip.AddrFromSlice(a)
		da, _ := netip.AddrFromSlice(b)
		from, to := netip.AddrPortFrom(sa, sp), netip.AddrPortFrom(da, dp)
		out, ok := outerDatagram(buf, from, to, payload)
		if ok {
			checkOuter(t, out, from, to, payload)
		}
	})
}

// cmsg builds one control message as the kernel lays it out on a 64-bit
// machine (struct cmsghdr: a size_t length, then level and type).
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	binary.NativeEndian.PutUint64(b, uint64(unix.CmsgLen(len(data))))
	binary.NativeEndian.PutUint32(b[8:], uint32(level))
	binary.NativeEndian.PutUint32(b[12:], uint32(typ))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

func TestPktinfoDst(t *testing.T) {
	in4 := make([]byte, unix.SizeofInet4Pktinfo)
	copy(in4[8:], []byte{198, 18, 140, 254})
	in6 := make([]byte, unix.SizeofInet6Pktinfo)
	a6 := netip.MustParseAddr("2001:db8:140::fe").As16()
	copy(in6, a6[:])
	mapped := make([]byte, unix.SizeofInet6Pktinfo)
	m := netip.MustParseAddr("::ffff:198.18.140.254").As16()
	copy(mapped, m[:])
	for _, c := range []struct {
		oob  []byte
		want string
	}{
		{cmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, in4), "198.18.140.254"},
		{cmsg(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, in6), "2001:db8:140::fe"},
		{cmsg(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, mapped), "198.18.140.254"},
		{append(cmsg(unix.SOL_SOCKET, unix.SO_TIMESTAMP, make([]byte, 16)), cmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, in4)...), "198.18.140.254"},
		{cmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, in4[:8]), ""},
		{nil, ""},
		{[]byte{1, 2, 3}, ""},
	} {
		got, ok := pktinfoDst(c.oob)
		if ok != (c.want != "") || ok && got.String() != c.want {
			t.Errorf("% x: got %v %v, want %q", c.oob, got, ok, c.want)
		}
	}
}

// FuzzPktinfoDst: no control-message bytes make it panic.
func FuzzPktinfoDst(f *testing.F) {
	in4 := make([]byte, unix.SizeofInet4Pktinfo)
	f.Add(cmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, in4))
	f.Add(cmsg(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, make([]byte, unix.SizeofInet6Pktinfo)))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0, 8, 0, 0, 0})
	f.Fuzz(func(t *testing.T, oob []byte) { pktinfoDst(oob) })
}

// The VPN socket hands P_DATA_V2 to the engine, with the destination the
// kernel reported, and returns everything else to the control server.
func TestKernelDataConn(t *testing.T) {
	pool := porttest.NewPool(1, 64, 0)
	e, err := fwd.New(fwd.Config{}, []fwd.Port{porttest.New("p0", net.HardwareAddr{2, 0, 0, 0, 0, 1}, 1500, 1, pool)})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	kc, err := newKernelDataConn(pc.(*net.UDPConn), e)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	cl, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	data := append([]byte{9 << 3, 0, 0, 1}, make([]byte, 1500)...)
	ctrl := []byte{7 << 3, 1, 2, 3}
	for _, m := range [][]byte{data, data, ctrl} {
		if _, err := cl.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	kc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, from, err := kc.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:n]) != string(ctrl) || from.String() != cl.LocalAddr().String() {
		t.Fatalf("ReadFrom returned % x from %v, want the control packet from %v", buf[:n], from, cl.LocalAddr())
	}
	if kc.handed.Load() != 2 || kc.refused.Load() != 0 {
		t.Fatalf("handed %d refused %d, want 2 and 0", kc.handed.Load(), kc.refused.Load())
	}
}
