package lpm

// top is a V4 table's direct-indexed first level: one entry per /16, so a
// lookup starts at depth 2 of the trie instead of at the root and skips
// the two dependent loads (root child array, depth-1 node and its child
// array) that the walk would otherwise make. It is derived from the trie:
// entry a0.a1 holds the longest prefix of length ≤ 16 covering a0.a1.0.0/16
// and the trie's child slot for that /16 (a depth-2 node, a leaf of length
// > 16, or nil).
//
// The 65,536 entries (16 bytes each, 1 MiB) are split into 256 chunks, one
// per first octet, behind a 2 KiB directory, so that an update copies the
// directory and the chunk it changes rather than the whole array: one
// chunk (4 KiB) for a prefix of /8 or longer, 2^(8-len) chunks for shorter
// ones (a /1 rewrites half the array; such routes are rare). Like the trie, a published top is never modified.
type top [256]*topChunk

type topChunk [256]topEntry

type topEntry struct {
	sub *node  // trie child for this /16: a node at depth 2, a leaf, or nil
	val uint32 // longest prefix of length ≤ 16 covering the /16, if ok
	ok  bool
}

// topSlot derives entry a0.a1 from the trie under root.
func topSlot(root *node, a0, a1 byte) (e topEntry) {
	if root == nil {
		return e
	}
	if i := root.longest(a0); i != 0 {
		e.val, e.ok = root.vals[root.pfxRank(i)], true
	}
	c := root.child(a0)
	switch {
	case c == nil:
	case c.isLeaf():
		addr := [4]byte{a0, a1}
		if c.leafLen <= 16 {
			if c.leafCovers(addr[:]) {
				e.val, e.ok = c.leafVal, true
			}
		} else if c.leafAddr[1] == a1 {
			e.sub = c
		}
	default:
		if i := c.longest(a1); i != 0 {
			e.val, e.ok = c.vals[c.pfxRank(i)], true
		}
		e.sub = c.child(a1)
	}
	return e
}

// buildTop derives the whole first level from the trie under root.
func buildTop(root *node) *top {
	t := new(top)
	for a0 := range t {
		t[a0] = deriveChunk(root, byte(a0))
	}
	return t
}

// emptyChunk stands for every chunk with no routes, so a small table's
// first level costs 2 KiB rather than 1 MiB. Like every chunk it is never
// written.
var emptyChunk topChunk

// updateTop returns old with the entries that a change of prefix
// addr/plen, which turned the trie under oldRoot into the one under root,
// can affect re-derived. Chunks it does not touch are shared with old.
//
// A prefix of /8 or shorter rewrites the 2^(8-plen) chunks it covers. A
// longer one changes only the /16s it covers (one, if longer than /16) of
// the chunk of its first octet, as long as the root's child for that octet
// is a node before and after: below a node an update touches one child
// slot. When that child is or becomes a leaf or nothing (a leaf splits
// into a node, a node collapses into a leaf), the entries of the octet's
// other /16s move too, and the whole chunk is re-derived.
func updateTop(old *top, oldRoot, root *node, addr [4]byte, plen int) *top {
	t := *old
	c := int(addr[0])
	if plen <= 8 {
		for ; c < int(addr[0])+1<<(8-plen); c++ {
			t[c] = deriveChunk(root, byte(c))
		}
		return &t
	}
	isNode := func(n *node) bool { return n != nil && !n.isLeaf() }
	if oc, nc := oldRoot.child(byte(c)), root.child(byte(c)); !isNode(oc) || !isNode(nc) {
		t[c] = deriveChunk(root, byte(c))
		return &t
	}
	ch := new(topChunk) // a copy: readers may hold old[c]
	*ch = *old[c]
	n := 1
	if plen < 16 {
		n = 1 << (16 - plen)
	}
	for s := int(addr[1]); s < int(addr[1])+n; s++ {
		ch[s] = topSlot(root, byte(c), byte(s))
	}
	t[c] = ch
	return &t
}

// deriveChunk derives the entries of first octet a0 from the trie under
// root, sharing emptyChunk when it has no routes.
func deriveChunk(root *node, a0 byte) *topChunk {
	if root.child(a0) == nil { // every entry alike: a small table builds fast
		e := topSlot(root, a0, 0)
		if !e.ok {
			return &emptyChunk
		}
		ch := new(topChunk)
		for a1 := range ch {
			ch[a1] = e
		}
		return ch
	}
	ch := new(topChunk)
	for a1 := range ch {
		ch[a1] = topSlot(root, a0, byte(a1))
	}
	if *ch == emptyChunk {
		return &emptyChunk
	}
	return ch
}

// lookupTop is lookup for IPv4 starting from the first level.
func lookupTop(t *top, addr [4]byte) (uint32, bool) {
	e := &t[addr[0]][addr[1]]
	if e.sub == nil {
		return e.val, e.ok
	}
	if e.sub.isLeaf() {
		if e.sub.leafCovers(addr[:]) {
			return e.sub.leafVal, true
		}
		return e.val, e.ok
	}
	return lookupFrom(e.sub, addr[:], 2, e.val, e.ok)
}
