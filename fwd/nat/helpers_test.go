package nat

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

// Test packets: IPv4 with valid checksums, built from readable parts.

var (
	inA     = netip.MustParseAddr("10.8.0.2")
	inB     = netip.MustParseAddr("10.8.0.3")
	out1    = netip.MustParseAddr("198.18.1.1")
	remote  = netip.MustParseAddr("198.19.0.10")
	remote2 = netip.MustParseAddr("198.19.0.11")
)

func a4(a netip.Addr) uint32 { return binary.BigEndian.Uint32(a.AsSlice()) }

// ipPacket builds an IPv4 datagram of proto with payload l4 (whose
// checksum is filled in when l4csum is set).
func ipPacket(src, dst netip.Addr, proto uint8, l4 []byte) []byte {
	p := make([]byte, 20+len(l4))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	binary.BigEndian.PutUint16(p[4:], 0x1234)
	p[8], p[9] = 64, proto
	copy(p[12:], src.AsSlice())
	copy(p[16:], dst.AsSlice())
	binary.BigEndian.PutUint16(p[10:], csum.Checksum(p[:20]))
	copy(p[20:], l4)
	fillL4(p)
	return p
}

// fillL4 computes the transport checksum of an unfragmented datagram.
func fillL4(p []byte) {
	l := p[20:]
	switch p[9] {
	case protoTCP:
		binary.BigEndian.PutUint16(l[16:], 0)
		binary.BigEndian.PutUint16(l[16:], ^csum.Fold16(pseudo(p)+csum.Sum(0, l)))
	case protoUDP:
		binary.BigEndian.PutUint16(l[6:], 0)
		c := ^csum.Fold16(pseudo(p) + csum.Sum(0, l))
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(l[6:], c)
	case protoICMP:
		binary.BigEndian.PutUint16(l[2:], 0)
		binary.BigEndian.PutUint16(l[2:], csum.Checksum(l))
	}
}

func pseudo(p []byte) uint32 {
	n := len(p) - 20
	return csum.Sum(0, p[12:20]) + uint32(p[9]) + uint32(n)
}

func tcp(sp, dp uint16, flags uint8, payload string) []byte {
	l := make([]byte, 20+len(payload))
	binary.BigEndian.PutUint16(l, sp)
	binary.BigEndian.PutUint16(l[2:], dp)
	l[12] = 5 << 4
	l[13] = flags
	copy(l[20:], payload)
	return l
}

func udp(sp, dp uint16, payload string) []byte {
	l := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(l, sp)
	binary.BigEndian.PutUint16(l[2:], dp)
	binary.BigEndian.PutUint16(l[4:], uint16(len(l)))
	copy(l[8:], payload)
	return l
}

func echo(ty uint8, id, seq uint16) []byte {
	l := make([]byte, 16)
	l[0] = ty
	binary.BigEndian.PutUint16(l[4:], id)
	binary.BigEndian.PutUint16(l[6:], seq)
	copy(l[8:], "pingdata")
	return l
}

// icmpError builds an ICMP error from src to dst quoting the first 28
// bytes (header and 8 bytes) of orig.
func icmpError(src, dst netip.Addr, ty, code uint8, orig []byte) []byte {
	q := orig[:min(len(orig), 28)]
	l := make([]byte, 8+len(q))
	l[0], l[1] = ty, code
	copy(l[8:], q)
	return ipPacket(src, dst, protoICMP, l)
}

// verify checks the IP header checksum and, for an unfragmented datagram,
// the transport checksum.
func verify(t testing.TB, p []byte) {
	t.Helper()
	if c := csum.Checksum(p[:20]); c != 0 {
		t.Fatalf("IP header checksum wrong (%#04x)", c)
	}
	if binary.BigEndian.Uint16(p[6:])&(ipv4FlagMF|ipv4FragMask) != 0 {
		return
	}
	l := p[20:]
	switch p[9] {
	case protoTCP:
		if c := ^csum.Fold16(pseudo(p) + csum.Sum(0, l)); c != 0 {
			t.Fatalf("TCP checksum wrong")
		}
	case protoUDP:
		if binary.BigEndian.Uint16(l[6:]) != 0 {
			if c := ^csum.Fold16(pseudo(p) + csum.Sum(0, l)); c != 0 {
				t.Fatalf("UDP checksum wrong")
			}
		}
	case protoICMP:
		if c := csum.Checksum(l); c != 0 {
			t.Fatalf("ICMP checksum wrong")
		}
	}
}

func src(p []byte) netip.Addr { return netip.AddrFrom4([4]byte(p[12:16])) }
func dst(p []byte) netip.Addr { return netip.AddrFrom4([4]byte(p[16:20])) }
func sport(p []byte) uint16   { return binary.BigEndian.Uint16(p[20:]) }
func dport(p []byte) uint16   { return binary.BigEndian.Uint16(p[22:]) }
func echoID(p []byte) uint16  { return binary.BigEndian.Uint16(p[24:]) }

func testConfig() Config {
	return Config{
		Rules: []Rule{{Name: "vpn", Sources: []netip.Prefix{netip.MustParsePrefix("10.8.0.0/24")}, Port: 1,
			Outside: []netip.Addr{out1}, PortLo: 1024, PortHi: 2047}},
		MaxSessions: 1024, BlockSize: 64, MaxBlocks: 2, Exclude: 1194,
		Timeouts: Timeouts{TCPEstablished: 100 * time.Second, TCPTransitory: 10 * time.Second, UDP: 20 * time.Second, ICMP: 5 * time.Second},
	}
}

// newTestTable returns worker 0 of 1 with c, at time 1000 s.
func newTestTable(t testing.TB, c Config) *Table {
	t.Helper()
	k, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	tb := NewTable(0, 1)
	tb.Refresh(k, 1000e9)
	tb.Publish()
	return tb
}

func mustOut(t testing.TB, tb *Table, p []byte) {
	t.Helper()
	if v, _ := tb.Out(p, 20, 1); v != Done {
		t.Fatalf("Out: %v", v)
	}
	verify(t, p)
}

func mustIn(t testing.TB, tb *Table, p []byte) {
	t.Helper()
	if v, _ := tb.In(p, 20); v != Done {
		t.Fatalf("In: %v", v)
	}
	verify(t, p)
}
