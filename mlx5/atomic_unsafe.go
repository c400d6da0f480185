package mlx5

import "unsafe"

// word returns the aligned 32-bit word holding *b and the shift of b inside
// it (little-endian host: amd64, arm64). Invariant: callers pass bytes of
// DMA buffers that start at least 4-byte aligned (all of ours start on a
// page), so the aligned word lies inside the same buffer.
func word(b *byte) (*uint32, uint) {
	off := uintptr(unsafe.Pointer(b)) & 3
	return (*uint32)(unsafe.Add(unsafe.Pointer(b), -int(off))), uint(off) * 8
}
