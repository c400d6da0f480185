//go:build amd64 || arm64

package dp

import (
	"unsafe"

	"github.com/ovfwd/ovfwd/fwd"
)

// fwd.Packet from Off on is three 8-byte words (little-endian field order):
// Off|Len|Pool|InPort, OutPort|Flags|VLAN|L3Off|L4Off, Verdict|Reason|Peer.
// putPacket stores them as such, 3 stores instead of 11. These constants
// fail to compile if the layout changes (a negative or non-zero difference
// overflows uint).
const (
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.Off) - 32)
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.Len) - 34)
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.Pool) - 36)
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.InPort) - 38)
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.OutPort) - 40)
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.Flags) - 42)
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.VLAN) - 44)
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.L3Off) - 46)
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.L4Off) - 47)
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.Verdict) - 48)
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.Reason) - 49)
	_ uint = -uint(unsafe.Offsetof(fwd.Packet{}.Peer) - 52)
	_ uint = -uint(unsafe.Sizeof(fwd.Packet{}) - 56)
)

// putPacket fills a received packet's slot: buffer, handle, then
// w0 = off | len<<16 | pool<<32 | inPort<<48 and
// outPort(0)/flags/vlan/l3Off/l4Off as two words, verdict, reason and peer
// zero.
func putPacket(pk *fwd.Packet, buf []byte, handle, w0 uint64, flags fwd.Flags, vlan uint16, l3Off, l4Off uint8) {
	pk.Buf = buf
	pk.Handle = handle
	w := (*[3]uint64)(unsafe.Pointer(&pk.Off))
	w[0] = w0
	w[1] = uint64(flags)<<16 | uint64(vlan)<<32 | uint64(l3Off)<<48 | uint64(l4Off)<<56
	w[2] = 0
}

// putPacketWords is putPacket with the second word built by the caller
// (outPort|flags|vlan|l3Off|l4Off).
func putPacketWords(pk *fwd.Packet, buf []byte, handle, w0, w1 uint64) {
	pk.Buf = buf
	pk.Handle = handle
	w := (*[3]uint64)(unsafe.Pointer(&pk.Off))
	w[0], w[1], w[2] = w0, w1, 0
}

// writeShinfo stores the three words of the shinfo record at offset off of
// the stride at p (off + ShinfoSize ≤ stride: ring_unsafe.go) as three
// 8-byte stores: through binary.LittleEndian the compiler splits a word
// whose upper bytes it knows (the dataref) into narrower stores.
func writeShinfo(p unsafePointer, off uint32, w0, w1, w2 uint64) {
	s := (*[3]uint64)(unsafe.Add(p.p, off))
	s[0], s[1], s[2] = w0, w1, w2
}

// rxDesc after buf is two 8-byte words (little-endian field order):
// hash|wqe|stride and strides|length|hdrType|_|vlan.
const (
	_ uint = -uint(unsafe.Offsetof(rxDesc{}.hash) - 8)
	_ uint = -uint(unsafe.Offsetof(rxDesc{}.wqe) - 12)
	_ uint = -uint(unsafe.Offsetof(rxDesc{}.stride) - 14)
	_ uint = -uint(unsafe.Offsetof(rxDesc{}.strides) - 16)
	_ uint = -uint(unsafe.Offsetof(rxDesc{}.length) - 18)
	_ uint = -uint(unsafe.Offsetof(rxDesc{}.hdrType) - 20)
	_ uint = -uint(unsafe.Offsetof(rxDesc{}.vlan) - 22)
	_ uint = -uint(unsafe.Sizeof(rxDesc{}) - 24)
)

// putDesc stores a decoded completion: buf, then w1 = hash | wqe<<32 |
// stride<<48 and w2 = strides | length<<16 | hdrType<<32 | vlan<<48; the
// padding byte at 21 (bits 40..47) may hold anything (pollPlain leaves
// hds_ip_ext there) and is never read.
func putDesc(d *rxDesc, buf unsafePointer, w1, w2 uint64) {
	d.buf = buf
	w := (*[2]uint64)(unsafe.Pointer(&d.hash))
	w[0], w[1] = w1, w2
}

// descWords loads a decoded completion's two scalar words (putDesc's w1
// and w2) with two loads instead of one per field.
func descWords(d *rxDesc) (w1, w2 uint64) {
	w := (*[2]uint64)(unsafe.Pointer(&d.hash))
	return w[0], w[1]
}

// The held record is the shinfo record with a fourth word (held.go); its
// four words at offset off of the stride at p (off + ShinfoSize ≤ stride,
// checked by Hold, and by Resume against the stride size).
func loadRecord(p unsafePointer, off uint32) (w0, w1, w2, w3 uint64) {
	s := (*[4]uint64)(unsafe.Add(p.p, off))
	return s[0], s[1], s[2], s[3]
}

func storeRecord(p unsafePointer, off uint32, w0, w1, w2, w3 uint64) {
	s := (*[4]uint64)(unsafe.Add(p.p, off))
	s[0], s[1], s[2], s[3] = w0, w1, w2, w3
}

// storeRecordRef rewrites the record's hash|dataref word.
func storeRecordRef(p unsafePointer, off uint32, w2 uint64) {
	(*[4]uint64)(unsafe.Add(p.p, off))[2] = w2
}

// packetWords loads pk's three words from Off on (putPacket's layout).
func packetWords(pk *fwd.Packet) (w0, w1, w2 uint64) {
	w := (*[3]uint64)(unsafe.Pointer(&pk.Off))
	return w[0], w[1], w[2]
}

// putPacketAll fills pk with all three words given.
func putPacketAll(pk *fwd.Packet, buf []byte, handle, w0, w1, w2 uint64) {
	pk.Buf = buf
	pk.Handle = handle
	w := (*[3]uint64)(unsafe.Pointer(&pk.Off))
	w[0], w[1], w[2] = w0, w1, w2
}
