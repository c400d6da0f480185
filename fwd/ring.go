package fwd

import (
	"sync/atomic"

	"github.com/ovfwd/ovfwd/fwd/internal/anonmem"
)

// spscRing is a bounded single-producer single-consumer ring: a worker
// produces, the control plane consumes (under the engine's control lock, so
// many control goroutines count as one consumer). Put never blocks; a full
// ring refuses and the producer counts the drop.
type spscRing[T any] struct {
	slots []T
	mask  uint64
	head  atomic.Uint64 // next slot to read; written by the consumer
	_     [56]byte      // keep producer and consumer indices on separate cache lines
	tail  atomic.Uint64 // next slot to write; written by the producer
}

// offHeapMin is the ring size from which the slots live off the Go heap.
const offHeapMin = 64 << 10

func newSPSCRing[T any](size int) *spscRing[T] {
	n := 1
	for n < size {
		n <<= 1
	}
	r := &spscRing[T]{mask: uint64(n - 1)}
	// Frame rings (punt, inject, uplink, NAT hand-off: 2 KiB a slot,
	// about 7 MiB a worker) are allocated whole at start and mostly never
	// written: on the Go heap they counted as live data, and the collector
	// lets the heap grow to twice that (GOGC=100), so any sustained garbage
	// (a neighbour storm's control plane) made up to 7 MiB more of it
	// resident. Off the heap the kernel backs only the pages a ring used.
	if anonmem.Size[T](n) >= offHeapMin {
		r.slots = anonmem.Slice[T](r, n, false)
	}
	if r.slots == nil {
		r.slots = make([]T, n)
	}
	return r
}

// slot returns the next free slot for the producer to fill in place, or nil
// when the ring is full. publish makes it visible.
func (r *spscRing[T]) slot() *T {
	t := r.tail.Load()
	if t-r.head.Load() > r.mask {
		return nil
	}
	return &r.slots[t&r.mask]
}

func (r *spscRing[T]) publish() { r.tail.Add(1) }

// drain calls fn for every published slot and frees them.
func (r *spscRing[T]) drain(fn func(*T)) int {
	h, t := r.head.Load(), r.tail.Load()
	for i := h; i < t; i++ {
		fn(&r.slots[i&r.mask])
	}
	r.head.Store(t)
	return int(t - h)
}
