package vpn

import (
	"fmt"
	"testing"
)

var benchCiphers = []Cipher{AES128GCM, AES256GCM, ChaCha20Poly1305}

func BenchmarkSeal(b *testing.B) {
	for _, c := range benchCiphers {
		for _, size := range []int{64, 1400} {
			b.Run(fmt.Sprintf("%v/%d", c, size), func(b *testing.B) {
				km, _ := testKeys(c, 0)
				k, err := NewDataKey(km)
				if err != nil {
					b.Fatal(err) // a broken cipher must fail make bench, not vanish from it
				}
				buf := make([]byte, 2048)
				plain := buf[DataHeaderLen : DataHeaderLen+size]
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					k.Seal(buf[:DataHeaderLen], 1, uint32(i+1), plain)
				}
			})
		}
	}
}

// BenchmarkOpen includes copying the sealed packet back into place before
// each Open (Open works in place); the copy is a few ns at 1400 B.
func BenchmarkOpen(b *testing.B) {
	for _, c := range benchCiphers {
		for _, size := range []int{64, 1400} {
			b.Run(fmt.Sprintf("%v/%d", c, size), func(b *testing.B) {
				server, client := testKeys(c, 0)
				s, err := NewDataKey(server)
				if err != nil {
					b.Fatal(err) // a broken cipher must fail make bench, not vanish from it
				}
				cl := mustKey(b, client)
				sealed := sealInPlace(s, 1, 1, make([]byte, size))
				buf := make([]byte, 2048)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					copy(buf, sealed)
					if _, _, err := cl.Open(buf[:len(sealed)]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDecapEncap moves batches of 32 packets through Encap on one
// tunnel and Decap on its mirror, and back: one op is one packet through
// one Encap and one Decap (outer IPv4, no compression framing).
func BenchmarkDecapEncap(b *testing.B) {
	for _, c := range benchCiphers {
		for _, size := range []int{64, 1400} {
			b.Run(fmt.Sprintf("%v/%d", c, size), func(b *testing.B) {
				p := newPair(b, c, CompNone, 1).v4()
				batch := p.batch(32, size, false)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for done := 0; done < b.N; done += 2 * len(batch.Pkts) {
					p.roundTrip(0, batch)
				}
				b.StopTimer()
				if batch.Pkts[0].Verdict != 0 {
					b.Fatalf("dropped: %v", p.a.Stats().Drops)
				}
			})
		}
	}
}
