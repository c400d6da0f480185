package lpm

import "runtime"

// batchWidth is how many lookups LookupBatch keeps in flight. Each walks
// its own path, so their cache misses overlap instead of queueing behind
// one another; 16 covers a core's outstanding-miss capacity.
const batchWidth = 16

// step advances one lookup by one level: it records the longest prefix of
// node n (at depth) covering addr in *val/*ok and returns the node to visit
// next, or nil when the walk is over. Unlike lookup it tests for a leaf on
// arrival, one level later, so that no branch waits for a child's header.
func step(n *node, addr []byte, depth int, val *uint32, ok *bool) *node {
	if n.isLeaf() {
		if n.leafCovers(addr) {
			*val, *ok = n.leafVal, true
		}
		return nil
	}
	b := addr[depth]
	if len(n.vals) != 0 {
		if i := n.longest(b); i != 0 {
			*val, *ok = n.vals[n.pfxRank(i)], true
		}
	}
	return n.child(b)
}

// touch loads the cache lines of n's header that step reads, without
// branching on what it loads, so a batch's misses are all in flight before
// any of them is needed.
func touch(n *node) uint64 {
	return n.kids[0] ^ n.pfx[0] ^ n.pfx[7] ^ uint64(len(n.vals))
}

// lookupBatch runs up to batchWidth lookups level by level: first it loads
// every current node, then it steps every lookup.
func (t *V4) lookupBatch(addrs [][4]byte, vals []uint32, oks []bool) {
	var cur [batchWidth]*node
	k := len(addrs)
	for i := range k {
		cur[i] = t.root
	}
	for depth := range 4 {
		var sum uint64
		live := false
		for i := range k {
			if cur[i] != nil {
				sum += touch(cur[i])
			}
		}
		for i := range k {
			if cur[i] != nil {
				cur[i] = step(cur[i], addrs[i][:], depth, &vals[i], &oks[i])
				live = true
			}
		}
		runtime.KeepAlive(sum) // keeps touch's loads
		if !live {
			return
		}
	}
	for i := range k { // leaves reached at the last level
		if cur[i] != nil {
			step(cur[i], addrs[i][:], 3, &vals[i], &oks[i])
		}
	}
}

func (t *V6) lookupBatch(addrs [][16]byte, vals []uint32, oks []bool) {
	var cur [batchWidth]*node
	k := len(addrs)
	for i := range k {
		cur[i] = t.root
	}
	for depth := range 16 {
		var sum uint64
		live := false
		for i := range k {
			if cur[i] != nil {
				sum += touch(cur[i])
			}
		}
		for i := range k {
			if cur[i] != nil {
				cur[i] = step(cur[i], addrs[i][:], depth, &vals[i], &oks[i])
				live = true
			}
		}
		runtime.KeepAlive(sum) // keeps touch's loads
		if !live {
			return
		}
	}
	for i := range k {
		if cur[i] != nil {
			step(cur[i], addrs[i][:], 15, &vals[i], &oks[i])
		}
	}
}

// LookupBatch does Lookup for every addrs[i], storing the results in
// vals[i] and oks[i] (both at least len(addrs) long). It walks up to 16
// lookups level by level so that their memory accesses overlap; with a
// large table and scattered destinations this is several times faster per
// address than a loop over Lookup. It neither allocates nor locks.
func (t *V4) LookupBatch(addrs [][4]byte, vals []uint32, oks []bool) {
	vals, oks = vals[:len(addrs)], oks[:len(addrs)]
	clear(vals)
	clear(oks)
	if t == nil || t.root == nil {
		return
	}
	for len(addrs) > 0 {
		k := min(len(addrs), batchWidth)
		t.lookupBatch(addrs[:k], vals[:k], oks[:k])
		addrs, vals, oks = addrs[k:], vals[k:], oks[k:]
	}
}

// LookupBatch is V4.LookupBatch for IPv6.
func (t *V6) LookupBatch(addrs [][16]byte, vals []uint32, oks []bool) {
	vals, oks = vals[:len(addrs)], oks[:len(addrs)]
	clear(vals)
	clear(oks)
	if t == nil || t.root == nil {
		return
	}
	for len(addrs) > 0 {
		k := min(len(addrs), batchWidth)
		t.lookupBatch(addrs[:k], vals[:k], oks[:k])
		addrs, vals, oks = addrs[k:], vals[k:], oks[k:]
	}
}
