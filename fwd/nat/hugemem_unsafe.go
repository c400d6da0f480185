//go:build linux

package nat

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Large tables on transparent huge pages. With many sessions the session
// array and the indexes span thousands of 4 KiB pages, more than the TLB
// holds, so a lookup's cache miss comes with a page walk; on 2 MiB pages
// (madvise(MADV_HUGEPAGE), honoured when the kernel's
// transparent_hugepage/enabled is "always" or "madvise") the same tables
// take a few dozen TLB entries. VPP keeps its bihash tables on hugepages
// for the same reason.
//
// Invariants: T holds no pointers (the GC does not scan this memory), and
// a mapping is unmapped only by the cleanup of the Table that owns it,
// once nothing reaches that Table and so nothing reaches its slices.

const hugePage = 2 << 20

// hugeSlice returns n zeroed Ts in an anonymous mapping aligned to 2 MiB
// and advised for huge pages, with the mapping to unmap and the slice's
// size in bytes; make's slice and nil for a small table or when mmap
// fails.
func hugeSlice[T any](n int) ([]T, []byte, int) {
	var z T
	size := n * int(unsafe.Sizeof(z))
	if size < hugePage {
		return make([]T, n), nil, size
	}
	m, err := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]T, n), nil, size
	}
	off := (hugePage - int(uintptr(unsafe.Pointer(&m[0])))%hugePage) % hugePage
	b := m[off : off+size]
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advice: without it the table works on small pages
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), m, size
}

func unmapAll(ms [][]byte) {
	for _, m := range ms {
		_ = unix.Munmap(m)
	}
}
