package vpn

// Comp is the compression stub framing a peer negotiated (comp.h,
// compstub.c).
// ovfwd never compresses; it only speaks the framing that existing client
// profiles with `comp-lzo no` or `compress` put on every payload.
type Comp uint8

const (
	CompNone   Comp = iota // no framing byte at all (the 2.6 default)
	CompLZO                // comp-lzo no: 0xFA in front of every payload
	CompStub               // compress (stub): first byte moved to the end, 0xFB in its place
	CompStubV2             // compress stub-v2: only payloads starting with 0x50 get a 0x50 0x00 escape
)

// maxCompPrefix is the most a framing adds in front of a payload.
const maxCompPrefix = 2

// unframe strips the framing from a decrypted payload in place and returns
// the bare payload, or ok=false for a framing we cannot accept (a compressed
// payload, or a bad header byte), as compstub.c does.
func (c Comp) unframe(p []byte) (bare []byte, ok bool) {
	if len(p) == 0 {
		return p, c == CompNone || c == CompStubV2
	}
	switch c {
	case CompLZO:
		return p[1:], p[0] == noCompressByte
	case CompStub:
		head := p[0]
		p[0] = p[len(p)-1]
		return p[:len(p)-1], head == noCompressByteSwap
	case CompStubV2:
		if p[0] != compAlgV2Indicator {
			return p, true
		}
		if len(p) < 2 {
			return nil, false
		}
		// Decoders check for COMP_ALGV2_UNCOMPRESSED_BYTE (0) while 2.6's own
		// escape writes the algorithm id COMP_ALGV2_UNCOMPRESSED (10): accept both.
		return p[2:], p[1] == compAlgV2Uncompressed || p[1] == compAlgV2UncompressedID
	}
	return p, true
}

// frame adds the framing to the payload at buf[off:off+n] in place, using
// up to maxCompPrefix bytes of headroom before off and one byte of room after
// the payload, and returns the framed payload's new offset and length.
func (c Comp) frame(buf []byte, off, n int) (int, int) {
	switch c {
	case CompLZO:
		buf[off-1] = noCompressByte
		return off - 1, n + 1
	case CompStub:
		if n == 0 {
			return off, n
		}
		buf[off+n] = buf[off]
		buf[off] = noCompressByteSwap
		return off, n + 1
	case CompStubV2:
		if n > 0 && buf[off] == compAlgV2Indicator {
			buf[off-2] = compAlgV2Indicator
			buf[off-1] = compAlgV2Uncompressed
			return off - 2, n + 2
		}
	}
	return off, n
}
