package dp

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// Regression tests for the review of the CQE semantics against the kernel
// and DPDK; each fails with its fix reverted.

func invalidate(ring []byte) {
	for i := CQEOffOpOwn; i < len(ring); i += CQESize {
		ring[i], ring[i-1] = CQEInvalidOpOwn, 0xFF
	}
}

// An enhanced block the driver refuses (more than 7 minis) still consumed
// its count of CQ indices; stepping by one would wait forever on slots the
// device did not write this lap.
func TestEnhancedRejectAdvancesByBlock(t *testing.T) {
	q, ring := fuzzQueue(t, true, true, MiniFmtCSUMStrdx)
	invalidate(ring)
	putCQE(ring[0:], CQERespSend<<4, 1, 0, 1<<16|64) // title, lap 0
	ring[CQEOffSignature] = 0
	blk := ring[64:]
	blk[CQEOffSignature] = 0
	blk[CQEOffOpOwn] = 7<<4 | CQEFormatComp<<2 // 8 minis: malformed
	putCQE(ring[9*64:], CQERespSend<<4, 2, 0, 1<<16|80)
	ring[9*64+CQEOffSignature] = 0
	b := fwd.NewBatch(16)
	n := q.Rx(b)
	if q.Stats.Malformed != 1 || n != 2 || b.Pkts[1].Len != 80 || q.cq.cc != 10 {
		t.Fatalf("got %d packets, consumer %d, stats %+v; want the title and the CQE after the 8-slot block", n, q.cq.cc, q.Stats)
	}
}

// Mini-CQE format 2 (FTAG_STRIDX) carries the flow tag where the other
// formats carry the checksum and byte count; it is refused, not misread.
func TestMiniFormatFTagStrideRefused(t *testing.T) {
	pages := make([][]byte, 17)
	for i := range pages {
		pages[i] = make([]byte, PageSize)
	}
	for _, format := range []uint8{MiniFmtHash, MiniFmtCSUM, MiniFmtFTagStrdx, MiniFmtCSUMStrdx} {
		_, err := NewRxQueue(&CQMem{Ring: make([]byte, 64*CQESize), LogSize: 6, DBRec: make([]byte, 8), Compressed: true, MiniFormat: format},
			&RQMem{Ring: make([]byte, 4*RxWQESize), LogWQEs: 2, LogStrides: 3, LogStrideSize: 11, DBRec: make([]byte, 8), IOVA: 1 << 30,
				Pages: pages}, 1, RxOptions{})
		if (err == nil) != (format != MiniFmtFTagStrdx) {
			t.Fatalf("mini-CQE format %d: %v", format, err)
		}
	}
}

// A tag the device stripped (bit 0 set, TCI in vlan_info) is put back, so
// the packet is the frame as it was on the wire, with L3 behind the tag.
func TestStrippedTagReinserted(t *testing.T) {
	q, ring := fuzzQueue(t, false, false, 0)
	for i := range q.pool.pages {
		if q.pool.pages[i] == nil {
			q.pool.pages[i] = make([]byte, PageSize)
		}
	}
	invalidate(ring)
	wire := make([]byte, 64)
	copy(wire, []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0x00, 0x20, 0x05, 0x08, 0x00, 0x45})
	stripped := append(append([]byte(nil), wire[:12]...), wire[16:]...)
	copy(q.pool.buf(0)[q.headroom:], stripped)
	putCQE(ring[0:], CQERespSend<<4, 0, 0, 1<<16|uint32(len(stripped)))
	ring[CQEOffL4L3HdrType] |= CQEVLANStripped
	binary.BigEndian.PutUint16(ring[CQEOffVLANInfo:], 0x2005)
	b := fwd.NewBatch(4)
	if n := q.Rx(b); n != 1 {
		t.Fatalf("got %d packets (%+v)", n, q.Stats)
	}
	p := &b.Pkts[0]
	if !bytes.Equal(p.Data(), wire) || p.Flags&fwd.FlagVLAN == 0 || p.VLAN != 5 || p.L3Off != 18 || p.L4Off != 38 {
		t.Fatalf("got % x flags %#x VLAN %d L3 %d L4 %d", p.Data()[:20], p.Flags, p.VLAN, p.L3Off, p.L4Off)
	}
}
