package fwd

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// The option-less IPv4 header check sums five fixed words instead of
// calling checksum; it must agree with checksum on every header, valid or
// not, including the all-zero header (sum +0, not valid) and headers
// whose words sum to -0.
func TestIPv4HeaderSumOKMatchesChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	check := func(h []byte) {
		t.Helper()
		if got, want := ipv4HeaderSumOK(h, ipv4MinHdrLen), checksum(h[:ipv4MinHdrLen]) == 0; got != want {
			t.Fatalf("header % x: ipv4HeaderSumOK %v, checksum says %v", h, got, want)
		}
	}
	var h [ipv4MinHdrLen]byte
	check(h[:])
	for i := range h {
		h[i] = 0xff
	}
	check(h[:])
	for range 100000 {
		for i := range h {
			h[i] = byte(rng.Uint32())
		}
		if rng.IntN(2) == 0 { // half of them valid
			binary.BigEndian.PutUint16(h[10:], 0)
			binary.BigEndian.PutUint16(h[10:], checksum(h[:]))
		}
		check(h[:])
	}
}
