package fwd

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

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

func benchPartial(b *testing.B, unfinished bool) {
	src, dst := []byte{198, 18, 0, 1}, []byte{198, 18, 1, 1}
	l4 := make([]byte, 1420)
	for i := range l4 {
		l4[i] = byte(i * 7)
	}
	l4[12] = 5 << 4
	ps := csum.Pseudo(src, dst, protoTCP, len(l4))
	binary.BigEndian.PutUint16(l4[16:], csum.Fold(csum.Sum(ps, l4)))
	if unfinished {
		binary.BigEndian.PutUint16(l4[16:], ^csum.Fold(ps))
	}
	frame := append(append([]byte{0x45, 0, 0, 0, 0, 0, 0, 0, 64, protoTCP, 0, 0}, append(src, dst...)...), l4...)
	buf := make([]byte, len(frame))
	p := Packet{Buf: buf, Len: uint16(len(buf)), Flags: FlagIPv4 | FlagTCP | FlagL3Only | FlagParsed, L4Off: 20}
	b.ReportAllocs()
	for b.Loop() {
		if unfinished {
			copy(buf, frame)
		}
		finishPartialCsum(&p)
	}
}

// The per-packet cost of the check on a packet with a finished checksum
// (every packet but those from offloading virtual hosts), and of
// finishing an unfinished one (a pass over 1,420 bytes, plus the copy
// that restores it each round).
func BenchmarkPartialCsumFinished(b *testing.B)   { benchPartial(b, false) }
func BenchmarkPartialCsumUnfinished(b *testing.B) { benchPartial(b, true) }

// decHop's constant-step checksum update must equal RFC 1624's general
// update (csum.Replace16) for every stored checksum and every TTL it meets
// (2…255: a TTL of 0 or 1 is dropped before), so that a valid header stays
// valid and the bytes are those a full update would write.
func TestDecHopMatchesRFC1624(t *testing.T) {
	var h [ipv4MinHdrLen]byte
	for ttl := 2; ttl <= 255; ttl += 17 {
		for hc := 0; hc <= 0xffff; hc++ {
			h[8], h[9] = byte(ttl), protoUDP
			binary.BigEndian.PutUint16(h[10:], uint16(hc))
			old := binary.BigEndian.Uint16(h[8:])
			want := csum.Replace16(uint16(hc), old, old-0x100)
			decHop(&h, true)
			if got := binary.BigEndian.Uint16(h[10:]); got != want || h[8] != byte(ttl-1) {
				t.Fatalf("TTL %d, checksum %#04x: got TTL %d checksum %#04x, want %#04x", ttl, hc, h[8], got, want)
			}
		}
	}
	// And on a real header: still valid after the update.
	rng := rand.New(rand.NewPCG(5, 6))
	for range 10000 {
		var b [ipv4MinHdrLen]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		b[8] = byte(2 + rng.IntN(254))
		binary.BigEndian.PutUint16(b[10:], 0)
		binary.BigEndian.PutUint16(b[10:], csum.Checksum(b[:]))
		decHop(&b, true)
		if csum.Checksum(b[:]) != 0 {
			t.Fatalf("header % x invalid after decHop", b)
		}
	}
}
