package fwd

import (
	"encoding/binary"
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
		binary.BigEndian.PutUint16(b[0:], checksum(b))
		off := 2 + rng.IntN(len(b)-2)
		if off+2 > len(b) {
			continue
		}
		old := binary.BigEndian.Uint16(b[off:])
		nv := uint16(rng.Uint32())
		binary.BigEndian.PutUint16(b[off:], nv)
		if off%2 == 0 {
			fixCsum16(b[0:], old, nv)
		} else {
			fixCsum16(b[0:], old<<8|old>>8, nv<<8|nv>>8)
		}
		if checksum(b) != 0 {
			t.Fatalf("len %d off %d: incremental update wrong", len(b), off)
		}
	}
}

func TestMACTableLearnLookupAgeRecycle(t *testing.T) {
	mt := newMACTable(64, 300)
	k := func(i int) uint64 { return macKey(1, []byte{2, 0, 0, 0, byte(i >> 8), byte(i)}) }
	for i := range 40 {
		if !mt.learn(k(i), uint16(i%4), 1000) {
			t.Fatalf("learn %d failed in an empty table", i)
		}
	}
	for i := range 40 {
		if p, ok := mt.lookup(k(i), 1100); !ok || p != uint16(i%4) {
			t.Fatalf("lookup %d = %d,%v", i, p, ok)
		}
	}
	if _, ok := mt.lookup(k(3), 1301); ok {
		t.Fatal("entry did not age out")
	}
	if _, ok := mt.lookup(macKey(2, []byte{2, 0, 0, 0, 0, 3}), 1100); ok {
		t.Fatal("VLANs share entries")
	}
	// Fill far past capacity long after aging: old slots are recycled.
	learned := 0
	for i := 1000; i < 1200; i++ {
		if mt.learn(k(i), 9, 5000) {
			learned++
		}
	}
	if learned < 60 {
		t.Fatalf("only %d learned after aging", learned)
	}
}
