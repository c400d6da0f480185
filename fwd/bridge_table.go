package fwd

import "sync/atomic"

// macTable is the bridge's forwarding database, shared by all workers.
//
// Why shared and lock-free rather than per worker: RSS hashes the two
// directions of a conversation to different queues, so a table owned by one
// worker would never learn the MACs the other direction needs and would
// flood forever. Why not learned through a ring to the control plane: it
// would flood until the next publish and republish a big table per new MAC.
//
// So the table is a fixed-size open-addressing array of two atomic words per
// slot, written by any worker with compare-and-swap, never resized, never
// locked:
//
//	key   = 1<<63 | vlan<<48 | mac   (0: empty slot; a claimed key is never freed)
//	value = port<<48 | tag<<32 | lastSeen seconds
//
// tag is a second hash of the key. A reader accepts a value only when its
// tag matches, so a slot recycled for another key (after aging) can at worst
// make one reader miss and flood, never forward to the wrong port. Workers
// write a slot's value only when the port or the second changes, so steady
// traffic reads its line without bouncing it between cores.
type macTable struct {
	slots []macSlot
	mask  uint64
	aging uint32 // seconds
	// changes counts keys claimed and ports changed (not refreshes), so
	// the control plane mirrors the table only when it moved
	// (Engine.FastBridgeGen); on its own cache line, away from what every
	// lookup reads.
	_       [64]byte
	changes atomic.Uint64
	_       [56]byte
}

type macSlot struct {
	key   atomic.Uint64
	value atomic.Uint64
}

// macProbe bounds a probe sequence; past it a MAC is not learned (flooded).
const macProbe = 8

func newMACTable(size int, agingSec uint32) *macTable {
	n := 64
	for n < size {
		n <<= 1
	}
	return &macTable{slots: make([]macSlot, n), mask: uint64(n - 1), aging: agingSec}
}

func macKey(vlan uint16, mac []byte) uint64 {
	_ = mac[5]
	return 1<<63 | uint64(vlan&0xfff)<<48 | uint64(mac[0])<<40 | uint64(mac[1])<<32 |
		uint64(mac[2])<<24 | uint64(mac[3])<<16 | uint64(mac[4])<<8 | uint64(mac[5])
}

func macHash(key uint64) (slot uint64, tag uint64) {
	h := key * 0x9e3779b97f4a7c15
	return h >> 20, (h>>4)&0xffff | 1 // tag 0 is reserved for "being recycled"
}

// lookup returns the port the key was last seen on, if not aged out.
func (t *macTable) lookup(key uint64, now uint32) (port uint16, ok bool) {
	h, tag := macHash(key)
	for i := range uint64(macProbe) {
		s := &t.slots[(h+i)&t.mask]
		k := s.key.Load()
		if k == 0 {
			return 0, false
		}
		if k != key {
			continue
		}
		v := s.value.Load()
		if v>>32&0xffff != tag || now-uint32(v) > t.aging {
			return 0, false
		}
		return uint16(v >> 48), true
	}
	return 0, false
}

// learn records that key was seen on port at now. It reports false when no
// slot was free within the probe bound.
func (t *macTable) learn(key uint64, port uint16, now uint32) bool {
	h, tag := macHash(key)
	val := uint64(port)<<48 | tag<<32 | uint64(now)
	var stale *macSlot
	for i := range uint64(macProbe) {
		s := &t.slots[(h+i)&t.mask]
		k := s.key.Load()
		if k == 0 && s.key.CompareAndSwap(0, key) {
			s.value.Store(val)
			t.changes.Add(1)
			return true
		}
		k = s.key.Load()
		if k == key {
			if old := s.value.Load(); old != val {
				s.value.Store(val)
				if uint16(old>>48) != port {
					t.changes.Add(1)
				}
			}
			return true
		}
		if stale == nil && now-uint32(s.value.Load()) > t.aging {
			stale = s
		}
	}
	if stale == nil {
		return false
	}
	// Recycle an aged slot. Value first with a tag that matches no key
	// (readers of the old key then miss), then the key, then the real value.
	stale.value.Store(0)
	stale.key.Store(key)
	stale.value.Store(val)
	t.changes.Add(1)
	return true
}
