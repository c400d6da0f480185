package fwd_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/porttest"
)

// Test addresses: only 198.18.0.0/15 and 2001:db8::/32.
var (
	macR0 = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	macR1 = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
	macR2 = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x03}
	macA  = net.HardwareAddr{0x02, 0xaa, 0, 0, 0, 0x0a}
	macB  = net.HardwareAddr{0x02, 0xbb, 0, 0, 0, 0x0b}
	macC  = net.HardwareAddr{0x02, 0xcc, 0, 0, 0, 0x0c}
	bcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

	r0v4 = netip.MustParsePrefix("198.18.0.1/24")
	r1v4 = netip.MustParsePrefix("198.18.1.1/24")
	r0v6 = netip.MustParsePrefix("2001:db8::1/64")
	r1v6 = netip.MustParsePrefix("2001:db8:1::1/64")
	aV4  = netip.MustParseAddr("198.18.0.10")
	bV4  = netip.MustParseAddr("198.18.1.20")
	aV6  = netip.MustParseAddr("2001:db8::10")
	bV6  = netip.MustParseAddr("2001:db8:1::20")
)

type rig struct {
	t     testing.TB
	e     *fwd.Engine
	ports []*porttest.Port
	pools []*porttest.Pool
	w     *fwd.Worker
	now   int64
}

type rigOpt struct {
	mode      fwd.Mode
	nports    int
	separate  bool // one pool per port (forces copies)
	mtu       []int
	cfg       fwd.Config
	noAddrs   bool
	poolBufs  int
	batchSize int
}

