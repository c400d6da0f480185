package dp

import (
	"encoding/binary"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

func TestHeaderInfo(t *testing.T) {
	const v4, v6 = CQEL3HdrIPv4 << CQEL3HdrShift, CQEL3HdrIPv6 << CQEL3HdrShift
	const udp, tcp = CQEL4HdrUDP << CQEL4HdrShift, CQEL4HdrTCPAckD << CQEL4HdrShift
	for _, c := range []struct {
		t      uint8
		flags  fwd.Flags
		l3, l4 uint8
		hdr    uint16
	}{
		{v4 | udp, fwd.FlagIPv4 | fwd.FlagUDP | fwd.FlagParsed, 14, 34, 42},
		{v4 | tcp, fwd.FlagVLAN | fwd.FlagIPv4 | fwd.FlagTCP | fwd.FlagParsed, 18, 38, 58},
		{v6 | udp, fwd.FlagIPv6 | fwd.FlagUDP | fwd.FlagParsed, 14, 54, 62},
		{v6, fwd.FlagIPv6 | fwd.FlagParsed, 14, 0, 54},
		{v4 | udp | CQEIPExt, fwd.FlagIPv4 | fwd.FlagUDP, 0, 0, 0}, // options: parser decides
		{v4 | udp | CQEIPFrag, fwd.FlagIPv4 | fwd.FlagUDP | fwd.FlagFrag | fwd.FlagParsed, 14, 34, 42},
		{0, 0, 0, 0, 0},
		{0, fwd.FlagVLAN, 0, 0, 0},
	} {
		frame := make([]byte, 64)
		binary.BigEndian.PutUint16(frame[12:], 0x0800)
		if c.flags&fwd.FlagVLAN != 0 {
			binary.BigEndian.PutUint16(frame[12:], 0x8100)
			binary.BigEndian.PutUint16(frame[14:], 42)
			binary.BigEndian.PutUint16(frame[16:], 0x0800)
		}
		f, l3, l4, h, _ := HeaderInfo(c.t, frame)
		if f != c.flags || l3 != c.l3 || l4 != c.l4 || h != c.hdr {
			t.Errorf("HeaderInfo(%#x) = %#x %d %d %d, want %#x %d %d %d", c.t, f, l3, l4, h, c.flags, c.l3, c.l4, c.hdr)
		}
	}
}
