package dp

import (
	"encoding/binary"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

type nopDoorbell struct{}

func (nopDoorbell) Write64(uint32, uint64) {}

// FuzzTxReap sends 16 received packets, then feeds arbitrary TX completion
// entries (any opcode, syndrome or wqe_counter, some naming WQEs never
// posted) to Reap, and finally a good completion of the last WQE. Reap must
// never complete past what was posted, must count every CQE it consumes
// once, and every buffer must be released exactly once: after the final
// completion every WQE record's reference count is back to zero.
func FuzzTxReap(f *testing.F) {
	f.Add([]byte{}, true)
	f.Add(make([]byte, 3*CQESize), false)
	good := make([]byte, CQESize)
	binary.BigEndian.PutUint16(good[CQEOffWQECounter:], 2)
	f.Add(good, true)
	errCQE := append([]byte(nil), good...)
	errCQE[CQEOffOpOwn] = CQEReqErr << CQEOpcodeShift
	f.Add(errCQE, false)
	f.Fuzz(func(t *testing.T, data []byte, mpw bool) {
		rx, ring := fuzzQueue(t, false, false, 0)
		invalidate(ring)
		const n = 16
		for i := 0; i < n; i++ {
			putCQE(ring[i*CQESize:], CQERespSend<<CQEOpcodeShift, uint16(i/8), uint16(i%8), 1<<16|60)
		}
		b := fwd.NewBatch(n)
		if got := rx.Rx(b); got != n {
			t.Fatalf("received %d of %d", got, n)
		}
		txRing := make([]byte, 64*CQESize)
		invalidate(txRing)
		tx, err := NewTxQueue(&SQMem{Ring: make([]byte, 64*SendWQEBBSize), LogWQEBBs: 6, DBRec: make([]byte, 8),
			MMIO: nopDoorbell{}, EnhancedMPW: mpw}, &CQMem{Ring: txRing, LogSize: 6, DBRec: make([]byte, 8)},
			rx.Pool(), TxOptions{CompletionEvery: 4})
		if err != nil {
			t.Fatal(err)
		}
		tx.Tx(b)
		posted := tx.Outstanding()
		if posted == 0 || tx.Stats.Packets != n {
			t.Fatalf("posted %d WQEBBs for %d packets", posted, tx.Stats.Packets)
		}
		// The first WQEBB index of the last WQE posted.
		last := tx.cc
		for last+uint32(tx.info[last&tx.mask].wqebbs) != tx.pc {
			last += uint32(tx.info[last&tx.mask].wqebbs)
		}
		k := min(len(data)/CQESize, 62)
		for i := 0; i < k; i++ {
			c := txRing[i*CQESize : (i+1)*CQESize]
			copy(c, data[i*CQESize:])
			c[CQEOffOpOwn] &^= CQEOwnerMask // lap 0: owned by software
		}
		tx.Reap()
		if tx.Outstanding() > posted {
			t.Fatalf("completed past the producer: %d outstanding of %d posted", tx.Outstanding(), posted)
		}
		if got := uint64(tx.cq.cc); got > uint64(k) || got != tx.Stats.CQEs+tx.Stats.BadCQEs {
			t.Fatalf("consumed %d of %d CQEs, counted %d good and %d bad", got, k, tx.Stats.CQEs, tx.Stats.BadCQEs)
		}
		for i, r := range rx.pool.recs {
			if r.refs < 0 {
				t.Fatalf("WQE %d: %d references: a buffer was released twice", i, r.refs)
			}
		}
		if tx.Outstanding() != 0 {
			i := tx.cq.cc
			c := txRing[(i&tx.cq.mask)*CQESize:][:CQESize]
			clear(c)
			binary.BigEndian.PutUint16(c[CQEOffWQECounter:], uint16(last))
			c[CQEOffOpOwn] = CQEReq<<CQEOpcodeShift | uint8(i>>tx.cq.logSize)&CQEOwnerMask
			tx.Reap()
		}
		if tx.Outstanding() != 0 {
			t.Fatalf("%d WQEBBs outstanding after the last WQE's completion", tx.Outstanding())
		}
		for i, r := range rx.pool.recs {
			if r.refs != 0 {
				t.Fatalf("WQE %d: %d references after every packet's completion", i, r.refs)
			}
		}
	})
}
