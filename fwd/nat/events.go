package nat

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
)

// Event reports a port block given to or taken back from a client: one log
// line each, which is what an operator needs to answer an abuse report
// (who had outside address:port at time T) without per-flow logs.
type Event struct {
	Alloc   bool
	Inside  netip.Addr // the client's inside (pool) address
	Rule    int
	Outside netip.Addr
	PortLo  uint16
	PortHi  uint16
	Time    uint32 // engine clock, seconds
}

// eventSlots bounds a worker's event ring. A block is not handed out when
// its log line has no room (counted as no_port and events_lost), and a
// block is not taken back until its line fits, so the log never misses a
// block that moved.
const eventSlots = 4096

type rawEvent struct {
	alloc  bool
	rule   uint8
	inside uint32
	out    uint32
	lo, hi uint16
	time   uint32
}

// ring is a single-producer (the worker) single-consumer (the control
// plane) ring of events.
type ring struct {
	slots []rawEvent
	mask  uint64
	head  atomic.Uint64
	_     [56]byte
	tail  atomic.Uint64
}

func newRing(n int) *ring { return &ring{slots: make([]rawEvent, n), mask: uint64(n - 1)} }

// emit queues a block's log line; false when the ring is full. The
// caller decides what that costs: an allocation is refused (counted as
// lost), a release waits for room (not lost: logged when it happens).
func (t *Table) emit(alloc bool, c *client, oi int, b uint16) bool {
	r := t.events
	tail := r.tail.Load()
	if tail-r.head.Load() > r.mask {
		return false
	}
	o := &t.k.out[oi]
	lo := uint32(o.lo) + uint32(b)*uint32(t.k.cfg.BlockSize)
	hi := min(lo+uint32(t.k.cfg.BlockSize)-1, uint32(o.hi))
	r.slots[tail&r.mask] = rawEvent{alloc: alloc, rule: c.k.rule, inside: c.k.addr, out: o.addr, lo: uint16(lo), hi: uint16(hi), time: t.now}
	r.tail.Store(tail + 1)
	return true
}

// Events calls fn for each event since the last call; one consumer at a
// time (the control plane).
func (t *Table) Events(fn func(Event)) int {
	r := t.events
	h, end := r.head.Load(), r.tail.Load()
	for i := h; i < end; i++ {
		e := &r.slots[i&r.mask]
		var in, out [4]byte
		binary.BigEndian.PutUint32(in[:], e.inside)
		binary.BigEndian.PutUint32(out[:], e.out)
		fn(Event{Alloc: e.alloc, Inside: netip.AddrFrom4(in), Rule: int(e.rule), Outside: netip.AddrFrom4(out),
			PortLo: e.lo, PortHi: e.hi, Time: e.time})
	}
	r.head.Store(end)
	return int(end - h)
}
