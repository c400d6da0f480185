package fwd

import "encoding/binary"

// Martians: addresses a router never forwards, whatever its routes say.
// A received frame (routeFrame) and a packet out of the tunnel
// (afterTunnel) are checked before their route lookup; the appliance's
// own packets, handoffs and NAT's hairpin (whose source is the outside
// address) are not. Dropped as DropMartian ("martian"). The classes:
//
// IPv4 (RFC 1812 §5.3.7, §4.2.2.11; RFC 1122 §3.2.1.3):
//   - destination 0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/4, 255.255.255.255;
//   - source 0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/4, 255.255.255.255, or one
//     of the appliance's own IPv4 addresses (AddAddress).
//
// IPv6 (RFC 4291 §2.5.2, §2.5.3, §2.5.6, §2.7):
//   - destination ::, ::1 or ff00::/8;
//   - source ::, ::1 or ff00::/8;
//   - fe80::/10 at either end unless the destination is one of the
//     appliance's own addresses (link-local traffic is for the link; a
//     packet to us from a neighbour's link-local address is not routed).
//
// Frames to a link-layer broadcast or multicast address (DHCP's 0.0.0.0
// to 255.255.255.255, ND, MLD) never get here: routeFrame punts them
// first. The per-packet test is a few table loads over the addresses'
// first bytes (and the IPv4 source's last byte, for our own addresses);
// only a candidate takes the exact test.

// martianTables are the candidate tests' tables, in tables (one base
// register with the rest). first4 and first6 mark candidate first bytes:
// IPv4 0, 127, 224–239 (a martian at either end), 255 (a martian only as
// 255.255.255.255); IPv6 0x00 (::, ::1), 0xfe (fe80::/10), 0xff
// (multicast). ownLast4 marks the last bytes of the IPv4 addresses on any
// port: the cheap test for "the source is one of ours". demuxLast4 marks
// the same bytes as candDemux while a tunnel is set: the destination may
// be one of ours, where the tunnel's datagrams go (demux.go), and the
// same candidate test finds both.
type martianTables struct {
	first4, first6, ownLast4, demuxLast4 [256]uint8

	// own4: the first maxDemux4 IPv4 addresses of the ports, as
	// binary.LittleEndian loads them from a header; n4 of them are set.
	own4 [maxDemux4]uint32
	n4   int
}

// Candidate classes of an IPv4 header (route4Candidate).
const (
	candMartian = 1 << iota // may be a martian: martian4 decides
	candDemux               // may be a datagram for the tunnel: demux4 decides
)

func newMartianTables(ports []portConf, tunnel bool) (m martianTables) {
	m.first4[0], m.first4[127], m.first4[255] = candMartian, candMartian, candMartian
	for i := 224; i < 240; i++ {
		m.first4[i] = candMartian
	}
	m.first6[0x00], m.first6[0xfe], m.first6[0xff] = 1, 1, 1
	for i := range ports {
		for _, p := range ports[i].v4 {
			a := p.Addr().As4()
			m.ownLast4[a[3]] = candMartian
			if m.n4 < maxDemux4 {
				m.own4[m.n4] = binary.LittleEndian.Uint32(a[:])
				m.n4++
				if tunnel {
					m.demuxLast4[a[3]] = candDemux
				}
			}
		}
	}
	return m
}

// route4Candidate is the per-packet test of a received IPv4 header: 0 for
// every packet that is surely neither a martian nor the tunnel's, else
// the classes it may be. Small enough to inline.
func route4Candidate(t *tables, h *[ipv4MinHdrLen]byte) uint8 {
	return t.mart.first4[h[12]] | t.mart.first4[h[16]] | t.mart.ownLast4[h[15]] | t.mart.demuxLast4[h[19]]
}

// martian4Candidate is route4Candidate's martian class alone.
func martian4Candidate(t *tables, h *[ipv4MinHdrLen]byte) bool {
	return t.mart.first4[h[12]]|t.mart.first4[h[16]]|t.mart.ownLast4[h[15]] != 0
}

// martian6Candidate is martian4Candidate for IPv6 (h: the fixed header).
func martian6Candidate(t *tables, h *[ipv6HdrLen]byte) bool {
	return t.mart.first6[h[8]]|t.mart.first6[h[24]] != 0
}

// martian4 is the exact test for a candidate IPv4 header.
func martian4(t *tables, h *[ipv4MinHdrLen]byte) bool {
	src, dst := binary.BigEndian.Uint32(h[12:]), binary.BigEndian.Uint32(h[16:])
	never := func(a uint32) bool {
		o := a >> 24
		return o == 0 || o == 127 || o&0xf0 == 0xe0 || a == 0xffffffff
	}
	if never(src) || never(dst) {
		return true
	}
	ai, ok := t.v4.Lookup([4]byte(h[12:16]))
	return ok && t.adj[ai].kind == adjLocal
}

// martian6 is the exact test for a candidate IPv6 header.
func martian6(t *tables, h *[ipv6HdrLen]byte) bool {
	src, dst := h[8:24], h[24:40]
	loop := func(a []byte) bool { // ::1
		return binary.BigEndian.Uint64(a) == 0 && binary.BigEndian.Uint64(a[8:]) == 1
	}
	unspec := func(a []byte) bool { // ::
		return binary.BigEndian.Uint64(a) == 0 && binary.BigEndian.Uint64(a[8:]) == 0
	}
	if dst[0] == 0xff || src[0] == 0xff || loop(src) || loop(dst) || unspec(src) || unspec(dst) {
		return true
	}
	linkLocal := func(a []byte) bool { return a[0] == 0xfe && a[1]&0xc0 == 0x80 }
	if !linkLocal(src) && !linkLocal(dst) {
		return false
	}
	ai, ok := t.v6.Lookup([16]byte(dst))
	return !ok || t.adj[ai].kind != adjLocal
}

// martian reports whether parsed packet p is a martian: the tunnel's
// packets' check (routeFrame has the two tests in line).
func martian(t *tables, p *Packet) bool {
	if p.Flags&FlagIPv4 != 0 {
		h := ip4Hdr(p)
		return martian4Candidate(t, h) && martian4(t, h)
	}
	h := ip6Hdr(p)
	return martian6Candidate(t, h) && martian6(t, h)
}
