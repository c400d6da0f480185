package lpm

import (
	"net/netip"
	"testing"
)

// FuzzV4 drives a table with operations decoded from the input and checks
// every answer against the naive reference. Each 6-byte record is one
// operation: op, 4 address bytes, length.
func FuzzV4(f *testing.F) {
	f.Add([]byte{0, 10, 0, 0, 0, 8, 0, 10, 1, 0, 0, 16, 2, 10, 1, 2, 3, 32, 1, 10, 0, 0, 0, 8})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 32, 2, 255, 255, 255, 254, 0})
	f.Add([]byte{0, 198, 18, 7, 9, 32, 0, 198, 18, 7, 0, 25, 1, 198, 18, 7, 9, 32, 2, 198, 18, 7, 9, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var tab *V4
		r := ref{}
		for i := 0; i+6 <= len(data) && i < 6*512; i += 6 {
			a := netip.AddrFrom4([4]byte(data[i+1 : i+5]))
			p := netip.PrefixFrom(a, int(data[i+5])%33).Masked()
			switch data[i] % 3 {
			case 0:
				tab = tab.Insert(p, uint32(i))
				r[p] = uint32(i)
			case 1:
				tab = tab.Delete(p)
				delete(r, p)
			case 2:
				v, ok := tab.Lookup(a.As4())
				if wv, wok := r.lookup(a); v != wv || ok != wok {
					t.Fatalf("Lookup(%v) = %d,%v; reference %d,%v", a, v, ok, wv, wok)
				}
				bv, bok := []uint32{0}, []bool{false}
				tab.LookupBatch([][4]byte{a.As4()}, bv, bok)
				if bv[0] != v || bok[0] != ok {
					t.Fatalf("LookupBatch(%v) = %d,%v; Lookup %d,%v", a, bv[0], bok[0], v, ok)
				}
			}
			if tab.Len() != len(r) {
				t.Fatalf("Len = %d, reference %d", tab.Len(), len(r))
			}
		}
		n := 0
		tab.Walk(func(p netip.Prefix, v uint32) bool {
			n++
			if wv, ok := r[p]; !ok || wv != v {
				t.Fatalf("Walk yielded %v=%d; reference %d,%v", p, v, wv, ok)
			}
			return true
		})
		if n != len(r) {
			t.Fatalf("Walk yielded %d prefixes, reference has %d", n, len(r))
		}
	})
}

// FuzzV6 is FuzzV4 for IPv6: 18-byte records (op, 16 address bytes, length).
func FuzzV6(f *testing.F) {
	f.Add(append(append([]byte{0}, netip.MustParseAddr("2001:db8::").AsSlice()...), 32))
	f.Add(append(append(append(append([]byte{0}, netip.MustParseAddr("2001:db8::1").AsSlice()...), 128),
		append([]byte{0}, netip.MustParseAddr("2001:db8::").AsSlice()...)...), 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		var tab *V6
		r := ref{}
		for i := 0; i+18 <= len(data) && i < 18*512; i += 18 {
			a := netip.AddrFrom16([16]byte(data[i+1 : i+17]))
			p := netip.PrefixFrom(a, int(data[i+17])%129).Masked()
			switch data[i] % 3 {
			case 0:
				tab = tab.Insert(p, uint32(i))
				r[p] = uint32(i)
			case 1:
				tab = tab.Delete(p)
				delete(r, p)
			case 2:
				v, ok := tab.Lookup(a.As16())
				if wv, wok := r.lookup(a); v != wv || ok != wok {
					t.Fatalf("Lookup(%v) = %d,%v; reference %d,%v", a, v, ok, wv, wok)
				}
			}
			if tab.Len() != len(r) {
				t.Fatalf("Len = %d, reference %d", tab.Len(), len(r))
			}
		}
	})
}
