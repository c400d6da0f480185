package dpsim

import "unsafe"

// flushBytes evicts the cache lines of b. Invariant: b is model DMA memory
// (mmap'd, never moved), and CLFLUSHOPT of a mapped address cannot fault.
func flushBytes(b []byte) {
	if len(b) == 0 || !canFlush {
		return
	}
	flushRange(uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
}
