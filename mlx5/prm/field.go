package prm

import "encoding/binary"

// Field is one field of a PRM layout, numbered like the kernel's MLX5_SET:
// Bit is the offset of the field's most significant bit from the start of
// the structure, bit 0 being the most significant bit of byte 0; Width is
// the number of bits. Fields of up to 32 bits lie inside one big-endian
// dword; 64-bit fields and byte strings start on a dword boundary.
type Field struct {
	Bit, Width uint32
}

// F is a field given as the spec tables give it: byte offset of its dword
// and the [hi:lo] bit range inside that big-endian dword.
func F(dwordOff, hi, lo uint32) Field {
	return Field{Bit: dwordOff*8 + 31 - hi, Width: hi - lo + 1}
}

// D32 is a whole big-endian dword at byte offset off.
func D32(off uint32) Field { return Field{Bit: off * 8, Width: 32} }

// D64 is a big-endian qword at byte offset off.
func D64(off uint32) Field { return Field{Bit: off * 8, Width: 64} }

// Bytes is a byte string of n bytes at byte offset off.
func Bytes(off, n uint32) Field { return Field{Bit: off * 8, Width: n * 8} }

// Off is the byte offset of the dword (or the first byte) holding the field.
func (f Field) Off() int { return int(f.Bit/32) * 4 }

// End is the number of bytes a buffer needs to hold the field.
func (f Field) End() int { return int((f.Bit + f.Width + 7) / 8) }

func (f Field) shift() uint32 { return 32 - f.Width - f.Bit%32 }

// Get reads the field from b. Byte strings longer than 8 bytes cannot be
// read this way; use Slice. b must hold the field (callers size their
// buffers from the command's length, so a short buffer is a driver bug and
// panics like any out-of-range index).
func (f Field) Get(b []byte) uint64 {
	switch {
	case f.Width == 64:
		return binary.BigEndian.Uint64(b[f.Bit/8:])
	case f.Width > 32:
		panic("prm: Get on a byte string field")
	}
	v := binary.BigEndian.Uint32(b[f.Off():])
	return uint64(v>>f.shift()) & (1<<f.Width - 1)
}

// Set writes v into the field, leaving the other bits of its dword alone.
// Bits of v above the field's width are dropped, as MLX5_SET does.
func (f Field) Set(b []byte, v uint64) {
	switch {
	case f.Width == 64:
		binary.BigEndian.PutUint64(b[f.Bit/8:], v)
		return
	case f.Width > 32:
		panic("prm: Set on a byte string field")
	}
	p := b[f.Off():]
	mask := uint32(1<<f.Width-1) << f.shift()
	old := binary.BigEndian.Uint32(p)
	binary.BigEndian.PutUint32(p, old&^mask|uint32(v)<<f.shift()&mask)
}

// Slice is the field's bytes inside b (for byte strings such as keys and MACs).
func (f Field) Slice(b []byte) []byte { return b[f.Bit/8 : f.End()] }