func newRig(t testing.TB, o rigOpt) *rig {
	t.Helper()
	if o.nports == 0 {
		o.nports = 2
	}
	if o.poolBufs == 0 {
		o.poolBufs = 512
	}
	r := &rig{t: t, now: int64(time.Hour)}
	macs := []net.HardwareAddr{macR0, macR1, macR2}
	var ports []fwd.Port
	for i := range o.nports {
		if i == 0 || o.separate {
			r.pools = append(r.pools, porttest.NewPool(uint16(len(r.pools)+1), o.poolBufs, 0))
		}
		mtu := 1500
		if i < len(o.mtu) {
			mtu = o.mtu[i]
		}
		p := porttest.New("p"+string(rune('0'+i)), macs[i], mtu, 1, r.pools[len(r.pools)-1])
		r.ports = append(r.ports, p)
		ports = append(ports, p)
	}
	cfg := o.cfg
	cfg.Mode = o.mode
	cfg.Now = func() int64 { return r.now }
	e, err := fwd.New(cfg, ports)
	if err != nil {
		t.Fatal(err)
	}
	r.e, r.w = e, e.Workers()[0]
	if o.mode == fwd.ModeRouter && !o.noAddrs {
		for i, p := range []netip.Prefix{r0v4, r1v4} {
			must(t, e.AddAddress(i, p))
		}
		for i, p := range []netip.Prefix{r0v6, r1v6} {
			must(t, e.AddAddress(i, p))
		}
	}
	return r
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (r *rig) inject(port int, frame []byte) {
	r.t.Helper()
	if !r.ports[port].Inject(0, frame) {
		r.t.Fatal("inject: pool empty")
	}
}

func (r *rig) poll() { r.w.Poll() }

func (r *rig) drain(port int) [][]byte { return r.ports[port].Drain(0) }

// drainOne expects exactly one frame on port.
func (r *rig) drainOne(port int) []byte {
	r.t.Helper()
	f := r.drain(port)
	if len(f) != 1 {
		r.t.Fatalf("port %d sent %d frames, want 1", port, len(f))
	}
	return f[0]
}

func (r *rig) expectNone(port int) {
	r.t.Helper()
	if f := r.drain(port); len(f) != 0 {
		r.t.Fatalf("port %d sent %d frames, want none: % x", port, len(f), f[0])
	}
}

func (r *rig) advance(d time.Duration) { r.now += int64(d) }

// checkNoLeak drains every port and checks that every buffer is back.
func (r *rig) checkNoLeak() {
	r.t.Helper()
	for i := range r.ports {
		r.drain(i)
	}
	for _, pl := range r.pools {
		if n := pl.InUse(); n != 0 {
			r.t.Errorf("pool %d: %d buffers leaked", pl.ID(), n)
		}
	}
}

func (r *rig) drops(reason fwd.DropReason) uint64 { return r.e.Stats().Drops[reason] }

// ---- frame building (independent of the package's own code) ----

func csum(b []byte, sum uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func pseudo(src, dst []byte, proto byte, n int) uint32 {
	var s uint32
	for _, b := range [][]byte{src, dst} {
		for i := 0; i < len(b); i += 2 {
			s += uint32(b[i])<<8 | uint32(b[i+1])
		}
	}
	return s + uint32(proto) + uint32(n)
}

func eth(dst, src net.HardwareAddr, etype uint16, payload []byte) []byte {
	f := append(append(append([]byte{}, dst...), src...), byte(etype>>8), byte(etype))
	return append(f, payload...)
}

func ethVLAN(dst, src net.HardwareAddr, vlan, etype uint16, payload []byte) []byte {
	f := append(append(append([]byte{}, dst...), src...), 0x81, 0x00, byte(vlan>>8), byte(vlan), byte(etype>>8), byte(etype))
	return append(f, payload...)
}

func ipv4(src, dst netip.Addr, proto, ttl byte, df bool, l4 []byte) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(l4)))
	binary.BigEndian.PutUint16(h[4:], 0x1234)
	if df {
		h[6] = 0x40
	}
	h[8], h[9] = ttl, proto
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	binary.BigEndian.PutUint16(h[10:], csum(h, 0))
	if off := map[byte]int{6: 16, 17: 6}[proto]; off > 0 && len(l4) >= off+2 {
		l4 = append([]byte{}, l4...)
		l4[off], l4[off+1] = 0, 0
		binary.BigEndian.PutUint16(l4[off:], csum(l4, pseudo(s[:], d[:], proto, len(l4))))
	}
	if proto == 1 {
		l4 = append([]byte{}, l4...)
		l4[2], l4[3] = 0, 0
		binary.BigEndian.PutUint16(l4[2:], csum(l4, 0))
	}
	return append(h, l4...)
}

func ipv6(src, dst netip.Addr, next, hop byte, l4 []byte) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(l4)))
	h[6], h[7] = next, hop
	s, d := src.As16(), dst.As16()
	copy(h[8:], s[:])
	copy(h[24:], d[:])
	off := -1
	switch next {
	case 6:
		off = 16
	case 17:
		off = 6
	case 58:
		off = 2
	}
	if off >= 0 {
		l4 = append([]byte{}, l4...)
		l4[off], l4[off+1] = 0, 0
		binary.BigEndian.PutUint16(l4[off:], csum(l4, pseudo(s[:], d[:], next, len(l4))))
	}
	return append(h, l4...)
}

