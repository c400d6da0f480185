package lpm

import (
	"math/bits"
	"runtime"
)

// batchWidth is how many lookups LookupBatch keeps in flight. Each walks
// its own path, so their cache misses overlap instead of queueing behind
// one another. 64 is a worker's default burst, and on 1 M routes it beat
// 16 and 32 per address (docs/benchmarks.md): the rounds of a batch cost
// memory latencies, so the more lanes share them the better, until the
// core's miss buffers are full.
const batchWidth = 64

// touch loads the cache lines of n's header that a step reads, without
// branching on what it loads, so a batch's misses are all in flight before
// any of them is needed.
func touch(n *node) uint64 {
	return n.kids[0] ^ n.pfx[0] ^ n.pfx[7] ^ uint64(len(n.vals)) ^ uint64(n.leafAddr[0]) ^ uint64(n.leafLen)
}

// lookupBatch looks up at most batchWidth addresses: the first level for
// all of them, then, for the lanes it leaves open, the at most two node
// levels below (depths 2 and 3; a /32 lives at depth 3). It is descend
// specialised for IPv4: lanes still walking are packed at the front of
// cur, so each level's loops run over those lanes only, and a leaf is
// checked with one masked word compare.
func (t *V4) lookupBatch(addrs [][4]byte, vals []uint32, oks []bool) {
	var cur [batchWidth]*node
	var lane [batchWidth]uint8 // cur[j] walks for addrs[lane[j]]
	vals, oks = vals[:len(addrs)], oks[:len(addrs)]
	k := 0
	var dups uint64 // lanes whose address is the previous lane's
	for i := range addrs {
		a := &addrs[i]
		if i > 0 && *a == addrs[i-1] {
			dups |= 1 << (i & 63)
			continue
		}
		e := &t.top[a[0]][a[1]]
		vals[i], oks[i] = e.val, e.ok
		if e.sub != nil {
			cur[k&(batchWidth-1)], lane[k&(batchWidth-1)] = e.sub, uint8(i)
			k++
		}
	}
	var valAt [batchWidth]*uint32
	var kidAt [batchWidth]*node
	for depth := 2; k > 0 && depth < 4; depth++ {
		var sum uint64
		for _, n := range cur[:k] {
			sum += touch(n)
		}
		runtime.KeepAlive(sum) // keeps touch's loads
		for j, n := range cur[:k] {
			i := lane[j]
			valAt[j], kidAt[j] = nil, nil
			if n.isLeaf() {
				if n.leafCovers4(&addrs[i]) {
					vals[i], oks[i] = n.leafVal, true
				}
				continue
			}
			b := addrs[i][depth]
			if len(n.vals) != 0 {
				if x := n.longest(b); x != 0 {
					valAt[j] = &n.vals[n.pfxRank(x)]
				}
			}
			if n.kids[b>>6]&(1<<(b&63)) != 0 {
				kidAt[j] = n.children[n.kidRank(b)]
			}
		}
		live := 0
		for j := range k {
			i := lane[j]
			if p := valAt[j]; p != nil {
				vals[i], oks[i] = *p, true
			}
			if c := kidAt[j]; c != nil {
				cur[live], lane[live] = c, i
				live++
			}
		}
		k = live
	}
	copyDups(dups, vals, oks)
}

// copyDups gives each lane in dups the previous lane's answer. A burst
// of one flow (a TSO train, a bulk transfer) is runs of one destination;
// its lanes after the first skip the walk, as Linux's GRO makes one route
// lookup per aggregated packet.
func copyDups(dups uint64, vals []uint32, oks []bool) {
	for ; dups != 0; dups &= dups - 1 {
		i := bits.TrailingZeros64(dups)
		if i > 0 && i < len(vals) && i < len(oks) {
			vals[i], oks[i] = vals[i-1], oks[i-1]
		}
	}
}

// lookupBatch finishes up to batchWidth lookups level by level. Each
// level takes two rounds of loads, each issued for every lane before any
// is used: the node headers, then the value and child the headers point
// to. A loop over single lookups would wait for each of those misses in
// turn; here a level costs about two memory latencies for the whole batch.
// As in V4's, lanes still walking are packed at the front of cur, so each
// level's loops run over those lanes only (a run of one destination walks
// one lane, not 64).
func (t *V6) lookupBatch(addrs [][16]byte, vals []uint32, oks []bool) {
	var cur [batchWidth]*node
	var lane [batchWidth]uint8 // cur[j] walks for addrs[lane[j]]
	vals, oks = vals[:len(addrs)], oks[:len(addrs)]
	k := 0
	var dups uint64 // lanes whose address is the previous lane's
	for i := range addrs {
		vals[i], oks[i] = 0, false
		if i > 0 && addrs[i] == addrs[i-1] {
			dups |= 1 << (i & 63)
			continue
		}
		cur[k&(batchWidth-1)], lane[k&(batchWidth-1)] = t.root, uint8(i)
		k++
	}
	var valAt [batchWidth]*uint32
	var kidAt [batchWidth]*node
	for depth := 0; k > 0; depth++ {
		var sum uint64
		for _, n := range cur[:k] {
			sum += touch(n)
		}
		runtime.KeepAlive(sum) // keeps touch's loads
		for j, n := range cur[:k] {
			a := &addrs[lane[j]]
			valAt[j], kidAt[j] = nil, nil
			if n.isLeaf() {
				if n.leafCovers(a[:]) {
					vals[lane[j]], oks[lane[j]] = n.leafVal, true
				}
				continue
			}
			b := a[depth]
			if len(n.vals) != 0 {
				if x := n.longest(b); x != 0 {
					valAt[j] = &n.vals[n.pfxRank(x)]
				}
			}
			if n.kids[b>>6]&(1<<(b&63)) != 0 {
				kidAt[j] = n.children[n.kidRank(b)]
			}
		}
		live := 0
		for j := range k {
			i := lane[j]
			if p := valAt[j]; p != nil {
				vals[i], oks[i] = *p, true
			}
			if c := kidAt[j]; c != nil {
				cur[live], lane[live] = c, i
				live++
			}
		}
		k = live
	}
	copyDups(dups, vals, oks)
}

// LookupBatch does Lookup for every addrs[i], storing the results in
// vals[i] and oks[i] (both at least len(addrs) long). It walks up to 64
// lookups level by level so that their memory accesses overlap; with a
// large table and scattered destinations this is several times faster per
// address than a loop over Lookup. It neither allocates nor locks.
func (t *V4) LookupBatch(addrs [][4]byte, vals []uint32, oks []bool) {
	vals, oks = vals[:len(addrs)], oks[:len(addrs)]
	if t == nil || t.top == nil {
		clear(vals)
		clear(oks)
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
	if t == nil || t.root == nil {
		clear(vals)
		clear(oks)
		return
	}
	for len(addrs) > 0 {
		k := min(len(addrs), batchWidth)
		t.lookupBatch(addrs[:k], vals[:k], oks[:k])
		addrs, vals, oks = addrs[k:], vals[k:], oks[k:]
	}
}
