package nat

import "math/bits"

// Incremental Internet checksum updates (RFC 1624).

// fix16 updates the checksum stored at c for a 16-bit word changing from
// old to new: RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m').
func fix16(c []byte, old, new uint16) {
	s := uint32(^be16(c)) + uint32(^old) + uint32(new)
	put16(c, ^fold16(s))
}

// fix32 is fix16 for a 32-bit value (an address).
func fix32(c []byte, old, new uint32) {
	s := uint32(^be16(c)) + uint32(^uint16(old>>16)) + uint32(^uint16(old)) + uint32(uint16(new>>16)) + uint32(uint16(new))
	put16(c, ^fold16(s))
}

// diff32 is what a 32-bit field changing from old to new adds to a
// one's-complement sum (~m + m' word by word), unfolded: differences add
// up, and fixd folds their total into a checksum once.
func diff32(old, new uint32) uint32 {
	return uint32(^uint16(old>>16)) + uint32(^uint16(old)) + uint32(uint16(new>>16)) + uint32(uint16(new))
}

// diff16 is diff32 for a 16-bit field.
func diff16(old, new uint16) uint32 { return uint32(^old) + uint32(new) }

// fixd applies an unfolded difference to the checksum stored at c: RFC
// 1624 eqn. 3 with all of a packet's edits at once.
func fixd(c []byte, d uint32) {
	put16(c, ^fold16(uint32(^be16(c))+d))
}

// put16c writes v at b and updates the checksum at c for it.
func put16c(b []byte, v uint16, c []byte) {
	old := be16(b)
	put16(b, v)
	fix16(c, old, v)
}

// put32c writes v at b and updates the checksum at c for it.
func put32c(b []byte, v uint32, c []byte) {
	old := be32(b)
	put32(b, v)
	fix32(c, old, v)
}

// fold16 folds a one's-complement sum to 16 bits (not complemented):
// adding s rotated by 16 sums its halves into the high half with the
// low half's carry, the end-around carry (Linux's csum_fold); the same
// as folding twice, for every s (TestFold16), in fewer instructions.
func fold16(s uint32) uint16 {
	return uint16((s + bits.RotateLeft32(s, 16)) >> 16)
}

// sum is the one's-complement sum of b as big-endian words, unfolded.
func sum(b []byte) uint32 {
	var s uint32
	for len(b) >= 2 {
		s += uint32(be16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}
