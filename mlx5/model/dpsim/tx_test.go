package dpsim

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/mlx5/dp"
)

type sqRig struct {
	mem  *Memory
	t    *TxQueue
	ring []byte
	dbr  []byte
	cq   []byte
	buf  []byte
	iova uint64
	sent [][]byte
}

// newSQRig is a 64-WQEBB SQ with a 64-entry CQ and one mapped buffer page.
func newSQRig(t *testing.T) *sqRig {
	mem, err := NewMemory(64*1024, 8192, Contiguous, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	ring, _, _ := mem.AllocRing(64 * 64)
	cq, _, _ := mem.AllocRing(64 * 64)
	dbr, _, _ := mem.AllocRing(4096)
	for i := dp.CQEOffOpOwn; i < len(cq); i += dp.CQESize {
		cq[i] = dp.CQEInvalidOpOwn
	}
	pages, iova, _ := mem.AllocBuffers(4096)
	r := &sqRig{mem: mem, ring: ring, dbr: dbr[:8], cq: cq, buf: pages[0], iova: iova}
	r.t = newTxQueue(mem, &dp.SQMem{SQN: 0x42, Ring: ring, LogWQEBBs: 6, DBRec: r.dbr, EnhancedMPW: true},
		&dp.CQMem{Ring: cq, LogSize: 6, DBRec: dbr[64:72]})
	r.t.Sink = func(f []byte) { r.sent = append(r.sent, append([]byte(nil), f...)) }
	r.t.MaxFrame = 1522
	for i := range r.buf {
		r.buf[i] = byte(i)
	}
	return r
}

// ctrl writes a control segment at WQEBB slot pi for counter pc.
func (r *sqRig) ctrl(pi, pc uint32, opcode uint8, ds uint32) []byte {
	w := r.ring[pi*64:]
	clear(w[:64])
	binary.BigEndian.PutUint32(w[0:], pc<<8|uint32(opcode))
	binary.BigEndian.PutUint32(w[4:], 0x42<<8|ds)
	w[dp.CtrlOffFmCeSe] = dp.CtrlCQUpdate
	return w
}

func (r *sqRig) dseg(d []byte, off, n int, lkey uint32) {
	binary.BigEndian.PutUint32(d[0:], uint32(n))
	binary.BigEndian.PutUint32(d[4:], lkey)
	binary.BigEndian.PutUint64(d[8:], r.iova+uint64(off))
}

func (r *sqRig) ring_(pc uint32, last []byte) {
	binary.BigEndian.PutUint32(r.dbr[4:], pc)
	r.t.doorbell(binary.BigEndian.Uint64(last[:8]))
}

func (r *sqRig) cqe(i int) (op uint8, synd uint8, counter uint16) {
	c := r.cq[i*64:]
	return c[63] >> 4, c[dp.ErrCQEOffSyndrome], binary.BigEndian.Uint16(c[dp.CQEOffWQECounter:])
}

func TestModelMPWQEDelivers(t *testing.T) {
	r := newSQRig(t)
	w := r.ctrl(0, 0, dp.OpEnhancedMPSW, 5)
	r.dseg(w[32:], 100, 60, r.mem.LKey)
	r.dseg(w[48:], 300, 70, r.mem.LKey)
	r.dseg(w[64:], 600, 80, r.mem.LKey)
	r.ring_(2, w)
	if r.t.Err() != nil {
		t.Fatal(r.t.Err())
	}
	if len(r.sent) != 3 || len(r.sent[2]) != 80 || r.sent[1][0] != byte(300%256) {
		t.Fatalf("sent %d frames", len(r.sent))
	}
	if op, _, ctr := r.cqe(0); op != dp.CQEReq || ctr != 0 {
		t.Fatalf("CQE opcode %d counter %d", op, ctr)
	}
}

func TestModelRejects(t *testing.T) {
	cases := []struct {
		name  string
		build func(r *sqRig) (pc uint32, last []byte)
		want  string
		synd  uint8
	}{
		{"crosses ring end", func(r *sqRig) (uint32, []byte) {
			// Fill slots 0..61 with NOPs, then a 3-WQEBB MPWQE at slot 62.
			for i := uint32(0); i < 62; i++ {
				r.ctrl(i, i, dp.OpNOP, 1)[dp.CtrlOffFmCeSe] = 0
			}
			w := r.ctrl(62, 62, dp.OpEnhancedMPSW, 9)
			for d := 2; d < 8; d++ { // the rest would wrap to slot 0
				r.dseg(w[d*16:], 0, 60, r.mem.LKey)
			}
			return 65, w
		}, "crosses the ring end", dp.SyndromeLocalQPOp},
		{"crosses fragment edge", func(r *sqRig) (uint32, []byte) {
			r.t.FragmentWQEBBs = 16
			for i := uint32(0); i < 15; i++ {
				r.ctrl(i, i, dp.OpNOP, 1)[dp.CtrlOffFmCeSe] = 0
			}
			w := r.ctrl(15, 15, dp.OpEnhancedMPSW, 6)
			for d := 2; d < 6; d++ {
				r.dseg(w[d*16:], 0, 60, r.mem.LKey)
			}
			return 17, w
		}, "fragment edge", dp.SyndromeLocalQPOp},
		{"inline header in eMPWQE", func(r *sqRig) (uint32, []byte) {
			w := r.ctrl(0, 0, dp.OpEnhancedMPSW, 3)
			binary.BigEndian.PutUint16(w[16+dp.EthOffInlineHdrSz:], 18)
			r.dseg(w[32:], 0, 60, r.mem.LKey)
			return 1, w
		}, "inline_hdr_sz", dp.SyndromeLocalQPOp},
		{"bad lkey", func(r *sqRig) (uint32, []byte) {
			w := r.ctrl(0, 0, dp.OpEnhancedMPSW, 3)
			r.dseg(w[32:], 0, 60, 0x999)
			return 1, w
		}, "lkey", dp.SyndromeLocalProtection},
		{"unmapped address", func(r *sqRig) (uint32, []byte) {
			w := r.ctrl(0, 0, dp.OpEnhancedMPSW, 3)
			r.dseg(w[32:], 1<<30, 60, r.mem.LKey)
			return 1, w
		}, "not mapped", dp.SyndromeLocalProtection},
		{"unmapped address, no sink", func(r *sqRig) (uint32, []byte) {
			r.t.Sink = nil // the segment is checked even when no byte is read
			w := r.ctrl(0, 0, dp.OpEnhancedMPSW, 3)
			r.dseg(w[32:], 1<<30, 60, r.mem.LKey)
			return 1, w
		}, "not mapped", dp.SyndromeLocalProtection},
		{"runs off the mapping, no sink", func(r *sqRig) (uint32, []byte) {
			r.t.Sink = nil // the page after the buffer page is not mapped
			w := r.ctrl(0, 0, dp.OpEnhancedMPSW, 3)
			r.dseg(w[32:], 4096-30, 60, r.mem.LKey)
			return 1, w
		}, "not mapped", dp.SyndromeLocalProtection},
		{"wrong wqe_index", func(r *sqRig) (uint32, []byte) {
			r.ctrl(0, 5, dp.OpNOP, 1) // slot 0 claims counter 5
			return 2, r.ctrl(1, 1, dp.OpNOP, 1)
		}, "wqe_index", dp.SyndromeLocalQPOp},
		{"runt packet", func(r *sqRig) (uint32, []byte) {
			w := r.ctrl(0, 0, dp.OpEnhancedMPSW, 3)
			r.dseg(w[32:], 0, 8, r.mem.LKey)
			return 1, w
		}, "packet of 8 bytes", dp.SyndromeLocalLength},
		{"too many WQEBBs", func(r *sqRig) (uint32, []byte) {
			r.t.MaxWQEBBs = 15 // a device with max_wqe_sz_sq 960
			w := r.ctrl(0, 0, dp.OpEnhancedMPSW, 63)
			for d := 2; d < 63; d++ {
				r.dseg(w[d*16:], 0, 60, r.mem.LKey)
			}
			return 16, w
		}, "WQE of 16 WQEBBs exceeds max_wqe_sz_sq", dp.SyndromeLocalQPOp},
		{"unknown opcode", func(r *sqRig) (uint32, []byte) {
			return 1, r.ctrl(0, 0, 0x77, 1)
		}, "unsupported opcode", dp.SyndromeLocalQPOp},
		{"SEND below min inline", func(r *sqRig) (uint32, []byte) {
			r.t.MinInline = 18
			w := r.ctrl(0, 0, dp.OpSend, 3)
			r.dseg(w[32:], 0, 60, r.mem.LKey)
			return 1, w
		}, "below the required 18", dp.SyndromeLocalQPOp},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newSQRig(t)
			pc, last := c.build(r)
			r.ring_(pc, last)
			err := r.t.Err()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one mentioning %q", err, c.want)
			}
			// The error CQE is the last written one.
			op, synd, _ := r.cqe(int(r.t.pi - 1))
			if op != dp.CQEReqErr || synd != c.synd {
				t.Fatalf("CQE opcode %d syndrome %#x, want %d/%#x", op, synd, dp.CQEReqErr, c.synd)
			}
		})
	}
}

// TestModelDoorbellBeforeRecord: ringing before the doorbell record covers
// the WQE is the ordering bug the model must catch.
func TestModelDoorbellBeforeRecord(t *testing.T) {
	r := newSQRig(t)
	w := r.ctrl(0, 0, dp.OpNOP, 1)
	r.t.doorbell(binary.BigEndian.Uint64(w[:8])) // DBR still 0
	if r.t.Err() == nil || !strings.Contains(r.t.Err().Error(), "not covered") {
		t.Fatalf("error %v", r.t.Err())
	}
}
