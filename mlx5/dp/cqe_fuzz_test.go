package dp

import (
	"encoding/binary"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// fuzzQueue builds an RX queue over plain heap memory: 4 WQEs × 8 strides of
// 2 KiB and a 64-entry CQ whose contents the caller controls.
func fuzzQueue(t testing.TB, compressed, enhanced bool, miniFmt uint8) (*RxQueue, []byte) {
	ring := make([]byte, 64*CQESize)
	pages := make([][]byte, 17)
	for i := range pages {
		pages[i] = make([]byte, PageSize)
	}
	q, err := NewRxQueue(
		&CQMem{Ring: ring, LogSize: 6, DBRec: make([]byte, 8), Compressed: compressed, Enhanced: enhanced, MiniFormat: miniFmt},
		&RQMem{Ring: make([]byte, 4*RxWQESize), LogWQEs: 2, LogStrides: 3, LogStrideSize: 11,
			DBRec: make([]byte, 8), IOVA: 1 << 30, Pages: pages},
		1, RxOptions{PrefetchDistance: 2})
	if err != nil {
		t.Fatal(err)
	}
	return q, ring
}

func putCQE(c []byte, op uint8, wqe, stride uint16, bc uint32) {
	c = c[:CQESize]
	clear(c)
	binary.BigEndian.PutUint16(c[CQEOffWQEID:], wqe)
	binary.BigEndian.PutUint16(c[CQEOffWQECounter:], stride)
	binary.BigEndian.PutUint32(c[CQEOffByteCnt:], bc)
	c[CQEOffL4L3HdrType] = CQEL3HdrIPv4<<CQEL3HdrShift | CQEL4HdrUDP<<CQEL4HdrShift
	c[CQEOffOpOwn] = op
}

// FuzzCQEPoll feeds arbitrary CQ ring contents (plain, compressed, filler,
// error, garbage) to the poll/decompress/deliver path. It must never panic,
// never deliver a packet outside the RQ's strides, and never account more
// strides to a WQE than it has.
func FuzzCQEPoll(f *testing.F) {
	seed := make([]byte, 8*CQESize)
	putCQE(seed[0:], CQERespSend<<4, 0, 0, 1<<16|100)
	putCQE(seed[64:], CQERespSend<<4, 0, 1, 1<<16|1500)
	putCQE(seed[128:], CQERespSend<<4, 0, 2, MPWRQFillerFlag|6<<16)
	putCQE(seed[192:], CQERespErr<<4, 1, 0, 1<<16)
	f.Add(byte(0), seed)
	comp := make([]byte, 4*CQESize)
	putCQE(comp[0:], CQERespSend<<4|CQEFormatComp<<2, 2, 0, 3)
	for i := 0; i < 3; i++ {
		m := comp[64+i*8:]
		binary.BigEndian.PutUint16(m[MiniOffStrideIdx:], uint16(i*2))
		binary.BigEndian.PutUint32(m[MiniOffByteCnt:], 2<<16|uint32(60+i))
	}
	f.Add(byte(3), comp)
	f.Add(byte(1), comp)
	// Enhanced layout: title CQE (vic 0) then a block of 3 minis.
	enh := make([]byte, 2*CQESize)
	putCQE(enh[0:], CQERespSend<<4, 1, 0, 1<<16|64)
	for i := 0; i < 3; i++ {
		m := enh[64+i*8:]
		binary.BigEndian.PutUint16(m[MiniOffStrideIdx:], uint16(1+i))
		binary.BigEndian.PutUint32(m[MiniOffByteCnt:], 1<<16|uint32(70+i))
	}
	enh[64+CQEOffOpOwn] = 2<<4 | CQEFormatComp<<2
	f.Add(byte(1|8|MiniFmtCSUMStrdx<<1), enh)
	f.Fuzz(func(t *testing.T, mode byte, data []byte) {
		format := mode >> 1 & 3
		if format == MiniFmtFTagStrdx {
			format = MiniFmtCSUM // refused by NewRxQueue
		}
		q, ring := fuzzQueue(t, mode&1 != 0, mode&8 != 0, format)
		for i := CQEOffOpOwn; i < len(ring); i += CQESize {
			ring[i] = CQEInvalidOpOwn
			ring[i-1] = 0xFF
		}
		copy(ring, data)
		b := fwd.NewBatch(fwd.MaxBatch)
		for round := 0; round < 4; round++ {
			b.Reset()
			q.Rx(b)
			for _, p := range b.Pkts {
				if p.Handle >= uint64(q.pool.rxBufs) || int(p.Off)+int(p.Len) > len(p.Buf) {
					t.Fatalf("packet outside the RQ: %+v", p)
				}
			}
			for w, r := range q.pool.recs {
				if r.consumed > q.pool.strides {
					t.Fatalf("WQE %d consumed %d strides", w, r.consumed)
				}
			}
			// Free what was delivered so WQEs can be reposted.
			for i := range b.Pkts {
				q.pool.release(b.Pkts[i].Handle)
			}
			q.pool.repost()
		}
	})
}

// TestEnhancedSeed checks the hand-built enhanced seed decodes to 4 packets
// (title + 3 minis) with the minis' strides and lengths.
func TestEnhancedSeed(t *testing.T) {
	q, ring := fuzzQueue(t, true, true, MiniFmtCSUMStrdx)
	for i := CQEOffOpOwn; i < len(ring); i += CQESize {
		ring[i], ring[i-1] = CQEInvalidOpOwn, 0xFF
	}
	putCQE(ring[0:], CQERespSend<<4, 1, 0, 1<<16|64)
	for i := 0; i < 3; i++ {
		m := ring[64+i*8:]
		binary.BigEndian.PutUint16(m[MiniOffStrideIdx:], uint16(1+i))
		binary.BigEndian.PutUint32(m[MiniOffByteCnt:], 1<<16|uint32(70+i))
	}
	ring[64+CQEOffSignature] = 0
	ring[64+CQEOffOpOwn] = 2<<4 | CQEFormatComp<<2
	b := fwd.NewBatch(16)
	if n := q.Rx(b); n != 4 {
		t.Fatalf("got %d packets, want 4 (%+v)", n, q.Stats)
	}
	for i, p := range b.Pkts {
		if p.Handle != uint64(1<<3|i) || (i > 0 && p.Len != uint16(69+i)) {
			t.Fatalf("packet %d: handle %d len %d", i, p.Handle, p.Len)
		}
	}
	if q.cq.cc != 4 {
		t.Fatalf("consumer index %d, want 4 (title + block of 3): %+v", q.cq.cc, q.Stats)
	}
}
