package daemon_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"golang.org/x/sys/unix"
)

// A hostile LAN for the neighbour tests. Topology (tag "hst"):
//
//	A a0 198.18.64.1 ── p0 198.18.64.254, 2001:db8:64::fe [ovfwd] p1 198.18.65.254, 2001:db8:65::fe ── l0 ┐
//	                                                                                   LAN: bridge br0 in B's namespace
//	B br0 198.18.65.1, 2001:db8:65::1; X (the attacker) x0 198.18.65.66; hosts added later ──────────────┘
type hostileLAN struct {
	a, app, b, x *netns.NS
	xMAC         net.HardwareAddr
	appMAC       net.HardwareAddr // p1
	bMAC         net.HardwareAddr
	nhosts       int
}

func newHostileLAN(t *testing.T, tag string) *hostileLAN {
	h := &hostileLAN{a: nstest.New(t, tag), app: nstest.New(t, tag), b: nstest.New(t, tag), x: nstest.New(t, tag)}
	nstest.Link(t, h.a, "a0", h.app, "p0")
	nstest.Link(t, h.app, "p1", h.b, "l0")
	nstest.Link(t, h.x, "x0", h.b, "lx")
	// A fixed MAC: a bridge otherwise takes its lowest port MAC, and B's
	// address would move whenever a host joins.
	nstest.Run(t, h.b, "ip", "link", "add", "br0", "address", "02:00:00:00:65:01", "type", "bridge")
	for _, ifn := range []string{"l0", "lx"} {
		nstest.Run(t, h.b, "ip", "link", "set", ifn, "master", "br0")
	}
	nstest.Run(t, h.b, "ip", "link", "set", "br0", "up")
	nstest.Run(t, h.a, "ip", "addr", "add", "198.18.64.1/24", "dev", "a0")
	nstest.Run(t, h.a, "ip", "addr", "add", "2001:db8:64::1/64", "dev", "a0", "nodad")
	nstest.Run(t, h.b, "ip", "addr", "add", "198.18.65.1/24", "dev", "br0")
	nstest.Run(t, h.b, "ip", "addr", "add", "2001:db8:65::1/64", "dev", "br0", "nodad")
	nstest.Run(t, h.b, "ip", "route", "add", "default", "via", "198.18.65.254")
	nstest.Run(t, h.b, "ip", "-6", "route", "add", "default", "via", "2001:db8:65::fe")
	nstest.Run(t, h.x, "ip", "addr", "add", "198.18.65.66/24", "dev", "x0")
	h.xMAC = ifMAC(t, h.x, "x0")
	h.appMAC = ifMAC(t, h.app, "p1")
	h.bMAC = ifMAC(t, h.b, "br0")
	return h
}

// addHost attaches a new host to the LAN with addresses v4 and v6.
func (h *hostileLAN) addHost(t *testing.T, v4, v6 string) *netns.NS {
	h.nhosts++
	n := nstest.New(t, "hsn")
	port := fmt.Sprintf("ln%d", h.nhosts)
	nstest.Link(t, n, "n0", h.b, port)
	nstest.Run(t, h.b, "ip", "link", "set", port, "master", "br0")
	nstest.Run(t, n, "ip", "addr", "add", v4+"/24", "dev", "n0")
	nstest.Run(t, n, "ip", "addr", "add", v6+"/64", "dev", "n0", "nodad")
	nstest.Run(t, n, "ip", "route", "add", "default", "via", "198.18.65.254")
	nstest.Run(t, n, "ip", "-6", "route", "add", "default", "via", "2001:db8:65::fe")
	return n
}

