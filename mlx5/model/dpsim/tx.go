package dpsim

import (
	"encoding/binary"
	"fmt"

	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// TxStats counts what the model's send side did.
type TxStats struct {
	Doorbells, WQEs, WQEBBs, NOPs, MPWQEs, Sends uint64
	Packets, Bytes                               uint64
	CQEs                                         uint64
}

// Sink receives each transmitted frame; the slice is only valid during the call.
type Sink func(frame []byte)

// TxQueue is the device side of one send queue and its CQ.
type TxQueue struct {
	mem   *Memory
	ring  []byte
	mask  uint32
	dbr   []byte
	sqn   uint32
	cq    []byte
	cqLog uint8
	cqDBR []byte
	hwCI  uint32
	pi    uint32
	buf   []byte
	err   error

	// Deferred: doorbells only record; Process runs the queue.
	Deferred bool
	// FragmentWQEBBs > 0 rejects WQEs that cross a fragment edge (the
	// kernel-compat knob: the driver promises its WQEs never do).
	FragmentWQEBBs int
	// MinInline: SEND WQEs must inline at least this many header bytes.
	MinInline int
	// MaxFrame: longest frame the port sends.
	MaxFrame int
	// EnhancedMPW: opcode 0x29 is supported.
	EnhancedMPW bool
	// MaxWQEBBs is the device's largest WQE (cap max_wqe_sz_sq / 64, at
	// most 16): a longer one completes in error.
	MaxWQEBBs int
	// Sink gets every sent frame (nil: counted only).
	Sink Sink

	Stats TxStats
}

func newTxQueue(mem *Memory, sq *dp.SQMem, cq *dp.CQMem) *TxQueue {
	return &TxQueue{mem: mem, ring: sq.Ring, mask: 1<<sq.LogWQEBBs - 1, dbr: sq.DBRec, sqn: sq.SQN,
		cq: cq.Ring, cqLog: cq.LogSize, cqDBR: cq.DBRec, buf: make([]byte, 16384),
		MaxFrame: 9216 + 22, EnhancedMPW: sq.EnhancedMPW, MinInline: sq.MinInline, MaxWQEBBs: 16}
}

// NewTxQueue is the device side of a created SQ and its CQ over mem (for
// models that create queues through commands, mlx5/model/fullsim).
func NewTxQueue(mem *Memory, sq *dp.SQMem, cq *dp.CQMem) *TxQueue { return newTxQueue(mem, sq, cq) }

// Doorbell is the UAR send doorbell write (ctrl: the first 8 bytes of the
// last posted WQE's control segment), for models that decode BAR0 themselves.
func (t *TxQueue) Doorbell(ctrl uint64) { t.doorbell(ctrl) }

// Err is the first firmware-level error the queue hit (nil: none). After an
// error the queue is in the error state and processes nothing more.
func (t *TxQueue) Err() error { return t.err }

// doorbell is the UAR send doorbell: ctrl is the first 8 bytes of the last
// posted WQE's control segment.
func (t *TxQueue) doorbell(ctrl uint64) {
	t.Stats.Doorbells++
	if t.err != nil {
		return
	}
	pc := loadBE32(t.dbr[prm.SndDoorbellOffset:]) & prm.WQECounterMask
	idx := uint32(ctrl>>40) & prm.WQECounterMask
	// The doorbell record must already cover the WQE being rung.
	if (idx-t.hwCI)&prm.WQECounterMask >= (pc-t.hwCI)&prm.WQECounterMask {
		t.fail(idx, 0, prm.CQESyndromeLocalQPOp, "doorbell for WQE %d not covered by the doorbell record (%d)", idx, pc)
		return
	}
	if uint32(ctrl>>8)&0xFFFFFF != t.sqn {
		t.fail(idx, 0, prm.CQESyndromeLocalQPOp, "doorbell names SQ %#x, not %#x", uint32(ctrl>>8)&0xFFFFFF, t.sqn)
		return
	}
	if !t.Deferred {
		t.Process()
	}
}

// Process runs every WQE the doorbell record covers and returns how many.
func (t *TxQueue) Process() int {
	n := 0
	pc := loadBE32(t.dbr[prm.SndDoorbellOffset:]) & prm.WQECounterMask
	for t.err == nil && t.hwCI&prm.WQECounterMask != pc {
		if !t.one() {
			break
		}
		n++
	}
	return n
}

func (t *TxQueue) fail(idx uint32, opcode uint8, synd uint8, format string, args ...any) {
	t.err = fmt.Errorf("dpsim: SQ %#x WQE %d: "+format, append([]any{t.sqn, idx}, args...)...)
	c := make([]byte, prm.CQESize)
	binary.BigEndian.PutUint32(c[prm.CQEOffSopDropQPN:], uint32(opcode)<<24|t.sqn)
	binary.BigEndian.PutUint16(c[prm.CQEOffWQECounter:], uint16(idx))
	c[prm.ErrCQEOffSyndrome] = synd
	t.complete(c, prm.CQEOpReqErr)
}

// complete writes a CQE (body first, owner byte last).
func (t *TxQueue) complete(body []byte, opcode uint8) {
	size := uint32(1) << t.cqLog
	ci := loadBE32(t.cqDBR[prm.CQDoorbellSetCI:]) & prm.CQIndexMask
	if (t.pi-ci)&prm.CQIndexMask >= size {
		if t.err == nil {
			t.err = fmt.Errorf("dpsim: SQ %#x: CQ overrun (producer %d, consumer %d)", t.sqn, t.pi, ci)
		}
		return
	}
	o := (t.pi & (size - 1)) * prm.CQESize
	c := t.cq[o : o+prm.CQESize]
	copy(c[:prm.CQEOffWQECounter], body[:prm.CQEOffWQECounter])
	publishOwnerWord(c, body[prm.CQEOffWQECounter], body[prm.CQEOffWQECounter+1], uint8(t.pi>>t.cqLog), opcode<<prm.CQEOpcodeShift|uint8(t.pi>>t.cqLog)&1)
	t.pi++
	t.Stats.CQEs++
}

// one validates and executes the WQE at hwCI.
func (t *TxQueue) one() bool {
	idx := t.hwCI & prm.WQECounterMask
	pi := t.hwCI & t.mask
	w := t.ring[pi*prm.SendWQEBB:]
	oio := binary.BigEndian.Uint32(w[prm.WQECtrlOffOpmodIdxOpcode:])
	qds := binary.BigEndian.Uint32(w[prm.WQECtrlOffQPNDS:])
	opcode := uint8(oio)
	ds := qds & prm.WQECtrlDSMask
	switch {
	case (oio>>8)&prm.WQECounterMask != idx:
		t.fail(idx, opcode, prm.CQESyndromeLocalQPOp, "wqe_index %d, expected %d", (oio>>8)&prm.WQECounterMask, idx)
		return false
	case qds>>8 != t.sqn:
		t.fail(idx, opcode, prm.CQESyndromeLocalQPOp, "qpn %#x, expected %#x", qds>>8, t.sqn)
		return false
	case ds == 0:
		t.fail(idx, opcode, prm.CQESyndromeLocalQPOp, "ds = 0")
		return false
	case oio>>24 != 0:
		t.fail(idx, opcode, prm.CQESyndromeLocalQPOp, "opmod %d", oio>>24)
		return false
	}
	n := (ds*prm.SendWQEDS + prm.SendWQEBB - 1) / prm.SendWQEBB
	if n > uint32(t.MaxWQEBBs) {
		t.fail(idx, opcode, prm.CQESyndromeLocalQPOp, "WQE of %d WQEBBs exceeds max_wqe_sz_sq (%d WQEBBs)", n, t.MaxWQEBBs)
		return false
	}
	if pi+n > t.mask+1 {
		t.fail(idx, opcode, prm.CQESyndromeLocalQPOp, "WQE of %d WQEBBs at slot %d crosses the ring end (%d)", n, pi, t.mask+1)
		return false
	}
	if f := uint32(t.FragmentWQEBBs); f > 0 && pi/f != (pi+n-1)/f {
		t.fail(idx, opcode, prm.CQESyndromeLocalQPOp, "WQE of %d WQEBBs at slot %d crosses a %d-WQEBB fragment edge", n, pi, f)
		return false
	}
	wqe := w[:ds*prm.SendWQEDS]
	var ok bool
	switch opcode {
	case prm.SendOpNOP:
		t.Stats.NOPs++
		ok = true
	case prm.SendOpEnhancedMPSW:
		ok = t.mpw(idx, wqe, n)
		t.Stats.MPWQEs++
	case prm.SendOpSend:
		ok = t.send(idx, wqe)
		t.Stats.Sends++
	default:
		t.fail(idx, opcode, prm.CQESyndromeLocalQPOp, "unsupported opcode %#x", opcode)
		return false
	}
	if !ok {
		return false
	}
	t.hwCI += n
	t.Stats.WQEs++
	t.Stats.WQEBBs += uint64(n)
	if (w[prm.WQECtrlOffFmCeSe]>>prm.WQECtrlCEShift)&prm.WQECtrlCEMask >= 2 {
		var c [prm.CQESize]byte
		binary.BigEndian.PutUint32(c[prm.CQEOffSopDropQPN:], uint32(opcode)<<24|t.sqn)
		binary.BigEndian.PutUint16(c[prm.CQEOffWQECounter:], uint16(idx))
		t.complete(c[:], prm.CQEOpReq)
	}
	return t.err == nil
}

func (t *TxQueue) mpw(idx uint32, w []byte, n uint32) bool {
	if !t.EnhancedMPW {
		t.fail(idx, prm.SendOpEnhancedMPSW, prm.CQESyndromeLocalQPOp, "enhanced MPW not enabled")
		return false
	}
	ds := uint32(len(w)) / prm.SendWQEDS
	if ds < 3 {
		t.fail(idx, prm.SendOpEnhancedMPSW, prm.CQESyndromeLocalQPOp, "eMPWQE of %d DS / %d WQEBBs", ds, n)
		return false
	}
	eth := w[prm.WQEEthSegOff : prm.WQEEthSegOff+prm.SendWQEDS]
	if binary.BigEndian.Uint16(eth[prm.WQEEthOffInlineHdrSz:]) != 0 {
		t.fail(idx, prm.SendOpEnhancedMPSW, prm.CQESyndromeLocalQPOp, "eMPWQE with inline_hdr_sz %d", binary.BigEndian.Uint16(eth[prm.WQEEthOffInlineHdrSz:]))
		return false
	}
	for d := uint32(2); d < ds; {
		e := w[d*prm.SendWQEDS:]
		bc := binary.BigEndian.Uint32(e[prm.WQEDataOffByteCount:])
		if bc&prm.WQEInlineSeg != 0 {
			l := bc &^ prm.WQEInlineSeg
			span := (4 + l + prm.SendWQEDS - 1) / prm.SendWQEDS
			if d+span > ds || int(l) > t.MaxFrame || l < 14 {
				t.fail(idx, prm.SendOpEnhancedMPSW, prm.CQESyndromeLocalLength, "inline entry of %d bytes at DS %d of %d", l, d, ds)
				return false
			}
			t.deliver(e[4 : 4+l])
			d += span
			continue
		}
		if bc < 14 || int(bc) > t.MaxFrame {
			t.fail(idx, prm.SendOpEnhancedMPSW, prm.CQESyndromeLocalLength, "packet of %d bytes at DS %d", bc, d)
			return false
		}
		if !t.gather(idx, prm.SendOpEnhancedMPSW, e, t.buf[:bc]) {
			return false
		}
		t.deliver(t.buf[:bc])
		d++
	}
	return true
}

// gather reads a data segment's bytes, checking lkey and mapping.
func (t *TxQueue) gather(idx uint32, opcode uint8, seg []byte, dst []byte) bool {
	if !t.mem.keyValid(binary.BigEndian.Uint32(seg[prm.WQEDataOffLKey:])) {
		t.fail(idx, opcode, prm.CQESyndromeLocalProtection, "lkey %#x", binary.BigEndian.Uint32(seg[prm.WQEDataOffLKey:]))
		return false
	}
	addr := binary.BigEndian.Uint64(seg[prm.WQEDataOffAddr:])
	// Without a sink nothing consumes the bytes: the segment is checked
	// but not read. Reading it with the CPU would pull every payload line
	// into the caches the driver runs on, which a NIC's DMA read does not.
	if ok := t.mem.mapped(addr, len(dst)); !ok || t.Sink != nil && !t.mem.read(dst, addr) {
		t.fail(idx, opcode, prm.CQESyndromeLocalProtection, "address %#x+%d not mapped", addr, len(dst))
		return false
	}
	return true
}

func (t *TxQueue) send(idx uint32, w []byte) bool {
	ds := uint32(len(w)) / prm.SendWQEDS
	if ds < 2 {
		t.fail(idx, prm.SendOpSend, prm.CQESyndromeLocalQPOp, "SEND of %d DS", ds)
		return false
	}
	eth := w[prm.WQEEthSegOff : prm.WQEEthSegOff+prm.SendWQEDS]
	inl := uint32(binary.BigEndian.Uint16(eth[prm.WQEEthOffInlineHdrSz:]))
	if inl&0x8000 != 0 {
		t.fail(idx, prm.SendOpSend, prm.CQESyndromeLocalQPOp, "VLAN insertion not modelled")
		return false
	}
	next := uint32(2)
	if inl > 2 {
		next += (inl - 2 + prm.SendWQEDS - 1) / prm.SendWQEDS
	}
	if next > ds || int(inl) > t.MaxFrame {
		t.fail(idx, prm.SendOpSend, prm.CQESyndromeLocalLength, "inline header of %d bytes exceeds the WQE (%d DS)", inl, ds)
		return false
	}
	copy(t.buf, eth[prm.WQEEthOffInlineHdrStr:prm.WQEEthOffInlineHdrStr+min(inl, 2)])
	if inl > 2 {
		copy(t.buf[2:inl], w[2*prm.SendWQEDS:])
	}
	total := inl
	for d := next; d < ds; d++ {
		e := w[d*prm.SendWQEDS:]
		bc := binary.BigEndian.Uint32(e[prm.WQEDataOffByteCount:])
		if bc&prm.WQEInlineSeg != 0 || bc == 0 || int(total+bc) > t.MaxFrame {
			t.fail(idx, prm.SendOpSend, prm.CQESyndromeLocalLength, "data segment of %#x bytes", bc)
			return false
		}
		if !t.gather(idx, prm.SendOpSend, e, t.buf[total:total+bc]) {
			return false
		}
		total += bc
	}
	if int(inl) < t.MinInline && total > inl {
		t.fail(idx, prm.SendOpSend, prm.CQESyndromeLocalQPOp, "inline header %d below the required %d", inl, t.MinInline)
		return false
	}
	if total < 14 {
		t.fail(idx, prm.SendOpSend, prm.CQESyndromeLocalLength, "frame of %d bytes", total)
		return false
	}
	t.deliver(t.buf[:total])
	return true
}

func (t *TxQueue) deliver(f []byte) {
	t.Stats.Packets++
	t.Stats.Bytes += uint64(len(f))
	if t.Sink != nil {
		t.Sink(f)
	}
}