func udp(sport, dport uint16, payload []byte) []byte {
	u := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(u, sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	return append(u, payload...)
}

// tcpSYN builds a SYN; pad puts that many NOPs before the MSS option (an
// odd count misaligns the MSS value).
func tcpSYN(sport, dport, mss uint16, pad int) []byte {
	opts := make([]byte, 0, 40)
	for range pad {
		opts = append(opts, 1)
	}
	opts = append(opts, 2, 4, byte(mss>>8), byte(mss), 4, 2) // MSS, SACK permitted
	for len(opts)%4 != 0 {
		opts = append(opts, 0)
	}
	t := make([]byte, 20, 20+len(opts))
	binary.BigEndian.PutUint16(t, sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	binary.BigEndian.PutUint32(t[4:], 1000)
	t[12] = byte((20+len(opts))/4) << 4
	t[13] = 0x02
	binary.BigEndian.PutUint16(t[14:], 65535)
	return append(t, opts...)
}

func icmpEcho(typ byte, id, seq uint16, data []byte) []byte {
	b := []byte{typ, 0, 0, 0, byte(id >> 8), byte(id), byte(seq >> 8), byte(seq)}
	return append(b, data...)
}

func arp(op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	b := []byte{0, 1, 8, 0, 6, 4, byte(op >> 8), byte(op)}
	s, t := spa.As4(), tpa.As4()
	b = append(append(b, sha...), s[:]...)
	b = append(append(b, tha...), t[:]...)
	return b
}

// nd builds an NS (135, with source LL option) or NA (136, solicited and
// override, with target LL option).
func nd(typ byte, target netip.Addr, ll net.HardwareAddr) []byte {
	b := make([]byte, 24, 32)
	b[0] = typ
	if typ == 136 {
		b[4] = 0x60
	}
	t := target.As16()
	copy(b[8:], t[:])
	opt := byte(1)
	if typ == 136 {
		opt = 2
	}
	return append(append(b, opt, 1), ll...)
}

func solicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	s := netip.MustParseAddr("ff02::1:ff00:0").As16()
	copy(s[13:], b[13:])
	return netip.AddrFrom16(s)
}

// ---- frame checking ----

type parsed struct {
	dst, src net.HardwareAddr
	vlan     int // -1 untagged
	etype    uint16
	l3       []byte
}

func parseEth(t testing.TB, f []byte) parsed {
	t.Helper()
	if len(f) < 14 {
		t.Fatalf("short frame % x", f)
	}
	p := parsed{dst: f[0:6], src: f[6:12], vlan: -1, etype: binary.BigEndian.Uint16(f[12:]), l3: f[14:]}
	if p.etype == 0x8100 {
		p.vlan = int(binary.BigEndian.Uint16(f[14:]) & 0xfff)
		p.etype = binary.BigEndian.Uint16(f[16:])
		p.l3 = f[18:]
	}
	return p
}

// checkIPv4 verifies the header checksum and the transport checksum and
// returns the header and the payload.
func checkIPv4(t testing.TB, ip []byte) (hdr, l4 []byte) {
	t.Helper()
	ihl := int(ip[0]&15) * 4
	if ip[0]>>4 != 4 || len(ip) < ihl || csum(ip[:ihl], 0) != 0 {
		t.Fatalf("bad IPv4 header % x", ip[:min(len(ip), 20)])
	}
	n := int(binary.BigEndian.Uint16(ip[2:]))
	if n > len(ip) {
		t.Fatalf("IPv4 total length %d > %d", n, len(ip))
	}
	hdr, l4 = ip[:ihl], ip[ihl:n]
	switch ip[9] {
	case 1:
		if csum(l4, 0) != 0 {
			t.Fatalf("bad ICMP checksum")
		}
	case 6, 17:
		if csum(l4, pseudo(ip[12:16], ip[16:20], ip[9], len(l4))) != 0 {
			t.Fatalf("bad L4 checksum (proto %d)", ip[9])
		}
	}
	return hdr, l4
}

func checkIPv6(t testing.TB, ip []byte) (hdr, l4 []byte) {
	t.Helper()
	if len(ip) < 40 || ip[0]>>4 != 6 {
		t.Fatalf("bad IPv6 header")
	}
	n := 40 + int(binary.BigEndian.Uint16(ip[4:]))
	if n > len(ip) {
		t.Fatalf("IPv6 payload length beyond frame")
	}
	hdr, l4 = ip[:40], ip[40:n]
	switch ip[6] {
	case 6, 17, 58:
		if csum(l4, pseudo(ip[8:24], ip[24:40], ip[6], len(l4))) != 0 {
			t.Fatalf("bad L4 checksum (next %d)", ip[6])
		}
	}
	return hdr, l4
}
