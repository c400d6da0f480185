package dpsim

import (
	"sync/atomic"
	"unsafe"
)

// The model and the driver share DMA memory across goroutines (a wire or a
// test may inject while a worker polls). The driver reads CQE bytes 60..63
// and writes doorbell records with atomic 32-bit operations; the model
// mirrors them here, so the owner word is the one synchronising store and
// the race detector sees the same happens-before edges a NIC's ordered DMA
// gives. Invariant: every slice passed here is pinned model DMA memory and
// its first byte is 4-byte aligned (CQEs are 64-byte aligned, doorbell
// records 8-byte aligned by construction).

// loadBE32 atomically loads a big-endian doorbell-record word.
func loadBE32(b []byte) uint32 {
	b = b[:4] // bounds check without a plain read
	v := atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[0])))
	return v>>24 | (v>>8)&0xFF00 | (v<<8)&0xFF0000 | v<<24
}

// publishOwnerWord writes CQE bytes 60..63 (wqe_counter, signature, op_own)
// in one atomic store, after every other byte of the CQE was written.
func publishOwnerWord(cqe []byte, wqeCounter0, wqeCounter1, signature, opOwn uint8) {
	cqe = cqe[:64] // bounds check without a plain read
	w := uint32(wqeCounter0) | uint32(wqeCounter1)<<8 | uint32(signature)<<16 | uint32(opOwn)<<24
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&cqe[60])), w)
}
