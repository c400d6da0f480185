package fwd

import (
	"encoding/binary"
	"math/bits"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

// clampMSS lowers the MSS option of a TCP SYN (or SYN-ACK) to the
// configured clamp, fixing the TCP checksum incrementally.
func (w *Worker) clampMSS(p *Packet) {
	tcp := p.Data()[p.L4Off:]
	if tcp[13]&tcpFlagSYN == 0 {
		return
	}
	limit := w.lim.MSSClamp
	if p.Flags&FlagIPv6 != 0 {
		limit -= ipv6HdrLen - ipv4MinHdrLen
	}
	opts := tcp[tcpMinHdrLen : int(tcp[12]>>4)*4]
	for i := 0; i < len(opts); {
		switch opts[i] {
		case tcpOptEnd:
			return
		case tcpOptNOP:
			i++
			continue
		}
		if i+1 >= len(opts) {
			return
		}
		l := int(opts[i+1])
		if l < 2 || i+l > len(opts) {
			return
		}
		if opts[i] == tcpOptMSS && l == tcpOptMSSLen {
			old := binary.BigEndian.Uint16(opts[i+2:])
			if old <= limit {
				return
			}
			binary.BigEndian.PutUint16(opts[i+2:], limit)
			if (tcpMinHdrLen+i+2)&1 == 0 {
				csum.Fix16(tcp[16:], old, limit)
			} else {
				// A field at an odd offset straddles two checksum words;
				// its contribution is the byte-swapped value (RFC 1071 §2(B)).
				csum.Fix16(tcp[16:], bits.ReverseBytes16(old), bits.ReverseBytes16(limit))
			}
			w.cnt[cClamped]++
			return
		}
		i += l
	}
}
