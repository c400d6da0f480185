//go:build !(amd64 || arm64)

package dp

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/fwd"
)

// putPacket fills a received packet's slot field by field.
func putPacket(pk *fwd.Packet, buf []byte, handle uint64, off, length, pool, inPort uint16, flags fwd.Flags, vlan uint16, l3Off, l4Off uint8) {
	pk.Buf, pk.Handle = buf, handle
	pk.Off, pk.Len, pk.Pool, pk.InPort, pk.OutPort = off, length, pool, inPort, 0
	pk.Flags, pk.VLAN, pk.L3Off, pk.L4Off = flags, vlan, l3Off, l4Off
	pk.Verdict, pk.Reason, pk.Peer = 0, 0, 0
}

// writeShinfo stores the three little-endian words of the shinfo record at
// offset off of the stride at p.
func writeShinfo(p unsafePointer, off uint32, w0, w1, w2 uint64) {
	s := p.stride(off + 24)[off:]
	binary.LittleEndian.PutUint64(s[0:], w0)
	binary.LittleEndian.PutUint64(s[8:], w1)
	binary.LittleEndian.PutUint64(s[16:], w2)
}
