//go:build !(amd64 || arm64)

package dp

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/fwd"
)

// putPacket fills a received packet's slot field by field; w0 is
// off | len<<16 | pool<<32 | inPort<<48.
func putPacket(pk *fwd.Packet, buf []byte, handle, w0 uint64, flags fwd.Flags, vlan uint16, l3Off, l4Off uint8) {
	pk.Buf, pk.Handle = buf, handle
	pk.Off, pk.Len, pk.Pool, pk.InPort, pk.OutPort = uint16(w0), uint16(w0>>16), uint16(w0>>32), uint16(w0>>48), 0
	pk.Flags, pk.VLAN, pk.L3Off, pk.L4Off = flags, vlan, l3Off, l4Off
	pk.Verdict, pk.Reason, pk.Peer = 0, 0, 0
}

// putPacketWords is putPacket with the second word built by the caller
// (outPort|flags|vlan|l3Off|l4Off).
func putPacketWords(pk *fwd.Packet, buf []byte, handle, w0, w1 uint64) {
	putPacket(pk, buf, handle, w0, fwd.Flags(w1>>16), uint16(w1>>32), uint8(w1>>48), uint8(w1>>56))
}

// writeShinfo stores the three little-endian words of the shinfo record at
// offset off of the stride at p.
func writeShinfo(p unsafePointer, off uint32, w0, w1, w2 uint64) {
	s := p.stride(off + 24)[off:]
	binary.LittleEndian.PutUint64(s[0:], w0)
	binary.LittleEndian.PutUint64(s[8:], w1)
	binary.LittleEndian.PutUint64(s[16:], w2)
}

// putDesc stores a decoded completion field by field: buf, then w1 = hash |
// wqe<<32 | stride<<48 and w2 = strides | length<<16 | hdrType<<32 | vlan<<48.
func putDesc(d *rxDesc, buf unsafePointer, w1, w2 uint64) {
	d.buf, d.hash, d.wqe, d.stride = buf, uint32(w1), uint16(w1>>32), uint16(w1>>48)
	d.strides, d.length, d.hdrType, d.vlan = uint16(w2), uint16(w2>>16), uint8(w2>>32), uint16(w2>>48)
}

// descWords returns putDesc's w1 and w2 of a decoded completion.
func descWords(d *rxDesc) (w1, w2 uint64) {
	return uint64(d.hash) | uint64(d.wqe)<<32 | uint64(d.stride)<<48,
		uint64(d.strides) | uint64(d.length)<<16 | uint64(d.hdrType)<<32 | uint64(d.vlan)<<48
}

// loadRecord and storeRecord move the held record's four little-endian
// words at offset off of the stride at p (held.go).
func loadRecord(p unsafePointer, off uint32) (w0, w1, w2, w3 uint64) {
	s := p.stride(off + 32)[off:]
	le := binary.LittleEndian
	return le.Uint64(s[0:]), le.Uint64(s[8:]), le.Uint64(s[16:]), le.Uint64(s[24:])
}

func storeRecord(p unsafePointer, off uint32, w0, w1, w2, w3 uint64) {
	s := p.stride(off + 32)[off:]
	le := binary.LittleEndian
	le.PutUint64(s[0:], w0)
	le.PutUint64(s[8:], w1)
	le.PutUint64(s[16:], w2)
	le.PutUint64(s[24:], w3)
}

func storeRecordRef(p unsafePointer, off uint32, w2 uint64) {
	binary.LittleEndian.PutUint64(p.stride(off + 24)[off+16:], w2)
}

// packetWords returns pk's three words from Off on (putPacket's layout).
func packetWords(pk *fwd.Packet) (w0, w1, w2 uint64) {
	return uint64(pk.Off) | uint64(pk.Len)<<16 | uint64(pk.Pool)<<32 | uint64(pk.InPort)<<48,
		uint64(pk.OutPort) | uint64(pk.Flags)<<16 | uint64(pk.VLAN)<<32 | uint64(pk.L3Off)<<48 | uint64(pk.L4Off)<<56,
		uint64(pk.Verdict) | uint64(pk.Reason)<<8 | uint64(pk.Peer)<<32
}

func putPacketAll(pk *fwd.Packet, buf []byte, handle, w0, w1, w2 uint64) {
	putPacketWords(pk, buf, handle, w0, w1)
	pk.OutPort = uint16(w1)
	pk.Verdict, pk.Reason, pk.Peer = fwd.Verdict(w2), fwd.DropReason(w2>>8), uint32(w2>>32)
}
