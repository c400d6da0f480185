package sim

import (
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// Data-path queues: CQ, RQ, SQ and TIS creation, their state machine, and
// what the data-path model reads back about them.

// CQInfo describes a created CQ to the data-path model.
type CQInfo struct {
	CQN        uint32
	Base       uint64
	LogSize    uint8
	DBR        uint64
	EQN        uint32
	CompEn     bool
	CompLayout uint8
	MiniFormat uint8
}

func (d *Device) createCQ(in, out []byte) (uint8, uint32) {
	var st uint8
	eq := d.ref(kEQ, prm.CQCEQN.Get(in), &st)
	uar := d.ref(kUAR, prm.CQCUARPage.Get(in), &st)
	if st != 0 {
		return st, synBadObject
	}
	logSize := prm.CQCLogSize.Get(in)
	if logSize > uint64(d.cfg.LogMaxCQSz) || prm.CQCCQESz.Get(in) != 0 {
		return prm.StatusBadParam, synBadSize
	}
	comp := prm.CQCCompEn.Get(in) == 1
	layout := prm.CQCCompLayout.Get(in)
	format := prm.CQCMiniCQEFormat.Get(in)
	if comp && (!d.cfg.CQECompression ||
		layout > prm.CQECompLayoutEnhanced ||
		layout == prm.CQECompLayoutEnhanced && !d.cfg.EnhancedCQECompression ||
		(format == prm.MiniCQEFtagStridx || format == prm.MiniCQECsumStridx) && !d.cfg.MiniCQEStrideIndex) {
		return prm.StatusBadParam, synBadField
	}
	base, st, syn := d.checkBuffer(in, (1<<logSize)*64, prm.CQCLogPageSize.Get(in))
	if st != 0 {
		return st, syn
	}
	dbr := prm.CQCDBRAddr.Get(in)
	if st, syn := d.checkDBR(dbr, 8); st != 0 {
		return st, syn
	}
	info := CQInfo{Base: base, LogSize: uint8(logSize), DBR: dbr, EQN: eq.id, CompEn: comp, CompLayout: uint8(layout), MiniFormat: uint8(format)}
	o := d.objs.create(kCQ, &info, eq, uar)
	info.CQN = o.id
	prm.OutObjID.Set(out, uint64(o.id))
	return 0, 0
}

// RQInfo describes a created RQ to the data-path model.
type RQInfo struct {
	RQN, CQN      uint32
	State         uint8
	WQType        uint8
	Base          uint64
	LogWQSz       uint8
	LogStrides    int8 // log2(strides per WQE)
	LogStrideSize uint8
	TwoByteShift  bool
	DBR           uint64
	VSD           bool // VLAN strip disable: tags stay in the frame
	EndPad        bool // end_padding_mode ALIGN: packet writes end on a cache line
}

// stridesLog decodes log_wqe_num_of_strides (4-bit two's complement around 9).
func (d *Device) stridesLog(field uint64) (int8, bool) {
	v := int8(field&0xF) << 4 >> 4
	l := v + prm.MPWQELogStridesBase
	switch {
	case l >= 9 && l <= 16:
		return l, true
	case l >= 3 && l <= 8:
		return l, d.cfg.ExtStrideNumRange
	}
	return l, false
}

func (d *Device) createRQ(in, out []byte) (uint8, uint32) {
	var st uint8
	cq := d.ref(kCQ, prm.RQCCQN.Get(in), &st)
	pd := d.ref(kPD, prm.RQWQPD.Get(in), &st)
	if st != 0 {
		return st, synBadObject
	}
	if prm.RQCState.Get(in) != prm.QueueStateRST || prm.RQCMemRQType.Get(in) != 0 {
		return prm.StatusBadParam, synBadState
	}
	if !tsAllowed(d.cfg.RQTSFormat, prm.RQCTSFormat.Get(in)) {
		return prm.StatusBadParam, synBadField
	}
	wqType := prm.RQWQType.Get(in)
	logSz := prm.RQWQLogSz.Get(in)
	info := RQInfo{WQType: uint8(wqType), LogWQSz: uint8(logSz), CQN: cq.id, VSD: prm.RQCVSD.Get(in) == 1,
		EndPad: prm.RQWQEndPadding.Get(in) == prm.WQEndPadAlign}
	stride := prm.RQWQLogStride.Get(in)
	switch wqType {
	case prm.WQTypeCyclicStridingRQ, prm.WQTypeLinkedListStridingRQ:
		if !d.cfg.StridingRQ || stride != 5 {
			return prm.StatusBadParam, synBadField
		}
		l, ok := d.stridesLog(prm.RQWQLogNumStrides.Get(in))
		ss := prm.RQWQLogStrideSize.Get(in) + prm.MPWQELogStrideSzBase
		minSS := uint64(6)
		if prm.CapCacheLine128.Get(d.curGeneral) == 1 {
			minSS = 7
		}
		if !ok || ss < minSS || ss > 13 {
			return prm.StatusBadParam, synBadField
		}
		info.LogStrides, info.LogStrideSize = l, uint8(ss)
		info.TwoByteShift = prm.RQWQTwoByteShift.Get(in) == 1
	case prm.WQTypeCyclic:
		if stride < 4 {
			return prm.StatusBadParam, synBadField
		}
	default:
		return prm.StatusBadParam, synBadField
	}
	if logSz > uint64(d.cfg.LogMaxWQSz) {
		return prm.StatusBadParam, synBadSize
	}
	base, st, syn := d.checkBuffer(in, (1<<logSz)<<stride, prm.RQWQLogPgSz.Get(in))
	if st != 0 {
		return st, syn
	}
	info.Base = base
	info.DBR = prm.RQWQDBRAddr.Get(in)
	if st, syn := d.checkDBR(info.DBR, 4); st != 0 {
		return st, syn
	}
	o := d.objs.create(kRQ, &info, cq, pd)
	info.RQN = o.id
	prm.OutObjID.Set(out, uint64(o.id))
	return 0, 0
}

func (d *Device) modifyRQ(in, out []byte) (uint8, uint32) {
	o := d.objs.get(kRQ, uint32(prm.ModifyRQN.Get(in)))
	if o == nil {
		return prm.StatusBadResource, synBadObject
	}
	info := o.data.(*RQInfo)
	return transition(&info.State, prm.ModifyRQCurState.Get(in), prm.ModifyRQNextState.Get(in))
}

// tsAllowed: a queue's ts_format must be one the cap allows (mlx5_ifc.h
// MLX5_TIMESTAMP_FORMAT_CAP_*): DEFAULT is always accepted.
func tsAllowed(capv uint8, ts uint64) bool {
	switch ts {
	case prm.TSDefault:
		return true
	case prm.TSFreeRunning:
		return capv != prm.TSCapRealTime
	case prm.TSRealTime:
		return capv != prm.TSCapFreeRunning
	}
	return false
}

func legalTransition(cur, next uint64) bool {
	switch cur {
	case prm.QueueStateRST:
		return next == prm.QueueStateRDY || next == prm.QueueStateRST
	case prm.QueueStateRDY:
		return next == prm.QueueStateERR || next == prm.QueueStateRST || next == prm.QueueStateRDY
	case prm.QueueStateERR:
		return next == prm.QueueStateRST
	}
	return false
}

// SQInfo describes a created SQ to the data-path model.
type SQInfo struct {
	SQN, CQN, TISN uint32
	State          uint8
	Base           uint64
	LogWQSz        uint8
	UAR            uint32
	DBR            uint64
	MinInline      uint8
	AllowMPW       bool
}

func (d *Device) createSQ(in, out []byte) (uint8, uint32) {
	var st uint8
	cq := d.ref(kCQ, prm.SQCCQN.Get(in), &st)
	pd := d.ref(kPD, prm.SQWQPD.Get(in), &st)
	uar := d.ref(kUAR, prm.SQWQUARPage.Get(in), &st)
	tis := d.ref(kTIS, prm.SQCTISNum0.Get(in), &st)
	if st != 0 {
		return st, synBadObject
	}
	if prm.SQCState.Get(in) != prm.QueueStateRST || prm.SQWQType.Get(in) != prm.WQTypeCyclic ||
		prm.SQWQLogStride.Get(in) != 6 || prm.SQCTISListSize.Get(in) != 1 {
		return prm.StatusBadParam, synBadField
	}
	if !tsAllowed(d.cfg.SQTSFormat, prm.SQCTSFormat.Get(in)) {
		return prm.StatusBadParam, synBadField
	}
	if prm.SQCAllowMultiPkt.Get(in) == 1 && d.cfg.MultiPktSendWQE == 0 {
		// A context bit the device does not advertise (cap
		// multi_pkt_send_wqe); DPDK sets it only when that cap is on.
		return prm.StatusBadParam, synBadField
	}
	minInline := prm.SQCMinInline.Get(in)
	if d.cfg.WQEInlineMode == prm.CapInlineVport && minInline < uint64(d.cfg.VportMinInline) {
		return prm.StatusBadParam, synBadField
	}
	logSz := prm.SQWQLogSz.Get(in)
	if logSz > uint64(d.cfg.LogMaxWQSz) {
		return prm.StatusBadParam, synBadSize
	}
	base, st, syn := d.checkBuffer(in, (1<<logSz)*prm.SendWQEBB, prm.SQWQLogPgSz.Get(in))
	if st != 0 {
		return st, syn
	}
	dbr := prm.SQWQDBRAddr.Get(in)
	if st, syn := d.checkDBR(dbr, 8); st != 0 {
		return st, syn
	}
	info := &SQInfo{CQN: cq.id, TISN: tis.id, Base: base, LogWQSz: uint8(logSz), UAR: uar.id, DBR: dbr,
		MinInline: uint8(minInline), AllowMPW: prm.SQCAllowMultiPkt.Get(in) == 1}
	o := d.objs.create(kSQ, info, cq, pd, uar, tis)
	info.SQN = o.id
	prm.OutObjID.Set(out, uint64(o.id))
	return 0, 0
}

func (d *Device) modifySQ(in, out []byte) (uint8, uint32) {
	o := d.objs.get(kSQ, uint32(prm.ModifySQN.Get(in)))
	if o == nil {
		return prm.StatusBadResource, synBadObject
	}
	info := o.data.(*SQInfo)
	return transition(&info.State, prm.ModifySQCurState.Get(in), prm.ModifySQNextState.Get(in))
}

func (d *Device) createTIS(in, out []byte) (uint8, uint32) {
	var st uint8
	td := d.ref(kTD, prm.TISCTD.Get(in), &st)
	if st != 0 {
		return st, synBadObject
	}
	prm.OutObjID.Set(out, uint64(d.objs.create(kTIS, nil, td).id))
	return 0, 0
}

// CQ reports a live CQ (for the data-path model).
func (d *Device) CQ(cqn uint32) (CQInfo, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.objs.get(kCQ, cqn)
	if o == nil {
		return CQInfo{}, false
	}
	return *o.data.(*CQInfo), true
}

// RQ reports a live RQ, including its current state (for the data-path model).
func (d *Device) RQ(rqn uint32) (RQInfo, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.objs.get(kRQ, rqn)
	if o == nil {
		return RQInfo{}, false
	}
	return *o.data.(*RQInfo), true
}

// SQ reports a live SQ, including its current state (for the data-path model).
func (d *Device) SQ(sqn uint32) (SQInfo, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.objs.get(kSQ, sqn)
	if o == nil {
		return SQInfo{}, false
	}
	return *o.data.(*SQInfo), true
}

// transition applies a MODIFY_RQ/MODIFY_SQ state change as firmware does:
// the stated current state must be the object's, and the move must be legal.
func transition(state *uint8, cur, next uint64) (uint8, uint32) {
	if cur != uint64(*state) {
		return prm.StatusBadResState, synBadState
	}
	if !legalTransition(cur, next) {
		return prm.StatusBadParam, synBadState
	}
	*state = uint8(next)
	return 0, 0
}
