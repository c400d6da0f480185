//go:build linux

// Package anonmem gives large pointer-free tables memory outside the Go
// heap: the frame rings of fwd (mostly never written, so counted as live
// data they would double the collector's target) and NAT's session tables
// (on transparent huge pages, so a lookup's cache miss does not also miss
// the TLB; VPP keeps its bihash tables on huge pages for the same reason).
//
// Invariants: T holds no pointers (the collector does not scan the
// mapping; Slice refuses such a T), and the mapping is unmapped once owner
// is unreachable, so nothing may keep a pointer into the slice beyond
// owner's life.
package anonmem

import (
	"reflect"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HugePage is the transparent huge page size Slice aligns to.
const HugePage = 2 << 20

// Size is the bytes n Ts take.
func Size[T any](n int) int {
	var z T
	return n * int(unsafe.Sizeof(z))
}

// Slice returns n zeroed Ts in a private anonymous mapping that is
// unmapped when owner becomes unreachable, or nil when T may hold a
// pointer or mmap fails (the caller then uses the heap). With huge, the
// mapping is aligned to HugePage and advised MADV_HUGEPAGE (honoured when
// the kernel's transparent_hugepage/enabled is "always" or "madvise").
func Slice[T, O any](owner *O, n int, huge bool) []T {
	size := Size[T](n)
	if size == 0 || !PointerFree(reflect.TypeFor[T]()) {
		return nil
	}
	pad := 0
	if huge {
		pad = HugePage
	}
	m, err := unix.Mmap(-1, 0, size+pad, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	b := m[:size]
	if huge {
		off := (HugePage - int(uintptr(unsafe.Pointer(&m[0])))%HugePage) % HugePage
		b = m[off : off+size]
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advice: without it the table works on small pages
	}
	runtime.AddCleanup(owner, func(m []byte) { _ = unix.Munmap(m) }, m)
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// PointerFree reports whether a value of t holds no pointer the collector
// must see.
func PointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return t.Len() == 0 || PointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !PointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}
