package fwd

import (
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

// The option-less IPv4 header check sums five fixed words instead of
// calling checksum; it must agree with checksum on every header, valid or
// not, including the all-zero header (sum +0, not valid) and headers
// whose words sum to -0.
func TestIPv4MinHeaderSumOKMatchesChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	check := func(h []byte) {
		t.Helper()
		if got, want := ipv4MinHeaderSumOK((*[ipv4MinHdrLen]byte)(h)), csum.Checksum(h[:ipv4MinHdrLen]) == 0; got != want {
			t.Fatalf("header % x: ipv4MinHeaderSumOK %v, checksum says %v", h, got, want)
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
			if rng.IntN(2) == 0 { // near all ones: the sums that fold above 0xffff
				h[i] |= byte(rng.Uint32() | rng.Uint32())
			}
		}
		if rng.IntN(2) == 0 { // half of them valid
			binary.BigEndian.PutUint16(h[10:], 0)
			binary.BigEndian.PutUint16(h[10:], csum.Checksum(h[:]))
		}
		check(h[:])
	}
}

// The word form of a neighbour key finds what the byte form finds: the
// same hash, the same entries, the same misses.
func TestNeighLookupWordsMatchesLookup(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	all := map[neighKey]*neighbour{}
	var keys []neighKey
	for i := range 300 {
		var a [16]byte
		if i%2 == 0 {
			a = key4([]byte{198, 18, byte(rng.IntN(4)), byte(rng.Uint32())})
		} else {
			a = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(rng.Uint32())}
		}
		k := neighKey{port: uint16(rng.IntN(3)), addr: a}
		all[k] = &neighbour{port: k.port, addr: a}
		keys = append(keys, k, neighKey{port: k.port + 3, addr: a}) // and one that is absent
	}
	nt := buildNeighTable(all)
	for _, k := range keys {
		if got, want := nt.lookupWords(k.port, wordsOf(&k.addr)), nt.lookup(k.port, &k.addr); got != want {
			t.Fatalf("%v: lookupWords %p, lookup %p", k, got, want)
		}
		if w := wordsOf(&k.addr); w.key() != k.addr {
			t.Fatalf("%v: words do not round-trip", k)
		}
		if a := k.addr; a[10] == 0xff && key4Words((*[4]byte)(a[12:16])) != wordsOf(&a) {
			t.Fatalf("%v: key4Words differs from key4", k)
		}
	}
}

// copyPacket lists Packet's fields one by one; a field added to Packet
// and not to copyPacket would be lost on every forwarded packet.
func TestCopyPacketCopiesEveryField(t *testing.T) {
	var p Packet
	v := reflect.ValueOf(&p).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Slice:
			f.Set(reflect.ValueOf(make([]byte, i+1)))
		default:
			f.SetUint(uint64(i + 1))
		}
	}
	var q Packet
	copyPacket(&q, &p)
	if !reflect.DeepEqual(p, q) || &q.Buf[0] != &p.Buf[0] {
		t.Fatalf("copyPacket lost a field:\n got %+v\nwant %+v", q, p)
	}
}
