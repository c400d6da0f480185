package nat

import (
	"math/bits"
)

// The hash indexes that find records by key, and the hashes.

// ---- sessions and mappings ----

func (t *Table) findSession(k skey) (uint32, bool) {
	h := t.hashS(k)
	x := &t.sidx
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		v := x.s[i]
		if v == 0 {
			return 0, false
		}
		if uint32(v>>32) == h {
			if id := uint32(v) - 1; t.sess[id].key() == k {
				return id, true
			}
		}
	}
}

func (t *Table) findMapping(k mkey) (uint32, bool) {
	h := hashM(k)
	x := &t.midx
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		v := x.s[i]
		if v == 0 {
			return 0, false
		}
		if uint32(v>>32) == h {
			if id := uint32(v) - 1; t.maps[id].ik == k {
				return id, true
			}
		}
	}
}

func (t *Table) findOutside(k okey) (uint32, bool) {
	h := hashO(k)
	x := &t.oidx
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		v := x.s[i]
		if v == 0 {
			return 0, false
		}
		if uint32(v>>32) == h {
			if id := uint32(v) - 1; t.maps[id].ok == k {
				return id, true
			}
		}
	}
}

func (t *Table) findClient(k ckey) (uint32, bool) {
	if len(t.cidx.s) == 0 {
		return 0, false
	}
	h := hashC(k)
	x := &t.cidx
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		v := x.s[i]
		if v == 0 {
			return 0, false
		}
		if uint32(v>>32) == h {
			if id := uint32(v) - 1; t.clients[id].k == k {
				return id, true
			}
		}
	}
}

// ---- index ----

// index is an open-addressing hash index of record ids with linear probing
// and backward-shift deletion; a slot holds hash<<32 | id+1 (0: empty), and
// a record's home slot is its hash masked, so deletion needs no rehash.
type index struct {
	s    []uint64
	mask uint32
}

func newIndex(n int) index {
	c := indexSize(n)
	return index{s: make([]uint64, c), mask: uint32(c - 1)}
}

// indexSize is the slots of an index for n records: load at most 0.5.
func indexSize(n int) int {
	c := 16
	for c < 2*n {
		c <<= 1
	}
	return c
}

func (x *index) insert(h, id uint32) {
	i := h & x.mask
	for x.s[i] != 0 {
		i = (i + 1) & x.mask
	}
	x.s[i] = uint64(h)<<32 | uint64(id+1)
}

func (x *index) remove(h, id uint32) {
	want := uint64(h)<<32 | uint64(id+1)
	i := h & x.mask
	for x.s[i] != want {
		if x.s[i] == 0 {
			return
		}
		i = (i + 1) & x.mask
	}
	// Backward shift: pull later entries of the cluster into the hole when
	// their home slot is not between the hole and them.
	for j := (i + 1) & x.mask; x.s[j] != 0; j = (j + 1) & x.mask {
		home := uint32(x.s[j]>>32) & x.mask
		if (j-home)&x.mask >= (j-i)&x.mask {
			x.s[i] = x.s[j]
			i = j
		}
	}
	x.s[i] = 0
}

func mix32(v uint32) uint32 {
	h := uint64(v) * 0x9e3779b97f4a7c15
	return uint32(h >> 32)
}

func mix64(v uint64) uint32 {
	v ^= v >> 33
	v *= 0xff51afd7ed558ccd
	v ^= v >> 33
	v *= 0xc4ceb9fe1a85ec53
	return uint32(v>>32) ^ uint32(v)
}

// hashS is one multiply-shift over the 5-tuple folded into 64 bits. The
// fold is one-to-one for a given inside address and protocol (the ports
// go over the inside address, the remote address stays whole), so a
// client's flows differ before the multiply; the table's random seed
// keeps a client from choosing flows that share an index slot. The
// xorshift brings the high half's low bits (the addresses' last octets,
// which vary most) to where the multiply's kept bits see them.
func (t *Table) hashS(k skey) uint32 {
	x := (uint64(k.in)<<32 | uint64(k.rem)) ^ (uint64(k.inPort)<<48 | uint64(k.remPort)<<32 | uint64(k.proto)) ^ t.seed
	x ^= x >> 29
	return uint32((x * 0x9e3779b97f4a7c15) >> 32)
}

// hashWire is hashS from the header's words as they are loaded in wire
// order (see wireKey): source and destination address as one, the two
// ports as one. The swaps put the octets where hashS has them (in wire
// order the last octets share the high byte of their words, and the
// xorshift would fold them onto each other: four times the probes).
func (t *Table) hashWire(addrs uint64, ports uint32, proto uint8) uint32 {
	x := bits.ReverseBytes64(addrs) ^ (uint64(bits.ReverseBytes32(ports))<<32 | uint64(proto)) ^ t.seed
	x ^= x >> 29
	return uint32((x * 0x9e3779b97f4a7c15) >> 32)
}

func hashM(k mkey) uint32 { // not the rule: a reload renumbers rules in place
	return mix64(uint64(k.in)<<32 | uint64(k.port)<<8 | uint64(k.proto))
}

func hashO(k okey) uint32 { return mix64(uint64(k.out)<<32 | uint64(k.port)<<8 | uint64(k.proto)) }

func hashC(k ckey) uint32 { return mix32(k.addr) } // not the rule, as hashM

// tagged returns the id + 1 of the first record with hash h, or 0.
func (x *index) tagged(h uint32) uint32 { return tagged(x.s, x.mask, h) }

func tagged(s []uint64, mask, h uint32) uint32 {
	for i := h & mask; ; i = (i + 1) & mask {
		v := s[i]
		if v == 0 {
			return 0
		}
		if uint32(v>>32) == h {
			return uint32(v)
		}
	}
}
