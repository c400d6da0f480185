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

// dmaWrite copies src to the start of dst as a device without DDIO writes:
// the bytes reach memory without allocating their lines in the CPU's
// caches (a cached copy is evicted), so the model's write does not push
// the driver's own lines out of L1/L2 as a CPU copy would. The last
// len(src)%8 bytes are copied normally (the caller flushes their line).
// Invariant: dst is model DMA memory (mmap'd, never moved) holding at
// least len(src) bytes; src is a heap slice (a frame the model was handed
// or its own buffer), so neither moves during the call.
func dmaWrite(dst, src []byte) {
	dst = dst[:len(src)]
	w := 0
	if canFlush {
		w = len(src) &^ 7
		if w > 0 {
			ntCopy(uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(w))
		}
	}
	copy(dst[w:], src[w:])
}
