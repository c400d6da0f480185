package nat

import (
	"encoding/binary"
	"math/bits"
)

// Warming. With many sessions each lookup is a cache miss or two;
// Prefetch and Touch let the worker take a received batch's misses
// together (the loads of different packets are independent, so they
// overlap) before it translates the packets one by one, as the FIB lookup
// does (fwd/lpm): Prefetch hashes and starts the index line's load as each
// packet is parsed, Touch finds each record by the hash tags in those
// lines and starts the record's, and OutHint's fast path then finds both
// in the cache.

// Kinds of a Prefetch hint.
const (
	probeSess = 1 << 62
	probeMap  = 1 << 63
	probeDone = 1 << 61 // Touch looked: the low 32 bits are the record id + 1, or 0 for none
)

// Prefetch returns the hash a packet's lookup will start from, tagged
// with its kind (0 when NAT would not look), and starts loading the index
// slot it names without waiting for it: the worker calls it as it parses
// each packet of a batch, and the line arrives while it parses the next.
// A record a few slots on is on the same cache line, or the next one,
// which Touch then reads.
func (t *Table) Prefetch(pkt []byte, l4 int) uint64 {
	if t.k == nil || l4 != ipv4MinHdrLen || len(pkt) < PrefetchLen {
		return 0
	}
	return t.PrefetchIP((*[PrefetchLen]byte)(pkt))
}

// PrefetchLen is what PrefetchIP reads of a packet: an option-less IPv4
// header and the first four bytes (the ports) of its transport header.
const PrefetchLen = ipv4MinHdrLen + 4

// PrefetchIP is Prefetch for a parsed IPv4 packet with a transport header
// (a TCP or UDP one has at least PrefetchLen bytes from the IP header),
// which it takes to be option-less, the ports at byte 20 (outFast
// translates only those; a header with options gets a hint by its
// options' bytes, a prefetch wasted and a hint that names no session).
func (t *Table) PrefetchIP(h *[PrefetchLen]byte) uint64 {
	proto := h[9]
	addrs := le.Uint64(h[12:])
	if uint32(addrs)&t.src0.mask == t.src0.addr && (proto == protoTCP || proto == protoUDP) { // the common packet: no loop
		v := t.hashWire(addrs, le.Uint32(h[ipv4MinHdrLen:]), proto)
		prefetchSlot(&t.sidx.s[v&t.sidx.mask])
		return uint64(v) | probeSess
	}
	return prefetchRest(t, h)
}

// prefetchRest is PrefetchIP past its first test (a function:
// PrefetchIPv4, in assembly, jumps to it).
func prefetchRest(t *Table, h *[PrefetchLen]byte) uint64 {
	proto := h[9]
	addrs := le.Uint64(h[12:])
	ports := le.Uint32(h[ipv4MinHdrLen:])
	if t.k == nil || proto != protoTCP && proto != protoUDP {
		return 0
	}
	if t.inside(uint32(addrs)) {
		v := t.hashWire(addrs, ports, proto)
		prefetchSlot(&t.sidx.s[v&t.sidx.mask])
		return uint64(v) | probeSess
	}
	if dst := binary.BigEndian.Uint32(h[16:]); t.k.outsideIndex(dst) >= 0 {
		v := hashO(okey{dst, bits.ReverseBytes16(uint16(ports >> 16)), proto})
		prefetchSlot(&t.oidx.s[v&t.oidx.mask])
		return uint64(v) | probeMap
	}
	return 0
}

// inside reports whether src (wire order) is in a rule's source prefixes.
func (t *Table) inside(src uint32) bool {
	for _, p := range t.srcs {
		if src&p.mask == p.addr {
			return true
		}
	}
	return false
}

// Touch finds each probe's record by the hash tags in its (loaded) index
// slots, reads the record and leaves its id + 1 in hs (kind kept,
// probeDone set). A tag match whose record turns out to hold another key
// is checked by the translation, which then looks again.
func (t *Table) Touch(hs []uint64) {
	maps := len(hs)
	if len(t.sidx.s) != 0 && len(t.sess) != 0 {
		maps = touchSessions(t.sidx.s, t.sidx.mask, t.sess, hs)
	}
	if maps == 0 {
		return
	}
	var sink uint32
	for i, h := range hs {
		switch {
		case h&probeDone != 0:
		case h&probeSess != 0: // no session table
			hs[i] = probeSess | probeDone
		case h&probeMap != 0:
			id := t.oidx.tagged(uint32(h))
			if id != 0 && int(id) <= len(t.maps) {
				sink += t.maps[id-1].refs
			}
			hs[i] = uint64(id) | probeMap | probeDone
		}
	}
	t.sink += sink
}

// touchSessionsGo is touchSessions' definition (and its body where there
// is no assembly version), without the prefetches. len(idx) is mask+1.
func touchSessionsGo(idx []uint64, mask uint32, sess []session, hs []uint64) (maps int) {
	for i, h := range hs {
		switch {
		case h&probeSess != 0:
			hs[i] = uint64(tagged(idx, mask, uint32(h))) | probeSess | probeDone
		case h&probeMap != 0:
			maps++
		}
	}
	return maps
}
