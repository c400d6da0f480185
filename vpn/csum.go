package vpn

import "encoding/binary"

// sum adds b to a running one's-complement sum of 16-bit big-endian words
// (RFC 1071), eight bytes at a time; fold it with fold. b's length must be
// even except for the last call.
func sum(acc uint64, b []byte) uint64 {
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		acc += v >> 32
		acc += v & 0xffffffff
		b = b[8:]
	}
	if len(b) >= 4 {
		acc += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		acc += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint64(b[0]) << 8
	}
	return acc
}

// fold reduces a sum to 16 bits and complements it.
func fold(acc uint64) uint16 {
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return ^uint16(acc)
}
