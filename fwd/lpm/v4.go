package lpm

import "net/netip"

// V4 maps IPv4 prefixes to uint32 values. See the package doc for the
// threading contract; a nil *V4 is an empty table.
type V4 struct {
	root *node
	top  *top // first level, derived from root; nil when root is nil
	n    int
}

// v4Key returns p's masked address and length, or ok=false when p is not a
// valid IPv4 prefix (IPv4-mapped IPv6 prefixes are not IPv4 prefixes).
func v4Key(p netip.Prefix) (addr [4]byte, plen int, ok bool) {
	if !p.IsValid() || !p.Addr().Is4() {
		return addr, 0, false
	}
	return p.Masked().Addr().As4(), p.Bits(), true
}

// Lookup returns the value of the longest prefix that contains addr.
// It neither allocates nor locks.
func (t *V4) Lookup(addr [4]byte) (val uint32, ok bool) {
	if t == nil || t.top == nil {
		return 0, false
	}
	return lookupTop(t.top, addr)
}

// Insert returns a table in which p (masked to its length) maps to val,
// replacing any earlier value. t is unchanged. An invalid or non-IPv4 p
// leaves the table as it is (the result is t).
func (t *V4) Insert(p netip.Prefix, val uint32) *V4 {
	a, l, ok := v4Key(p)
	if !ok {
		return t
	}
	var root *node
	n := 0
	if t != nil {
		root, n = t.root, t.n
	}
	r, added := insert(root, a[:], l, 0, val, false)
	if r == root {
		return t
	}
	if added {
		n++
	}
	return &V4{root: r, top: t.nextTop(root, r, a, l), n: n}
}

// Delete returns a table without p. t is unchanged; when p is absent (or
// not an IPv4 prefix) the result is t itself.
func (t *V4) Delete(p netip.Prefix) *V4 {
	a, l, ok := v4Key(p)
	if !ok || t == nil {
		return t
	}
	r, removed := remove(t.root, a[:], l, 0, false)
	if !removed {
		return t
	}
	if r == nil {
		return &V4{}
	}
	return &V4{root: r, top: t.nextTop(t.root, r, a, l), n: t.n - 1}
}

// Get returns the value stored for exactly p.
func (t *V4) Get(p netip.Prefix) (uint32, bool) {
	a, l, ok := v4Key(p)
	if !ok || t == nil || t.root == nil {
		return 0, false
	}
	return get(t.root, a[:], l)
}

// Len returns the number of prefixes in the table.
func (t *V4) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// Walk calls fn for every prefix in the table until fn returns false. The
// order is deterministic: a prefix comes before the longer prefixes below
// it, and siblings come in address order within each 8-bit stride.
func (t *V4) Walk(fn func(netip.Prefix, uint32) bool) {
	if t == nil || t.root == nil {
		return
	}
	var path [4]byte
	walk(t.root, path[:], 0, func(p []byte, plen int, v uint32) bool {
		return fn(netip.PrefixFrom(netip.AddrFrom4([4]byte(p)), plen), v)
	})
}

// V4Builder makes a V4 from many prefixes faster than repeated Insert: it
// modifies its private nodes in place. The zero value is ready to use; one
// goroutine owns a builder.
type V4Builder struct {
	root *node
	n    int
}

// Add maps p to v; a later Add of the same prefix wins. Invalid and
// non-IPv4 prefixes are ignored.
func (b *V4Builder) Add(p netip.Prefix, v uint32) {
	a, l, ok := v4Key(p)
	if !ok {
		return
	}
	var added bool
	b.root, added = insert(b.root, a[:], l, 0, v, true)
	if added {
		b.n++
	}
}

// Build returns the table and resets the builder, so later Adds cannot
// modify the published table.
func (b *V4Builder) Build() *V4 {
	compact(b.root)
	t := &V4{root: b.root, n: b.n}
	if t.root != nil {
		t.top = buildTop(t.root)
	}
	*b = V4Builder{}
	return t
}

// nextTop is the first level of the table that changing a/l in t (whose
// trie is under oldRoot) made into the trie under root.
func (t *V4) nextTop(oldRoot, root *node, a [4]byte, l int) *top {
	if t == nil || t.top == nil {
		return buildTop(root)
	}
	return updateTop(t.top, oldRoot, root, a, l)
}
