// Package csum is the Internet checksum (RFC 1071) and its incremental
// update (RFC 1624), for every header ovfwd builds or rewrites: the
// router's, NAT's and the tunnel's.
//
// A running sum is a uint32 one's-complement sum, possibly unfolded; Fold
// (complemented, for a checksum field) or Fold16 (not) reduce it. The
// functions are small enough to inline into the per-packet paths that
// call them: keep them so (fwd's TestHotHelpersInline names those).
package csum

import (
	"encoding/binary"
	"math/bits"
)

// Sum adds b to a running one's-complement sum as big-endian 16-bit words
// (an odd last byte is padded with zero, so only the last piece of a
// split buffer may have an odd length). It adds 32-bit words into 64 bits
// and folds once at the end: 2^16 ≡ 1
// modulo 2^16-1, so a 32-bit word's value folds to the sum of its two
// 16-bit halves (RFC 1071 §2(C)). The result is below 2^17, so callers
// may add small terms to it. The loops' shapes are measured
// (BenchmarkSum's sizes under callgrind): 32-bit loads in the long loop
// cost fewer instructions than 64-bit ones split in halves, and the
// 64-bit tail loop spares short buffers (an IPv4 header) three rounds.
func Sum(sum uint32, b []byte) uint32 {
	s := uint64(sum)
	for len(b) >= 32 {
		s += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:])) +
			uint64(binary.BigEndian.Uint32(b[8:])) + uint64(binary.BigEndian.Uint32(b[12:])) +
			uint64(binary.BigEndian.Uint32(b[16:])) + uint64(binary.BigEndian.Uint32(b[20:])) +
			uint64(binary.BigEndian.Uint32(b[24:])) + uint64(binary.BigEndian.Uint32(b[28:]))
		b = b[32:]
	}
	for len(b) >= 8 {
		w := binary.BigEndian.Uint64(b)
		s += w>>32 + w&0xffffffff
		b = b[8:]
	}
	if len(b) >= 4 {
		s += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	// 2^32 ≡ 1 as well: the halves' sum with its end-around carry, which
	// cannot overflow (a carry leaves at most 2^32-2), then 16-bit halves.
	r, c := bits.Add32(uint32(s), uint32(s>>32), 0)
	r += c
	return r&0xffff + r>>16
}

// Fold16 folds a one's-complement sum to 16 bits, not complemented:
// adding s rotated by 16 sums its halves into the high half with the low
// half's carry, the end-around carry (Linux's csum_fold). It equals
// folding twice, for every s (TestFold16), in fewer instructions.
func Fold16(s uint32) uint16 {
	return uint16((s + bits.RotateLeft32(s, 16)) >> 16)
}

// Fold is Fold16 complemented: the value to store in a checksum field.
func Fold(s uint32) uint16 {
	return ^uint16((s + bits.RotateLeft32(s, 16)) >> 16)
}

// Checksum is the Internet checksum of b.
func Checksum(b []byte) uint16 { return Fold(Sum(0, b)) }

// Pseudo is the sum of the IPv4 or IPv6 pseudo-header for an upper-layer
// packet of length n: src and dst are 4 or 16 bytes each.
func Pseudo(src, dst []byte, proto uint8, n int) uint32 {
	s := Sum(0, src)
	s = Sum(s, dst)
	return s + uint32(proto) + uint32(n>>16) + uint32(n&0xffff)
}

// Replace16 returns checksum hc updated for one 16-bit word changing from
// old to new: RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'), which never
// produces the ambiguous -0 that eqn. 2 can.
func Replace16(hc, old, new uint16) uint16 {
	return ^Fold16(uint32(^hc) + uint32(^old) + uint32(new))
}

// Fix16 updates the big-endian checksum stored at field for a 16-bit word
// changing from old to new.
func Fix16(field []byte, old, new uint16) {
	binary.BigEndian.PutUint16(field, Replace16(binary.BigEndian.Uint16(field), old, new))
}

// Fix32 is Fix16 for a 32-bit value (an address).
func Fix32(field []byte, old, new uint32) {
	FixDiff(field, Diff32(old, new))
}

// Diff32 is what a 32-bit field changing from old to new adds to a
// one's-complement sum (~m + m' word by word), unfolded: differences add
// up, and FixDiff folds their total into a checksum once.
func Diff32(old, new uint32) uint32 {
	return uint32(^uint16(old>>16)) + uint32(^uint16(old)) + uint32(uint16(new>>16)) + uint32(uint16(new))
}

// Diff16 is Diff32 for a 16-bit field.
func Diff16(old, new uint16) uint32 { return uint32(^old) + uint32(new) }

// FixDiff applies an unfolded difference to the big-endian checksum
// stored at field: RFC 1624 eqn. 3 with all of a packet's edits at once.
func FixDiff(field []byte, d uint32) {
	binary.BigEndian.PutUint16(field, ^Fold16(uint32(^binary.BigEndian.Uint16(field))+d))
}

// Set16 stores v big-endian at b and updates the checksum at field for it.
func Set16(b []byte, v uint16, field []byte) {
	old := binary.BigEndian.Uint16(b)
	binary.BigEndian.PutUint16(b, v)
	Fix16(field, old, v)
}

// Set32 stores v big-endian at b and updates the checksum at field for it.
func Set32(b []byte, v uint32, field []byte) {
	old := binary.BigEndian.Uint32(b)
	binary.BigEndian.PutUint32(b, v)
	Fix32(field, old, v)
}

// AddrSum4 is the sum of an IPv4 pseudo-header's addresses a (source,
// destination) as 32-bit words: two fixed words, not a loop.
func AddrSum4(a *[8]byte) uint64 {
	return uint64(binary.BigEndian.Uint32(a[0:])) + uint64(binary.BigEndian.Uint32(a[4:]))
}

// AddrSum6 is AddrSum4 for IPv6's addresses: eight words, below 2^35.
func AddrSum6(a *[32]byte) uint64 {
	w0, w1, w2, w3 := binary.BigEndian.Uint64(a[0:]), binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(a[16:]), binary.BigEndian.Uint64(a[24:])
	return w0>>32 + w0&0xffffffff + w1>>32 + w1&0xffffffff + w2>>32 + w2&0xffffffff + w3>>32 + w3&0xffffffff
}

// Fold17 folds s, an address sum plus the protocol and the segment's
// length (below 2^36), to a sum below 2^17 that is s modulo 2^16-1.
func Fold17(s uint64) uint32 {
	s = s&0xffff + s>>16 // < 2^21
	return uint32(s&0xffff + s>>16)
}

// FoldPseudo is Fold17 folded to 16 bits, not complemented: what the
// checksum field of a segment whose sender left it to the device holds.
func FoldPseudo(s uint64) uint16 {
	ps := Fold17(s)
	return uint16(ps&0xffff + ps>>16)
}
