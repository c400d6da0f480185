package dp

import "unsafe"

// Fixed-size views of ring slots and buffer lines, so the per-packet code
// reads and writes them with constant offsets and no bounds checks.
//
// Invariants (established by the constructors, which check ring lengths):
//   - a CQ ring holds mask+1 slots of CQESize bytes (checkPow2Ring checks
//     the length), so slot i&mask is inside it;
//   - an SQ ring holds mask+1 basic blocks of SendWQEBBSize bytes; callers pass
//     a byte offset below (mask+1)·SendWQEBBSize minus the view's size (a WQE
//     never crosses the ring end: sessions and SENDs are cut at fragment
//     edges and the ring end is one);
//   - a pool's pages are whole PageSize pages and a stride (at most PageSize,
//     a power of two) never spans two of them, so a stride-sized view at the
//     stride's start stays inside its page; a decoded packet's stride
//     pointer comes from a WQE and stride index checked against the RQ, and
//     its shinfo record lies inside the stride (NewRxQueue checks headroom +
//     frame + ShinfoSize ≤ stride, decoding drops longer frames).
// Ring and buffer memory is pinned DMA memory (VFIO hugepages, the model's
// mmap) or, in tests, heap slices the queue keeps referenced; the pointers
// here are kept as unsafe.Pointer so the collector sees them either way.

// cqeAt is CQE slot i (already masked: i ≤ mask) of the CQ ring at ring.
func cqeAt(ring unsafePointer, i uint32) *[CQESize]byte {
	return (*[CQESize]byte)(unsafe.Add(ring.p, uintptr(i)*CQESize))
}

// cqeNext is the CQE k slots after first (first's slot + k ≤ mask: the
// caller stops at the ring end).
func cqeNext(first *[CQESize]byte, k int) *[CQESize]byte {
	return (*[CQESize]byte)(unsafe.Add(unsafe.Pointer(first), uintptr(k)*CQESize))
}

// recAt is &recs[w] for w < len(recs) (the caller checked w < nWQE =
// len(recs)), without a second bounds check.
func recAt(recs []wqeRec, w uint32) *wqeRec {
	return (*wqeRec)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(recs)), uintptr(w)*unsafe.Sizeof(wqeRec{})))
}

// dsAt is the 16-byte segment at byte offset o of an SQ ring.
func dsAt(ring unsafePointer, o uint32) *[DSSize]byte {
	return (*[DSSize]byte)(unsafe.Add(ring.p, o))
}

// dsNext is the segment k segments after d, inside the same WQE session.
func dsNext(d *[DSSize]byte, k int) *[DSSize]byte {
	return (*[DSSize]byte)(unsafe.Add(unsafe.Pointer(d), uintptr(k)*DSSize))
}

// fifoSet stores fifo[i] for an i already masked with len(fifo)−1.
func fifoSet(fifo []uint32, i uint32, e uint32) {
	*(*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(fifo)), uintptr(i)*4)) = e
}

// fifoGet loads fifo[i] for an i already masked with len(fifo)−1.
func fifoGet(fifo []uint32, i uint32) uint32 {
	return *(*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(fifo)), uintptr(i)*4))
}

// unsafePointer is a pointer to ring or buffer memory held by the
// per-packet structures (the TX ring, a decoded packet's stride).
type unsafePointer struct{ p unsafe.Pointer }

// stride is the size bytes at p (a stride start) as a slice. Through
// unsafe.Slice, not a *[PageSize]byte view: slicing the view costs a nil
// check that loads the stride's first line, a miss per packet on flushed
// buffers (the frame starts at the headroom, further in).
func (p unsafePointer) stride(size uint32) []byte { return unsafe.Slice((*byte)(p.p), size) }

func ptrOf(b []byte) unsafePointer { return unsafePointer{unsafe.Pointer(unsafe.SliceData(b))} }

// pagePtrs are the host pages of a buffer window, by IOVA order.
type pagePtrs []unsafePointer

func pagePtrsOf(pages [][]byte) pagePtrs {
	pp := make(pagePtrs, len(pages))
	for i, pg := range pages {
		pp[i] = ptrOf(pg)
	}
	return pp
}

// stride is the buffer at byte offset o of the window (a stride start) as
// a slice of size bytes.
func (pp pagePtrs) stride(o uint32, size uint32) []byte { return pp.at(o).stride(size) }

// at is the address of byte o of the window.
func (pp pagePtrs) at(o uint32) unsafePointer {
	return unsafePointer{unsafe.Add(pp[o/PageSize].p, o%PageSize)}
}

// atUnchecked is at for an o the caller proved inside the window (a
// stride of a checked WQE and stride index, or a buffer index below
// rxBufs or accepted by Pool.lookup: o < handles() << logStride, and
// newPool checked the window's pages hold that many bytes).
func (pp pagePtrs) atUnchecked(o uint32) unsafePointer {
	pg := *(*unsafePointer)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(pp)), uintptr(o/PageSize)*unsafe.Sizeof(unsafePointer{})))
	return unsafePointer{unsafe.Add(pg.p, o%PageSize)}
}

// etherType is the big-endian 16-bit word at byte 12 of the frame at
// offset data of the stride at p (data + 14 ≤ stride: decoding checked the
// length, the headroom is inside the stride).
func etherType(p unsafePointer, data uint32) uint16 {
	h := (*[14]byte)(unsafe.Add(p.p, data))
	return uint16(h[12])<<8 | uint16(h[13])
}
