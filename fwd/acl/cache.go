package acl

import (
	"encoding/binary"
	"math/bits"
)

// Cache remembers the decisions of one worker's recent packets by their
// exact key (list, addresses, protocol, ports or ICMP type, TCP flags):
// the packets of a flow after its first cost a hash and a compare, not
// the searches. A memo, not state: it holds what Match would answer, so
// it changes no decision, and it is emptied when the rules change.
// Direct-mapped; a collision replaces the older entry. Not for
// concurrent use.
type Cache struct {
	rules *Rules
	ents  []cacheEnt
	shift uint8
	// Hits and Misses count lookups.
	Hits, Misses uint64
}

type cacheEnt struct {
	src, dst [16]byte // IPv4: the first 4 bytes
	meta     uint64   // cacheMeta; 0: empty
	id       int32
	act      Action
}

// CacheEntries is a Cache's size: about 48 KiB a worker.
const CacheEntries = 1024

// Reset empties c for rules r (allocating its entries the first time).
func (c *Cache) Reset(r *Rules) {
	c.rules = r
	if c.ents == nil {
		c.ents = make([]cacheEnt, CacheEntries)
		c.shift = uint8(64 - bits.TrailingZeros(CacheEntries))
	} else {
		clear(c.ents)
	}
}

// cacheMeta packs a key's small fields, with bit 63 set so that an empty
// entry (meta 0) matches nothing.
func cacheMeta(li int, v6, l4 bool, proto uint8, sport, dport uint16, flags uint8) uint64 {
	m := 1<<63 | uint64(li&0x7fff)<<48 | uint64(flags&0x3f)<<40 | uint64(proto)<<32 | uint64(sport)<<16 | uint64(dport)
	if v6 {
		m |= 1 << 47
	}
	if l4 {
		m |= 1 << 46
	}
	return m
}

func (c *Cache) slot(meta, a, b uint64) *cacheEnt {
	h := (meta ^ bits.RotateLeft64(a, 17) ^ b) * 0x9e3779b97f4a7c15
	return &c.ents[h>>c.shift&(CacheEntries-1)]
}

// Match4 is Rules.Match4 through the cache (c reset for those rules).
func (c *Cache) Match4(li int, src, dst uint32, proto uint8, l4 bool, sport, dport uint16, flags uint8) (Action, int) {
	meta := cacheMeta(li, false, l4, proto, sport, dport, flags)
	e := c.slot(meta, uint64(src)<<32|uint64(dst), 0)
	var s, d [16]byte
	binary.BigEndian.PutUint32(s[:], src)
	binary.BigEndian.PutUint32(d[:], dst)
	if e.meta == meta && e.src == s && e.dst == d {
		c.Hits++
		return e.act, int(e.id)
	}
	c.Misses++
	act, id := c.rules.Match4(li, src, dst, proto, l4, sport, dport, flags)
	*e = cacheEnt{src: s, dst: d, meta: meta, id: int32(id), act: act}
	return act, id
}

// Match6 is Rules.Match6 through the cache.
func (c *Cache) Match6(li int, src, dst *[16]byte, proto uint8, l4 bool, sport, dport uint16, flags uint8) (Action, int) {
	meta := cacheMeta(li, true, l4, proto, sport, dport, flags)
	e := c.slot(meta, binary.LittleEndian.Uint64(src[8:])^binary.LittleEndian.Uint64(src[:8]),
		binary.LittleEndian.Uint64(dst[8:])^bits.RotateLeft64(binary.LittleEndian.Uint64(dst[:8]), 31))
	if e.meta == meta && e.src == *src && e.dst == *dst {
		c.Hits++
		return e.act, int(e.id)
	}
	c.Misses++
	act, id := c.rules.Match6(li, src, dst, proto, l4, sport, dport, flags)
	*e = cacheEnt{src: *src, dst: *dst, meta: meta, id: int32(id), act: act}
	return act, id
}
