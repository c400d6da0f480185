package fwd

import "encoding/binary"

// Internet checksum (RFC 1071) and its incremental update (RFC 1624).

// sumBytes adds b to a running one's-complement sum as big-endian 16-bit
// words (an odd last byte is padded with zero).
func sumBytes(sum uint32, b []byte) uint32 {
	for len(b) >= 8 {
		sum += uint32(binary.BigEndian.Uint16(b)) + uint32(binary.BigEndian.Uint16(b[2:])) +
			uint32(binary.BigEndian.Uint16(b[4:])) + uint32(binary.BigEndian.Uint16(b[6:]))
		sum = (sum & 0xffff) + (sum >> 16)
		b = b[8:]
	}
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

// fold reduces a running sum to 16 bits and complements it: the value to
// store in a checksum field.
func fold(sum uint32) uint16 {
	for sum > 0xffff {
		sum = (sum & 0xffff) + (sum >> 16)
	}
	return ^uint16(sum)
}

// checksum is the Internet checksum of b.
func checksum(b []byte) uint16 { return fold(sumBytes(0, b)) }

// pseudoSum is the sum of the IPv4 or IPv6 pseudo-header for an upper-layer
// packet of length n: src and dst are 4 or 16 bytes each.
func pseudoSum(src, dst []byte, proto uint8, n int) uint32 {
	s := sumBytes(0, src)
	s = sumBytes(s, dst)
	return s + uint32(proto) + uint32(n>>16) + uint32(n&0xffff)
}

// csumReplace16 returns checksum hc updated for one 16-bit word changing
// from old to new: RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'), which never
// produces the ambiguous -0 that eqn. 2 can.
func csumReplace16(hc, old, new uint16) uint16 {
	s := uint32(^hc) + uint32(^old) + uint32(new)
	s = (s & 0xffff) + (s >> 16)
	s = (s & 0xffff) + (s >> 16)
	return ^uint16(s)
}

// fixCsum16 updates the big-endian checksum stored at field for a 16-bit
// word changing from old to new.
func fixCsum16(field []byte, old, new uint16) {
	binary.BigEndian.PutUint16(field, csumReplace16(binary.BigEndian.Uint16(field), old, new))
}
