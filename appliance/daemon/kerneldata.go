package daemon

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/vpn"
)

// Data packets that reach the kernel's VPN socket. A stock OpenVPN client
// at its default tun-mtu 1500 sends outer datagrams larger than a
// 1500-byte link, which its kernel fragments. The steering program passes
// every fragment to the kernel (so do the exception TAPs of ports the
// kernel never sees): the kernel reassembles, within its own bounds on
// memory, time and per-source state (net.ipv4.ipfrag_high_thresh,
// ipfrag_time, ipfrag_max_dist; net.ipv6.ip6frag_*), and delivers the
// datagram to the VPN socket. kernelDataConn takes the P_DATA_V2 datagrams
// out of what the control server reads and hands each, with an IP/UDP
// header rebuilt from the addresses the kernel reports, to worker 0
// through the engine's bounded inject ring (fwd.Engine.InjectReceived),
// where it is decrypted like one that arrived whole. A full ring refuses
// and counts.

// receivedInjector hands a reassembled datagram to the data plane:
// fwd.Engine, or runner.Wake, which also wakes worker 0.
type receivedInjector interface{ InjectReceived(ip []byte) error }

// kernelDataConn is the VPN socket as the control server reads it.
type kernelDataConn struct {
	*net.UDPConn
	engine receivedInjector
	port   uint16
	oob    []byte
	pkt    []byte

	handed  atomic.Uint64 // given to the data plane
	refused atomic.Uint64 // inject ring full, too large, or no destination address
}

// newKernelDataConn asks the kernel for each datagram's destination
// address (IP_PKTINFO, IPV6_RECVPKTINFO: a wildcard socket does not know
// it otherwise) and wraps c.
func newKernelDataConn(c *net.UDPConn, e receivedInjector) (*kernelDataConn, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var e4, e6 error
	if cerr := raw.Control(func(fd uintptr) {
		// On a dual-stack socket IPv4 datagrams report IP_PKTINFO, IPv6
		// ones IPV6_PKTINFO (ip(7), ipv6(7)); an IPv4 socket takes only
		// the first.
		e4 = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		e6 = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
	}); cerr != nil {
		return nil, cerr
	}
	if e4 != nil && e6 != nil {
		return nil, errors.Join(e4, e6)
	}
	port := uint16(0)
	if ua, ok := c.LocalAddr().(*net.UDPAddr); ok {
		port = uint16(ua.Port)
	}
	return &kernelDataConn{UDPConn: c, engine: e, port: port,
		oob: make([]byte, 2*unix.CmsgSpace(unix.SizeofInet6Pktinfo)), pkt: make([]byte, fwd.MaxUplinkPacket)}, nil
}

// ReadFrom returns the next datagram that is not P_DATA_V2; those it
// hands to the data plane on the way.
func (c *kernelDataConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, oobn, _, from, err := c.ReadMsgUDPAddrPort(b, c.oob)
		if err != nil {
			return n, nil, err
		}
		if n == 0 || b[0]>>vpn.OpcodeShift != vpn.PDataV2 {
			return n, net.UDPAddrFromAddrPort(from), nil
		}
		dst, ok := pktinfoDst(c.oob[:oobn])
		var ip []byte
		if ok {
			ip, ok = outerDatagram(c.pkt, from, netip.AddrPortFrom(dst, c.port), b[:n])
		}
		if !ok || c.engine.InjectReceived(ip) != nil {
			c.refused.Add(1)
			continue
		}
		c.handed.Add(1)
	}
}

// pktinfoDst is the destination address of a received datagram, from its
// IP_PKTINFO (struct in_pktinfo: ifindex, spec_dst, addr) or IPV6_PKTINFO
// (struct in6_pktinfo: addr, ifindex) control message.
func pktinfoDst(oob []byte) (netip.Addr, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return netip.Addr{}, false
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo:
			return netip.AddrFrom4([4]byte(m.Data[8:12])), true
		case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= unix.SizeofInet6Pktinfo:
			return netip.AddrFrom16([16]byte(m.Data[:16])).Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// outerDatagram writes into buf the IPv4 or IPv6 packet that carried
// payload from → to over UDP, checksums included, and returns it; false
// when the addresses are of different families or it does not fit.
func outerDatagram(buf []byte, from, to netip.AddrPort, payload []byte) ([]byte, bool) {
	src, dst := from.Addr().Unmap(), to.Addr().Unmap()
	if !src.IsValid() || !dst.IsValid() || src.Is4() != dst.Is4() {
		return nil, false
	}
	hl := 40
	if src.Is4() {
		hl = 20
	}
	ulen := 8 + len(payload)
	if hl+ulen > len(buf) || ulen > 0xffff {
		return nil, false
	}
	p := buf[:hl+ulen]
	clear(p[:hl+8])
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		p[0], p[8], p[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(p[2:], uint16(hl+ulen))
		copy(p[12:], s[:])
		copy(p[16:], d[:])
		binary.BigEndian.PutUint16(p[10:], ^foldSum(sum16(0, p[:20])))
	} else {
		s, d := src.As16(), dst.As16()
		p[0], p[6], p[7] = 0x60, 17, 64
		binary.BigEndian.PutUint16(p[4:], uint16(ulen))
		copy(p[8:], s[:])
		copy(p[24:], d[:])
	}
	u := p[hl:]
	binary.BigEndian.PutUint16(u[0:], from.Port())
	binary.BigEndian.PutUint16(u[2:], to.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(ulen))
	copy(u[8:], payload)
	// Pseudo-header (RFC 768, RFC 8200 §8.1): the addresses, protocol and
	// UDP length.
	sum := sum16(0, p[hl-2*src.BitLen()/8:hl]) + 17 + uint32(ulen)
	c := ^foldSum(sum16(sum, u))
	if c == 0 {
		c = 0xffff // RFC 768: a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return p, true
}

// sum16 adds b to a one's-complement sum as big-endian 16-bit words.
func sum16(s uint32, b []byte) uint32 {
	for len(b) >= 2 {
		s += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
		if s > 0xffff {
			s = s&0xffff + s>>16
		}
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func foldSum(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
