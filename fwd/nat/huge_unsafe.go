package nat

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHuge asks for transparent huge pages under a large table: its
// lookups land at random, and with 4 KiB pages each is a TLB miss too.
// Invariant: s is a Go slice the table owns for its whole life; the advice
// changes only how the kernel backs the pages, never their contents, and
// an error (THP off, an unaligned range) is harmless and ignored.
func adviseHuge[T any](s []T) {
	if len(s) == 0 {
		return
	}
	n := uintptr(len(s)) * unsafe.Sizeof(s[0])
	if n < 4<<20 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), n)
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
}
