package sim

import (
	"sync/atomic"
	"unsafe"
)

// storeEQEOwner writes an EQE's last word (bytes 60..63, the owner in byte
// 63) in one atomic store after the rest of the entry: the driver loads the
// owner atomically, so a service goroutine polling the EQ while a test
// posts events sees the entry only once it is whole, as with a NIC's
// ordered DMA. Invariant: e is model DMA memory and 64-byte aligned (EQ
// buffers are page aligned), so &e[60] is 4-byte aligned.
func storeEQEOwner(e []byte, owner uint8) {
	e = e[:64]
	w := uint32(e[60]) | uint32(e[61])<<8 | uint32(e[62])<<16 | uint32(owner)<<24
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&e[60])), w)
}
