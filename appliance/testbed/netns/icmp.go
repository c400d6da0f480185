package netns

import (
	"encoding/binary"
	"net/netip"
)

// Checksum is the ones' complement sum of b (RFC 1071), not inverted: a
// header with a correct checksum sums to 0xffff.
func Checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// ICMPEcho is an IPv4 ICMP echo request from src to dst with 16 bytes of
// zero payload, for sending through a tunnel client.
func ICMPEcho(src, dst netip.Addr, id, seq uint16) []byte {
	p := make([]byte, 28+16)
	p[0], p[8], p[9] = 0x45, 64, 1
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	s4, d4 := src.As4(), dst.As4()
	copy(p[12:], s4[:])
	copy(p[16:], d4[:])
	binary.BigEndian.PutUint16(p[10:], ^Checksum(p[:20]))
	p[20] = 8
	binary.BigEndian.PutUint16(p[24:], id)
	binary.BigEndian.PutUint16(p[26:], seq)
	binary.BigEndian.PutUint16(p[22:], ^Checksum(p[20:]))
	return p
}

// IsEchoReply reports whether pkt is an IPv4 ICMP echo reply from `from`
// with sequence number seq.
func IsEchoReply(pkt []byte, from netip.Addr, seq uint16) bool {
	return len(pkt) >= 28 && pkt[9] == 1 && pkt[20] == 0 && binary.BigEndian.Uint16(pkt[26:]) == seq &&
		netip.AddrFrom4([4]byte(pkt[12:16])) == from
}
