package nat

import "testing"

// TestHashSpread: the flows of many clients to many remote hosts (what a
// NAT sees: the addresses' last octets vary together) spread over the
// session index about as well as random hashes would (linear probing at
// load 0.38: a mean displacement of ~0.3 slots; these seeds give
// 0.27-0.53, a hash that folds the last octets together ~4).
func TestHashSpread(t *testing.T) {
	for _, seed := range []uint64{0, 7, 0x1234567890abcdef, 0xdeadbeefcafebabe} {
		tb := &Table{seed: seed}
		x := newIndex(1 << 17)
		total, worst := 0, 0
		for h := range 100 {
			for sp := range 10 {
				for d := range 100 {
					k := skey{0xc6120000 | uint32(10+h), 0xc6130000 | uint32(1+d), uint16(5000 + sp), 53, protoUDP}
					v := tb.hashS(k)
					n := 0
					for i := v & x.mask; x.s[i] != 0; i = (i + 1) & x.mask {
						n++
					}
					x.insert(v, 0)
					total += n
					worst = max(worst, n)
				}
			}
		}
		if mean := float64(total) / 1e5; mean > 1 || worst > 64 {
			t.Errorf("seed %#x: mean displacement %.2f slots, worst %d", seed, mean, worst)
		}
	}
}
