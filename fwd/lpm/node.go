package lpm

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// node is one 8-bit stride of the trie (see the package doc for the index
// scheme), or a leaf: a child slot whose whole subtree is one prefix, kept
// as that prefix instead of a chain of nodes (path compression, as BART's
// fringe and leaf nodes). A leaf has leafLen > 0 and nothing else set.
//
// A node reachable from a published table is never modified; the inPlace
// flag of the update helpers is true only for nodes owned by a builder or
// created by the current update. The fields a lookup reads on its way down
// come first so they share the node's first cache line.
//
// kidBase and pfxBase hold the popcounts of the bitmap words below each
// word, so a rank is one popcount, not a loop over up to seven words.
// They cost 16 bytes a node and make it 192 bytes, three whole cache lines.
type node struct {
	kids     [4]uint64 // occupied child octets 0..255
	children []*node   // children of kids, in octet order
	leafLen  uint8     // leaf: prefix length (a leaf is never /0)
	kidBase  [4]uint8  // kidBase[w]: children in kids[:w] (at most 192)
	leafAddr [16]byte  // leaf: masked prefix address (IPv4 uses 4 bytes)
	leafVal  uint32    // leaf: value
	pfx      [8]uint64 // occupied prefix indexes 1..511
	vals     []uint32  // values of pfx, in index order
	pfxBase  [8]uint16 // pfxBase[w]: prefixes in pfx[:w]
}

// rebase recomputes kidBase and pfxBase after a change of kids or pfx.
func (n *node) rebase() {
	k := 0
	for w := range n.kids {
		n.kidBase[w] = uint8(k)
		k += bits.OnesCount64(n.kids[w])
	}
	p := 0
	for w := range n.pfx {
		n.pfxBase[w] = uint16(p)
		p += bits.OnesCount64(n.pfx[w])
	}
}

func newLeaf(addr []byte, plen int, val uint32) *node {
	l := &node{leafLen: uint8(plen), leafVal: val}
	copy(l.leafAddr[:], addr)
	return l
}

func (n *node) isLeaf() bool { return n.leafLen != 0 }

// leafCovers reports whether leaf n's prefix contains addr.
func (n *node) leafCovers(addr []byte) bool {
	l := int(n.leafLen)
	full := l / 8
	for i := range full {
		if addr[i] != n.leafAddr[i] {
			return false
		}
	}
	if r := l % 8; r != 0 {
		return addr[full]&byte(0xff<<(8-r)) == n.leafAddr[full]
	}
	return true
}

// leafCovers4 is leafCovers for an IPv4 address: one masked compare.
func (n *node) leafCovers4(a *[4]byte) bool {
	m := ^uint32(0) << ((32 - uint(n.leafLen)) & 31) // leafLen 1..32
	return (binary.BigEndian.Uint32(a[:])^binary.BigEndian.Uint32(n.leafAddr[:4]))&m == 0
}

// leafIs reports whether leaf n is exactly addr/plen (addr masked).
func (n *node) leafIs(addr []byte, plen int) bool {
	return int(n.leafLen) == plen && string(n.leafAddr[:len(addr)]) == string(addr)
}

// stride returns the depth of the node that stores a prefix of length plen
// and the prefix's index inside it. addr must be masked to plen bits.
func stride(addr []byte, plen int) (depth int, idx uint) {
	if plen == 0 {
		return 0, 1
	}
	depth = (plen - 1) / 8
	l := uint(plen - 8*depth) // 1..8 bits into the stride
	return depth, 1<<l | uint(addr[depth])>>(8-l)
}

// idxPrefix inverts stride for one node: the length inside the stride and
// the octet (top bits only) of index idx.
func idxPrefix(idx uint) (l int, octet byte) {
	l = bits.Len(idx) - 1
	return l, byte((idx - 1<<l) << (8 - l))
}

// anc0 holds, for the top five bits of an octet, the ancestors of its leaf
// index that sit in word 0 of the prefix set (rows 0..5, indexes 1..63).
var anc0 = func() (t [32]uint64) {
	for k := range t {
		for i := uint(32 + k); i > 0; i >>= 1 {
			t[k] |= 1 << i
		}
	}
	return t
}()

func (n *node) hasPfx(idx uint) bool { return n.pfx[idx>>6&7]&(1<<(idx&63)) != 0 }

