package dp

import (
	"sync/atomic"
	"unsafe"
)

// Invariant for every function here: the slices point into DMA memory that is
// pinned for the life of the queue (hugepages from VFIO, or mmap'd memory in
// the model), never into the movable Go heap, so an address taken once stays
// valid; and every offset used is 4-byte aligned inside the slice, which the
// callers guarantee by construction (CQEs are 64-byte aligned, doorbell
// records 8-byte aligned).

// addrOf returns the address of b[0]. Used only to precompute prefetch
// targets of pinned DMA pages.
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// loadOwnerWord atomically loads CQE bytes 60..63 as a little-endian word
// (bits 0..15 wqe_counter as stored, 16..23 signature or
// validity_iteration_count, 24..31 op_own), so the owner check happens
// before any other CQE byte is read.
func loadOwnerWord(cqe *[CQESize]byte) uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&cqe[CQEOffWQECounter])))
}

// storeBE32 publishes a big-endian doorbell-record value with an atomic store,
// ordered after all earlier stores (WQEs, CQE owner fix-ups).
func storeBE32(b []byte, v uint32) {
	b = b[:4] // bounds check without a plain read
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[0])), bswap32(v))
}

func bswap32(v uint32) uint32 {
	return v>>24 | (v>>8)&0xFF00 | (v<<8)&0xFF0000 | v<<24
}
