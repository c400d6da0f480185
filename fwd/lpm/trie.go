package lpm

import (
	"math/bits"
	"slices"
)

// The functions here serve both address families: addr is the masked
// prefix address (4 or 16 bytes) and depth the stride being visited.

// lookup returns the value of the longest prefix in the trie under n that
// covers addr. It does not allocate. It reads a node's best value as soon
// as it finds one rather than after the walk: that load does not depend on
// the descent, so the CPU overlaps their cache misses.
func lookup(n *node, addr []byte) (val uint32, ok bool) {
	return lookupFrom(n, addr, 0, 0, false)
}

// lookupFrom is lookup from n, the node at depth on addr's path, where the
// longest match above it is val, ok.
func lookupFrom(n *node, addr []byte, depth int, val uint32, ok bool) (uint32, bool) {
	for _, b := range addr[depth:] {
		if len(n.vals) != 0 {
			if i := n.longest(b); i != 0 {
				val, ok = n.vals[n.pfxRank(i)], true
			}
		}
		if n = n.child(b); n == nil {
			break
		}
		if n.isLeaf() {
			if n.leafCovers(addr) {
				return n.leafVal, true
			}
			break
		}
	}
	return val, ok
}

// get returns the value stored for exactly addr/plen.
func get(n *node, addr []byte, plen int) (uint32, bool) {
	d, idx := stride(addr, plen)
	for depth := 0; n != nil; depth++ {
		if n.isLeaf() {
			return n.leafVal, n.leafIs(addr, plen)
		}
		if depth == d {
			if !n.hasPfx(idx) {
				return 0, false
			}
			return n.vals[n.pfxRank(idx)], true
		}
		n = n.child(addr[depth])
	}
	return 0, false
}

// insert stores val for addr/plen in the trie under n, a node (not a leaf)
// at depth, nil for an empty trie. It returns the new subtree root and
// whether the prefix is new. Unless inPlace, it copies the nodes on the
// path and leaves the old ones intact; it returns n itself when nothing
// changed.
func insert(n *node, addr []byte, plen, depth int, val uint32, inPlace bool) (*node, bool) {
	if n == nil {
		n, inPlace = new(node), true // nobody else can see a new node
	}
	d, idx := stride(addr, plen)
	if depth == d {
		return n.setPfx(idx, val, inPlace)
	}
	b := addr[depth]
	old := n.child(b)
	var c *node
	added := false
	switch {
	case old == nil:
		c, added = newLeaf(addr, plen, val), true
	case old.isLeaf() && old.leafIs(addr, plen):
		if old.leafVal == val {
			return n, false
		}
		c = old
		if !inPlace {
			c = newLeaf(addr, plen, val)
		}
		c.leafVal = val
	case old.isLeaf():
		// A second prefix below this slot: the leaf becomes a node holding both.
		c, _ = insert(nil, old.leafAddr[:len(addr)], int(old.leafLen), depth+1, old.leafVal, true)
		c, added = insert(c, addr, plen, depth+1, val, true)
	default:
		c, added = insert(old, addr, plen, depth+1, val, inPlace)
	}
	if c == old {
		return n, added
	}
	return n.setKid(b, c, inPlace), added
}

// remove deletes addr/plen from the trie under n, a node (not a leaf) at
// depth, and returns the new subtree root (nil when it became empty) and
// whether the prefix was there. It returns n itself when the prefix was
// absent.
func remove(n *node, addr []byte, plen, depth int, inPlace bool) (*node, bool) {
	if n == nil {
		return nil, false
	}
	d, idx := stride(addr, plen)
	if depth == d {
		if !n.hasPfx(idx) {
			return n, false
		}
		n = n.delPfx(idx, inPlace)
	} else {
		b := addr[depth]
		old := n.child(b)
		var c *node
		switch {
		case old == nil:
			return n, false
		case old.isLeaf():
			if !old.leafIs(addr, plen) {
				return n, false
			}
		default:
			var removed bool
			if c, removed = remove(old, addr, plen, depth+1, inPlace); !removed {
				return n, false
			}
			c = collapse(c, addr, depth+1)
		}
		if c == nil {
			n = n.delKid(b, inPlace)
		} else {
			n = n.setKid(b, c, inPlace)
		}
	}
	if n.empty() {
		return nil, true
	}
	return n, true
}

// collapse turns c, a node at depth (≥ 1) whose path is addr[:depth], into
// a leaf when its whole subtree is now one prefix, so that a table's shape
// does not depend on what was deleted from it.
func collapse(c *node, addr []byte, depth int) *node {
	if c == nil {
		return nil
	}
	if len(c.vals) == 0 && len(c.children) == 1 && c.children[0].isLeaf() {
		return c.children[0]
	}
	if len(c.vals) == 1 && len(c.children) == 0 {
		for w, word := range c.pfx {
			if word != 0 {
				l, octet := idxPrefix(uint(w)<<6 | uint(bits.TrailingZeros64(word)))
				leaf := newLeaf(addr[:depth], 8*depth+l, c.vals[0])
				leaf.leafAddr[depth] = octet
				return leaf
			}
		}
	}
	return c
}

// walk calls fn for every prefix under n, the node at depth whose path is
// path[:depth], in depth-first order (a node's prefixes by length, then its
// children by octet). emit builds the caller's prefix type. It reports
// false when fn stopped the walk.
func walk(n *node, path []byte, depth int, emit func(path []byte, plen int, val uint32) bool) bool {
	r := 0
	for w, word := range n.pfx {
		for word != 0 {
			bit := uint(bits.TrailingZeros64(word))
			word &^= 1 << bit
			idx := uint(w)<<6 | bit
			l, octet := idxPrefix(idx)
			plen := 8*depth + l
			if l > 0 {
				path[depth] = octet
				clear(path[depth+1:])
			} else {
				clear(path[depth:])
			}
			if !emit(path, plen, n.vals[r]) {
				return false
			}
			r++
		}
	}
	r = 0
	for w, word := range n.kids {
		for word != 0 {
			bit := uint(bits.TrailingZeros64(word))
			word &^= 1 << bit
			c := n.children[r]
			if c.isLeaf() {
				copy(path, c.leafAddr[:])
				if !emit(path, int(c.leafLen), c.leafVal) {
					return false
				}
			} else {
				path[depth] = byte(w<<6) | byte(bit)
				if !walk(c, path, depth+1, emit) {
					return false
				}
			}
			r++
		}
	}
	return true
}

// compact gives every slice under n its exact length, dropping the slack a
// builder's appends left, so a built table is as small as a copied one.
func compact(n *node) {
	if n == nil {
		return
	}
	n.vals = slices.Clip(slices.Clone(n.vals))
	n.children = slices.Clip(slices.Clone(n.children))
	for _, c := range n.children {
		compact(c)
	}
}

func count(n *node) int {
	if n == nil {
		return 0
	}
	if n.isLeaf() {
		return 1
	}
	c := len(n.vals)
	for _, k := range n.children {
		c += count(k)
	}
	return c
}