// longest returns the index of the longest prefix in n covering octet b, or 0.
// The candidates are the ancestors of leaf 256+b: one in each of rows 8, 7
// and 6 (words 4..7, 2..3 and 1) and the rest in word 0.
func (n *node) longest(b byte) uint {
	i := 256 + uint(b)
	if n.pfx[i>>6&7]&(1<<(i&63)) != 0 {
		return i
	}
	i >>= 1
	if n.pfx[i>>6&7]&(1<<(i&63)) != 0 {
		return i
	}
	i >>= 1
	if n.pfx[1]&(1<<(i&63)) != 0 {
		return i
	}
	if m := n.pfx[0] & anc0[b>>3]; m != 0 {
		return uint(bits.Len64(m) - 1)
	}
	return 0
}

// pfxRank is the position of index idx in vals.
func (n *node) pfxRank(idx uint) int {
	w := idx >> 6 & 7
	return int(n.pfxBase[w]) + bits.OnesCount64(n.pfx[w]&(1<<(idx&63)-1))
}

// kidRank is the position of octet b in children.
func (n *node) kidRank(b byte) int {
	w := b >> 6 & 3
	return int(n.kidBase[w]) + bits.OnesCount64(n.kids[w]&(1<<(b&63)-1))
}

// child returns the child for octet b, or nil.
func (n *node) child(b byte) *node {
	if n.kids[b>>6&3]&(1<<(b&63)) == 0 {
		return nil
	}
	return n.children[n.kidRank(b)]
}

func (n *node) empty() bool { return len(n.vals) == 0 && len(n.children) == 0 }

// own returns n itself when it may be modified, else a shallow copy whose
// slices the caller must replace before writing to them.
func (n *node) own(inPlace bool) *node {
	if inPlace {
		return n
	}
	c := *n
	return &c
}

// setPfx stores val at idx. It reports whether the prefix is new; it returns
// n unchanged when the prefix already holds val.
func (n *node) setPfx(idx uint, val uint32, inPlace bool) (*node, bool) {
	r := n.pfxRank(idx)
	if n.hasPfx(idx) {
		if n.vals[r] == val {
			return n, false
		}
		o := n.own(inPlace)
		if !inPlace {
			o.vals = slices.Clone(n.vals)
		}
		o.vals[r] = val
		return o, false
	}
	o := n.own(inPlace)
	if inPlace {
		o.vals = slices.Insert(o.vals, r, val)
	} else {
		o.vals = make([]uint32, len(n.vals)+1)
		copy(o.vals, n.vals[:r])
		o.vals[r] = val
		copy(o.vals[r+1:], n.vals[r:])
	}
	o.pfx[idx>>6&7] |= 1 << (idx & 63)
	o.rebase()
	return o, true
}

// delPfx removes idx, which must be present.
func (n *node) delPfx(idx uint, inPlace bool) *node {
	r := n.pfxRank(idx)
	o := n.own(inPlace)
	if inPlace {
		o.vals = slices.Delete(o.vals, r, r+1)
	} else {
		o.vals = make([]uint32, len(n.vals)-1)
		copy(o.vals, n.vals[:r])
		copy(o.vals[r:], n.vals[r+1:])
	}
	o.pfx[idx>>6&7] &^= 1 << (idx & 63)
	o.rebase()
	return o
}

// setKid stores c (non-nil) as the child for octet b.
func (n *node) setKid(b byte, c *node, inPlace bool) *node {
	r := n.kidRank(b)
	o := n.own(inPlace)
	present := n.kids[b>>6&3]&(1<<(b&63)) != 0
	switch {
	case present && inPlace:
		o.children[r] = c
	case present:
		o.children = slices.Clone(n.children)
		o.children[r] = c
	case inPlace:
		o.children = slices.Insert(o.children, r, c)
	default:
		o.children = make([]*node, len(n.children)+1)
		copy(o.children, n.children[:r])
		o.children[r] = c
		copy(o.children[r+1:], n.children[r:])
	}
	o.kids[b>>6&3] |= 1 << (b & 63)
	o.rebase()
	return o
}

// delKid removes the child for octet b, which must be present.
func (n *node) delKid(b byte, inPlace bool) *node {
	r := n.kidRank(b)
	o := n.own(inPlace)
	if inPlace {
		o.children = slices.Delete(o.children, r, r+1) // zeroes the freed slot
	} else {
		o.children = make([]*node, len(n.children)-1)
		copy(o.children, n.children[:r])
		copy(o.children[r:], n.children[r+1:])
	}
	o.kids[b>>6&3] &^= 1 << (b & 63)
	o.rebase()
	return o
}
