//go:build linux

package anonmem

import (
	"reflect"
	"runtime"
	"testing"
	"unsafe"
)

type owner struct{ _ int }

// Slots holding pointers stay on the heap, where the collector sees them;
// huge slices start on a huge-page boundary and are zeroed and writable.
func TestSlice(t *testing.T) {
	type withPtr struct {
		p *int
		b [4096]byte
	}
	type plain struct{ b [2048]byte }
	o := &owner{}
	if Slice[withPtr](o, 64, false) != nil || PointerFree(reflect.TypeFor[withPtr]()) || !PointerFree(reflect.TypeFor[plain]()) {
		t.Error("a pointer-holding T went off the heap")
	}
	for _, huge := range []bool{false, true} {
		s := Slice[plain](o, 2048, huge)
		if len(s) != 2048 {
			t.Fatalf("huge %v: len %d", huge, len(s))
		}
		if huge && uintptr(unsafe.Pointer(&s[0]))%HugePage != 0 {
			t.Errorf("huge slice at %p, not 2 MiB aligned", &s[0])
		}
		if s[0].b[0] != 0 || s[2047].b[2047] != 0 {
			t.Error("not zeroed")
		}
		s[2047].b[2047] = 1
	}
	runtime.KeepAlive(o)
}
