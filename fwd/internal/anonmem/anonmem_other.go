//go:build !linux

package anonmem

import "unsafe"

// HugePage is the transparent huge page size Slice aligns to.
const HugePage = 2 << 20

// Size is the bytes n Ts take.
func Size[T any](n int) int {
	var z T
	return n * int(unsafe.Sizeof(z))
}

// Slice is nil off Linux: the caller uses the heap.
func Slice[T, O any](owner *O, n int, huge bool) []T { return nil }
