package lpm

import "net/netip"

// V6 maps IPv6 prefixes to uint32 values. See the package doc for the
// threading contract; a nil *V6 is an empty table.
type V6 struct {
	root *node
	n    int
}

// v6Key returns p's masked address and length, or ok=false when p is not a
// valid IPv6 prefix. IPv4-mapped prefixes (::ffff:0:0/96 and below) are
// ordinary IPv6 prefixes here.
func v6Key(p netip.Prefix) (addr [16]byte, plen int, ok bool) {
	if !p.IsValid() || !p.Addr().Is6() {
		return addr, 0, false
	}
	return p.Masked().Addr().As16(), p.Bits(), true
}

// Lookup returns the value of the longest prefix that contains addr.
// It neither allocates nor locks.
func (t *V6) Lookup(addr [16]byte) (val uint32, ok bool) {
	if t == nil || t.root == nil {
		return 0, false
	}
	return lookup(t.root, addr[:])
}

// Insert returns a table in which p (masked to its length) maps to val,
// replacing any earlier value. t is unchanged. An invalid or non-IPv6 p
// leaves the table as it is (the result is t).
func (t *V6) Insert(p netip.Prefix, val uint32) *V6 {
	a, l, ok := v6Key(p)
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
	return &V6{root: r, n: n}
}

// Delete returns a table without p. t is unchanged; when p is absent (or
// not an IPv6 prefix) the result is t itself.
func (t *V6) Delete(p netip.Prefix) *V6 {
	a, l, ok := v6Key(p)
	if !ok || t == nil {
		return t
	}
	r, removed := remove(t.root, a[:], l, 0, false)
	if !removed {
		return t
	}
	return &V6{root: r, n: t.n - 1}
}

// Get returns the value stored for exactly p.
func (t *V6) Get(p netip.Prefix) (uint32, bool) {
	a, l, ok := v6Key(p)
	if !ok || t == nil || t.root == nil {
		return 0, false
	}
	return get(t.root, a[:], l)
}

// Len returns the number of prefixes in the table.
func (t *V6) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// Walk calls fn for every prefix in the table until fn returns false. The
// order is deterministic: a prefix comes before the longer prefixes below
// it, and siblings come in address order within each 8-bit stride.
func (t *V6) Walk(fn func(netip.Prefix, uint32) bool) {
	if t == nil || t.root == nil {
		return
	}
	var path [16]byte
	walk(t.root, path[:], 0, func(p []byte, plen int, v uint32) bool {
		return fn(netip.PrefixFrom(netip.AddrFrom16([16]byte(p)), plen), v)
	})
}

// V6Builder makes a V6 from many prefixes faster than repeated Insert: it
// modifies its private nodes in place. The zero value is ready to use; one
// goroutine owns a builder.
type V6Builder struct {
	root *node
	n    int
}

// Add maps p to v; a later Add of the same prefix wins. Invalid and
// non-IPv6 prefixes are ignored.
func (b *V6Builder) Add(p netip.Prefix, v uint32) {
	a, l, ok := v6Key(p)
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
func (b *V6Builder) Build() *V6 {
	compact(b.root)
	t := &V6{root: b.root, n: b.n}
	*b = V6Builder{}
	return t
}