func ifMAC(t *testing.T, ns *netns.NS, ifn string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	if err := ns.Do(func() error {
		i, err := net.InterfaceByName(ifn)
		if err == nil {
			mac = i.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return mac
}

// raw is an AF_PACKET socket on one interface of a namespace.
type raw struct {
	fd int
	sa unix.SockaddrLinklayer
}

func openRaw(t *testing.T, ns *netns.NS, ifn string) *raw {
	t.Helper()
	r := &raw{}
	if err := ns.Do(func() error {
		i, err := net.InterfaceByName(ifn)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		r.fd, r.sa = fd, unix.SockaddrLinklayer{Ifindex: i.Index, Halen: 6}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(r.fd) })
	return r
}

// send writes one frame; a full queue (ENOBUFS) drops it, as a flood would.
func (r *raw) send(f []byte) { _ = unix.Sendto(r.fd, f, 0, &r.sa) }

var bcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func rndMAC(rng *rand.Rand) net.HardwareAddr {
	m := make(net.HardwareAddr, 6)
	v := rng.Uint64()
	for i := range m {
		m[i] = byte(v >> (8 * i))
	}
	m[0] = m[0]&^1 | 2 // unicast, locally administered
	return m
}

func ethFrame(dst, src net.HardwareAddr, etype uint16, payload []byte) []byte {
	f := append(append(append([]byte{}, dst...), src...), byte(etype>>8), byte(etype))
	f = append(f, payload...)
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

// garp is a gratuitous ARP (op 1 request or 2 reply) claiming ip at mac.
func garp(op uint16, mac net.HardwareAddr, ip netip.Addr) []byte {
	a := ip.As4()
	p := []byte{0, 1, 8, 0, 6, 4, byte(op >> 8), byte(op)}
	p = append(append(p, mac...), a[:]...)
	p = append(append(p, bcastMAC...), a[:]...)
	return ethFrame(bcastMAC, mac, 0x0806, p)
}

func csum16(b []byte, sum uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// ip6Frame wraps an upper-layer payload (proto 58 ICMPv6 or 17 UDP, its
// checksum field at csumOff) in IPv6 and Ethernet, filling the checksum.
func ip6Frame(dst, src net.HardwareAddr, s, d netip.Addr, proto byte, hop byte, l4 []byte, csumOff int) []byte {
	ip := make([]byte, 40)
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
	ip[6], ip[7] = proto, hop
	sa, da := s.As16(), d.As16()
	copy(ip[8:], sa[:])
	copy(ip[24:], da[:])
	var ps uint32
	for i := 8; i < 40; i += 2 {
		ps += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	ps += uint32(len(l4)) + uint32(proto)
	binary.BigEndian.PutUint16(l4[csumOff:], 0)
	binary.BigEndian.PutUint16(l4[csumOff:], csum16(l4, ps))
	return ethFrame(dst, src, 0x86dd, append(ip, l4...))
}

// na is an unsolicited neighbour advertisement (override set) for target
// at mac, to all nodes.
func na(mac net.HardwareAddr, target netip.Addr) []byte {
	l4 := make([]byte, 24, 32)
	l4[0], l4[4] = 136, 0x20
	tg := target.As16()
	copy(l4[8:], tg[:])
	l4 = append(append(l4, 2, 1), mac...)
	return ip6Frame(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, mac, target, netip.MustParseAddr("ff02::1"), 58, 255, l4, 2)
}

// ns6 is a neighbour solicitation from src at mac for target, unicast to dstMAC.
func ns6(dstMAC, mac net.HardwareAddr, src, target netip.Addr) []byte {
	l4 := make([]byte, 24, 32)
	l4[0] = 135
	tg := target.As16()
	copy(l4[8:], tg[:])
	l4 = append(append(l4, 1, 1), mac...)
	return ip6Frame(dstMAC, mac, src, target, 58, 255, l4, 2)
}

// udp6 is a small UDP datagram from s to d through the router at dstMAC.
func udp6(dstMAC, mac net.HardwareAddr, s, d netip.Addr, sport, dport uint16, payload []byte) []byte {
	l4 := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	binary.BigEndian.PutUint16(l4[4:], uint16(8+len(payload)))
	return ip6Frame(dstMAC, mac, s, d, 17, 64, append(l4, payload...), 6)
}

// udp4 is a small UDP datagram from s to d through the router at dstMAC
// (no UDP checksum: 0 is allowed in IPv4).
func udp4(dstMAC, mac net.HardwareAddr, s, d netip.Addr, sport, dport uint16, payload []byte) []byte {
	ip := make([]byte, 20, 28+len(payload))
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(28+len(payload)))
	sa, da := s.As4(), d.As4()
	copy(ip[12:], sa[:])
	copy(ip[16:], da[:])
	binary.BigEndian.PutUint16(ip[10:], csum16(ip, 0))
	l4 := make([]byte, 8)
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	binary.BigEndian.PutUint16(l4[4:], uint16(8+len(payload)))
	return ethFrame(dstMAC, mac, 0x0800, append(append(ip, l4...), payload...))
}

// randIn is a random address in p's host part.
func randIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	a := p.Addr().AsSlice()
	for i := p.Bits() / 8; i < len(a); i++ {
		b := byte(rng.Uint32())
		if i == p.Bits()/8 && p.Bits()%8 != 0 {
			m := byte(0xff >> (p.Bits() % 8))
			b = a[i]&^m | b&m
		}
		a[i] = b
	}
	if len(a) == 4 && (a[3] == 0 || a[3] == 255) {
		a[3] = 7
	}
	r, _ := netip.AddrFromSlice(a)
	return r
}

// kernelPermanent lists the app namespace's permanent neighbours on p1
// that are not ovfwd's own mirror writes (extern_learn): operator pins,
// or what an old ovfwd took for them.
func kernelPermanent(t *testing.T, app *netns.NS) (pins, mirrored int) {
	out := nstest.Run(t, app, "ip", "neigh", "show", "nud", "permanent")
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "":
		case strings.Contains(l, "extern_learn"):
			mirrored++
		default:
			pins++
		}
	}
	return pins, mirrored
}

// rssKB is VmRSS of pid in KiB.
func rssKB(t *testing.T, pid int) int {
	var kb int
	fmt.Sscanf(procStatus(t, pid)["VmRSS"], "%d", &kb)
	return kb
}
