package csum

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The RFC 1624 update must equal a full recomputation, at even and odd
// field offsets alike (the odd case is what MSS clamping may meet).
func TestIncrementalChecksumMatchesFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		b := make([]byte, 4+rng.IntN(60)*2)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		binary.BigEndian.PutUint16(b[0:], 0)
		binary.BigEndian.PutUint16(b[0:], Checksum(b))
		off := 2 + rng.IntN(len(b)-2)
		if off+2 > len(b) {
			continue
		}
		old := binary.BigEndian.Uint16(b[off:])
		nv := uint16(rng.Uint32())
		binary.BigEndian.PutUint16(b[off:], nv)
		if off%2 == 0 {
			Fix16(b[0:], old, nv)
		} else {
			Fix16(b[0:], old<<8|old>>8, nv<<8|nv>>8)
		}
		if Checksum(b) != 0 {
			t.Fatalf("len %d off %d: incremental update wrong", len(b), off)
		}
	}
}

// sum16 is the textbook RFC 1071 sum, one 16-bit word at a time.
func sum16(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		sum = sum&0xffff + sum>>16
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

// Sum (32-bit words into 64 bits) folds to what the 16-bit sum does
// for every length and starting sum, including all-ones data.
func TestSumMatchesRFC1071(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 20000 {
		b := make([]byte, rng.IntN(1600))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if i%10 == 0 {
			for j := range b {
				b[j] = 0xff
			}
		}
		start := rng.Uint32() & 0x1ffff
		if got, want := Fold(Sum(start, b)), Fold(sum16(start, b)); got != want {
			t.Fatalf("len %d start %#x: %#04x, want %#04x", len(b), start, got, want)
		}
	}
}

// TestFold16: Fold16's rotate-and-add is folding twice, the definition,
// for sums of every size the translations make and at every carry edge
// (it was checked for all 2^32 sums once; this samples them).
func TestFold16(t *testing.T) {
	ref := func(s uint32) uint16 {
		s = s&0xffff + s>>16
		return uint16(s&0xffff + s>>16)
	}
	check := func(s uint32) {
		if got, want := Fold16(s), ref(s); got != want {
			t.Fatalf("Fold16(%#x) = %#x, want %#x", s, got, want)
		}
	}
	for hi := range uint32(1 << 16) {
		for _, lo := range []uint32{0, 1, 0x7fff, 0xfffe, 0xffff, 0x10000 - hi&0xffff, 0xffff - hi&0xffff} {
			check(hi<<16 | lo&0xffff)
		}
	}
	x := uint32(1)
	for range 1 << 20 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		check(x)
	}
}

// The sizes the callers meet: an IPv4 header, a small datagram, a full one.
func BenchmarkSum(b *testing.B) {
	for _, n := range []int{20, 64, 1400} {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			var s uint32
			for range b.N {
				s = Sum(s&0xffff, buf)
			}
			sink = uint16(s)
		})
	}
}

func BenchmarkFix16(b *testing.B) {
	var f [2]byte
	for i := range b.N {
		Fix16(f[:], uint16(i), uint16(i>>3))
	}
	sink = f
}

var sink any
