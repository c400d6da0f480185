package vpn

import (
	"bytes"
	"testing"
)

func TestCompFraming(t *testing.T) {
	ip := []byte{0x45, 1, 2, 3, 4}
	esc := []byte{0x50, 0xAA, 0xBB}
	cases := []struct {
		comp        Comp
		plain, wire []byte
	}{
		{CompNone, ip, ip},
		{CompLZO, ip, []byte{0xFA, 0x45, 1, 2, 3, 4}},
		{CompStub, ip, []byte{0xFB, 1, 2, 3, 4, 0x45}},
		{CompStubV2, ip, ip},
		{CompStubV2, esc, []byte{0x50, 0x00, 0x50, 0xAA, 0xBB}},
		{CompLZO, PingMagic[:], append([]byte{0xFA}, PingMagic[:]...)},
	}
	for _, tc := range cases {
		buf := make([]byte, 64)
		copy(buf[8:], tc.plain)
		off, n := tc.comp.frame(buf, 8, len(tc.plain))
		if got := buf[off : off+n]; !bytes.Equal(got, tc.wire) {
			t.Errorf("frame(%d, %x) = %x, want %x", tc.comp, tc.plain, got, tc.wire)
		}
		back, ok := tc.comp.unframe(append([]byte(nil), tc.wire...))
		if !ok || !bytes.Equal(back, tc.plain) {
			t.Errorf("unframe(%d, %x) = %x %v, want %x", tc.comp, tc.wire, back, ok, tc.plain)
		}
	}
	// 2.6's own escape writes the algorithm id 10; accept it too.
	if back, ok := CompStubV2.unframe([]byte{0x50, 10, 0x50, 1}); !ok || !bytes.Equal(back, []byte{0x50, 1}) {
		t.Errorf("stub-v2 escape with id 10: %x %v", back, ok)
	}
	for _, bad := range []struct {
		comp Comp
		wire []byte
	}{
		{CompLZO, []byte{0x66, 1, 2}},    // LZO_COMPRESS_BYTE: really compressed
		{CompLZO, []byte{0x45, 1, 2}},    // no framing where it is due
		{CompStub, []byte{0xFA, 1, 2}},   // swap mode wants 0xFB
		{CompStubV2, []byte{0x50, 1, 2}}, // LZ4 v2: really compressed
		{CompStubV2, []byte{0x50}},       // truncated escape
		{CompLZO, nil},
	} {
		if _, ok := bad.comp.unframe(append([]byte(nil), bad.wire...)); ok {
			t.Errorf("unframe(%d, %x) accepted", bad.comp, bad.wire)
		}
	}
}
