package fwd

import (
	"reflect"
	"runtime"
	"syscall"
	"unsafe"
)

// Frame rings (punt, inject, uplink, NAT hand-off: 2 KiB a slot, about
// 7 MiB a worker) are allocated whole at start and mostly never written.
// On the Go heap they counted as live data, and the collector lets the
// heap grow to twice its live data (GOGC=100) before collecting: the
// daemon's heap target was ~20 MiB for ~3 MiB of real data, so any
// sustained garbage (a neighbour storm's control plane) made up to 7 MiB
// more of it resident. Rings of pointer-free slots of offHeapMin or more
// live in anonymous mappings instead: the kernel still backs only the
// pages a ring has used, and the collector's target follows the real data.
//
// Invariant: the mapping is unmapped once its ring is unreachable, so
// nothing may keep a pointer into the slots beyond the ring's own life —
// which the rings' contract already says (a slot is valid until publish,
// a drained one during the callback).

const offHeapMin = 64 << 10

// offHeapSlots returns n slots of T in an anonymous mapping that is
// unmapped when owner becomes unreachable, or nil: when T may hold a
// pointer (the collector does not scan the mapping, so the target would
// not be kept alive), when the ring is small, or when mmap fails.
func offHeapSlots[T, O any](owner *O, n int) []T {
	var zero T
	size := int(unsafe.Sizeof(zero)) * n
	if size < offHeapMin || !pointerFree(reflect.TypeFor[T]()) {
		return nil
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return nil // the heap will do
	}
	runtime.AddCleanup(owner, func(m []byte) { _ = syscall.Munmap(m) }, mem)
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(mem))), n)
}

// pointerFree reports whether a value of t holds no pointer the
// collector must see.
func pointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return t.Len() == 0 || pointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !pointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}
