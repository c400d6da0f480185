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

// TestOneLineHeaders pins which CQE header types let the prefetch skip a
// frame's second line: the headers (plus one 802.1Q tag) end in the first
// line from the headroom; unknown lengths and a misaligned headroom that
// pushes them past it keep both lines.
func TestOneLineHeaders(t *testing.T) {
	const v4, v6 = CQEL3HdrIPv4 << CQEL3HdrShift, CQEL3HdrIPv6 << CQEL3HdrShift
	const udp, tcp = CQEL4HdrUDP << CQEL4HdrShift, CQEL4HdrTCP << CQEL4HdrShift
	for _, c := range []struct {
		headroom int
		t        uint8
		one      uint8
	}{
		{128, v4 | udp, 1},            // 14+20+8 (+4) = 46
		{128, v4 | tcp, 1},            // 14+20+20 (+4) = 58
		{128, v6 | udp, 0},            // 14+40+8 (+4) = 66
		{128, v6 | tcp, 0},            // 74
		{128, v4 | udp | CQEIPExt, 0}, // options: length unknown
		{128, 0, 0},                   // no L3 the device knows
		{128 + 16, v4 | udp, 1},       // 16+46 = 62
		{128 + 32, v4 | udp, 0},       // 32+46 = 78: the headers cross the line
		{128 + 16, v4 | udp | 1, 1},   // VLAN stripped: same headers
	} {
		pages := make([][]byte, 17)
		for i := range pages {
			pages[i] = make([]byte, PageSize)
		}
		q, err := NewRxQueue(&CQMem{Ring: make([]byte, 64*CQESize), LogSize: 6, DBRec: make([]byte, 8)},
			&RQMem{Ring: make([]byte, 4*RxWQESize), LogWQEs: 2, LogStrides: 3, LogStrideSize: 11, DBRec: make([]byte, 8),
				IOVA: 1 << 30, Pages: pages}, 1, RxOptions{Headroom: c.headroom, PrefetchDistance: 4})
		if err != nil {
			t.Fatal(err)
		}
		if q.oneLine[c.t] != c.one {
			t.Errorf("headroom %d, type %#x: oneLine %d, want %d", c.headroom, c.t, q.oneLine[c.t], c.one)
		}
	}
}
