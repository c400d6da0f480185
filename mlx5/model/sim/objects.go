package sim

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

type kind uint8

const (
	kUAR kind = iota
	kPD
	kTD
	kMkey
	kEQ
	kCQ
	kRQ
	kSQ
	kTIS
	kRQT
	kTIR
	kFT
	kFG
	kFTE
	numKinds
)

var kindNames = [numKinds]string{"UAR", "PD", "TD", "MKEY", "EQ", "CQ", "RQ", "SQ", "TIS", "RQT", "TIR", "FLOW_TABLE", "FLOW_GROUP", "FTE"}

// object is one firmware object. uses are the objects it references; users
// counts references to it, and a referenced object cannot be destroyed.
type object struct {
	kind  kind
	id    uint32
	uses  []*object
	users int
	data  any
}

func (o *object) String() string { return fmt.Sprintf("%s %#x", kindNames[o.kind], o.id) }

type objects struct {
	next [numKinds]uint32
	tab  [numKinds]map[uint32]*object
}

func newObjects() objects {
	var o objects
	for k := range o.tab {
		o.tab[k] = map[uint32]*object{}
		// Ids start at a non-zero, kind-specific value so a driver that
		// mixes up object kinds hits "no such object".
		o.next[k] = uint32(k+1) << 4
	}
	o.next[kEQ] = 1 // 8-bit EQ numbers
	o.next[kUAR] = 1
	return o
}

func (o *objects) create(k kind, data any, uses ...*object) *object {
	id := o.next[k]
	o.next[k]++
	if k == kEQ {
		id &= 0xFF
	} else {
		id &= 0xFFFFFF
	}
	obj := &object{kind: k, id: id, uses: uses, data: data}
	for _, u := range uses {
		u.users++
	}
	o.tab[k][id] = obj
	return obj
}

func (o *objects) get(k kind, id uint32) *object { return o.tab[k][id] }

func (o *objects) destroy(obj *object) bool {
	if obj.users > 0 {
		return false
	}
	for _, u := range obj.uses {
		u.users--
	}
	delete(o.tab[obj.kind], obj.id)
	return true
}

func (o *objects) all() []*object {
	var l []*object
	for k := range o.tab {
		for _, obj := range o.tab[k] {
			l = append(l, obj)
		}
	}
	sort.Slice(l, func(i, j int) bool {
		if l[i].kind != l[j].kind {
			return l[i].kind < l[j].kind
		}
		return l[i].id < l[j].id
	})
	return l
}

// Objects lists the live firmware objects ("CQ 0x60"), for leak checks.
func (d *Device) Objects() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var s []string
	for _, o := range d.objs.all() {
		s = append(s, o.String())
	}
	return s
}

// LeakedAtTeardown lists objects that were still alive at TEARDOWN_HCA.
func (d *Device) LeakedAtTeardown() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.leakLog...)
}

func allocator(k kind) func(*Device, []byte, []byte) (uint8, uint32) {
	return func(d *Device, in, out []byte) (uint8, uint32) {
		prm.OutObjID.Set(out, uint64(d.objs.create(k, nil).id))
		return 0, 0
	}
}

func destroyer(k kind) func(*Device, []byte, []byte) (uint8, uint32) {
	return func(d *Device, in, out []byte) (uint8, uint32) {
		obj := d.objs.get(k, uint32(prm.InObjID.Get(in)))
		if obj == nil {
			return prm.StatusBadResource, synBadObject
		}
		if !d.objs.destroy(obj) {
			return prm.StatusResourceBusy, synBusy
		}
		return 0, 0
	}
}

// ref resolves a referenced object or fails the command with BAD_RES.
func (d *Device) ref(k kind, id uint64, status *uint8) *object {
	o := d.objs.get(k, uint32(id))
	if o == nil && *status == 0 {
		*status = prm.StatusBadResource
	}
	return o
}

func (d *Device) allocUAR(in, out []byte) (uint8, uint32) {
	if len(d.objs.tab[kUAR]) >= d.cfg.NumUARs-1 {
		return prm.StatusNoResources, synBadSize
	}
	prm.OutObjID.Set(out, uint64(d.objs.create(kUAR, nil).id))
	return 0, 0
}

func (d *Device) createMkey(in, out []byte) (uint8, uint32) {
	var st uint8
	pd := d.ref(kPD, prm.MkeyPD.Get(in), &st)
	if st != 0 {
		return st, synBadObject
	}
	if prm.MkeyAccessMode1_0.Get(in) != prm.MkeyAccessPA || prm.MkeyAccessMode4_2.Get(in) != 0 ||
		prm.MkeyLength64.Get(in) != 1 || prm.MkeyQPN.Get(in) != 0xFFFFFF || prm.MkeyFree.Get(in) != 0 {
		// Only the physical-address mkey (mkc.access_mode PA, length64) is modelled.
		return prm.StatusBadParam, synBadField
	}
	o := d.objs.create(kMkey, uint8(prm.Mkey7_0.Get(in)), pd)
	prm.OutObjID.Set(out, uint64(o.id))
	return 0, 0
}

// Mkey is the lkey of a live mkey: index << 8 | variant byte.
func (d *Device) lkeyValid(lkey uint32) bool {
	o := d.objs.get(kMkey, lkey>>8)
	return o != nil && o.data.(uint8) == uint8(lkey)
}

// LKeyValid reports whether lkey names a live PA mkey (for the data-path model).
func (d *Device) LKeyValid(lkey uint32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lkeyValid(lkey)
}

// checkBuffer validates a queue buffer given by pas[] at prm.PASOffset: the
// buffer of size bytes in pages of 4 KiB << logPage must be fully mapped,
// the input must carry every pas entry, and each entry must be aligned to
// the page size it claims (the device translates an address as page base +
// offset, so a misaligned entry points it at the wrong memory). The model
// also needs the pages IOVA-contiguous, as every buffer the driver maps is.
func (d *Device) checkBuffer(in []byte, size int, logPage uint64) (uint64, uint8, uint32) {
	if logPage > 30 {
		return 0, prm.StatusBadParam, synBadSize
	}
	page := prm.AdapterPageSize << logPage
	npas := (size + page - 1) / page
	if len(in) < prm.PASOffset+8*npas {
		return 0, prm.StatusBadInputLen, synShortInput
	}
	var first uint64
	for i := 0; i < npas; i++ {
		pa := binary.BigEndian.Uint64(in[prm.PASOffset+8*i:])
		if i == 0 {
			first = pa
		}
		if pa%uint64(page) != 0 || pa != first+uint64(i*page) {
			return 0, prm.StatusBadParam, synBadField
		}
		if _, err := d.mem.Slice(pa, min(page, size-i*page)); err != nil {
			return 0, prm.StatusBadParam, synUnmapped
		}
	}
	return first, 0, 0
}

func (d *Device) checkDBR(addr uint64, n int) (uint8, uint32) {
	if addr%8 != 0 {
		return prm.StatusBadParam, synBadField
	}
	if _, err := d.mem.Slice(addr, n); err != nil {
		return prm.StatusBadParam, synUnmapped
	}
	return 0, 0
}

// --- EQ ---

type eqState struct {
	eqn      uint32
	base     uint64
	logSize  uint8
	uar      uint32
	bitmask  []byte // 32 bytes as in create_eq_in
	p, ci    uint32
	overruns int
	oi       bool // overrun ignore: drop events into a full EQ
}

func (eq *eqState) subscribed(t uint8) bool {
	return eq.bitmask[int(t/64)*8+7-int(t%64)/8]&(1<<(t%8)) != 0
}

func (d *Device) createEQ(in, out []byte) (uint8, uint32) {
	var st uint8
	uar := d.ref(kUAR, prm.EQCUARPage.Get(in), &st)
	if st != 0 {
		return st, synBadObject
	}
	logSize := prm.EQCLogSize.Get(in)
	if logSize > 22 || logSize < 1 {
		return prm.StatusBadParam, synBadSize
	}
	size := (1 << logSize) * prm.EQESize
	base, st, syn := d.checkBuffer(in, size, prm.EQCLogPageSize.Get(in))
	if st != 0 {
		return st, syn
	}
	o := d.objs.create(kEQ, nil, uar)
	eq := &eqState{eqn: o.id, base: base, logSize: uint8(logSize), uar: uint32(uar.id), oi: prm.EQCOI.Get(in) == 1}
	eq.bitmask = append([]byte(nil), prm.EQEventBitmask.Slice(in)...)
	o.data = eq
	d.eqs[o.id] = eq
	prm.CreateEQOutEQN.Set(out, uint64(o.id))
	return 0, 0
}

func (d *Device) destroyEQ(in, out []byte) (uint8, uint32) {
	o := d.objs.get(kEQ, uint32(prm.DestroyEQInEQN.Get(in)))
	if o == nil {
		return prm.StatusBadResource, synBadObject
	}
	if !d.objs.destroy(o) {
		return prm.StatusResourceBusy, synBusy
	}
	delete(d.eqs, o.id)
	return 0, 0
}

func (d *Device) pageRequestEQ() *eqState {
	for _, eq := range d.eqs {
		if eq.subscribed(prm.EventPageRequest) {
			return eq
		}
	}
	return nil
}

func (d *Device) postPageRequest(eq *eqState, n int32) {
	var data [8]byte
	binary.BigEndian.PutUint16(data[2:], 0) // func_id
	binary.BigEndian.PutUint32(data[4:], uint32(n))
	d.postEQE(eq, prm.EventPageRequest, 0, data[:])
}

// PostPageRequest makes the firmware ask for n more pages (n > 0) or give
// back -n pages (n < 0) through the page-request EQ, as at run time.
func (d *Device) PostPageRequest(n int32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	eq := d.pageRequestEQ()
	if eq == nil {
		return false
	}
	if n > 0 {
		d.runtimeOwed += int(n)
	}
	d.postPageRequest(eq, n)
	return true
}

// postEQE writes one EQE, owner byte last (kernel lib/eq.h next_eqe_sw reads it first).
func (d *Device) postEQE(eq *eqState, typ, sub uint8, data []byte) {
	n := uint32(1) << eq.logSize
	if eq.p-eq.ci >= n {
		eq.overruns++
		d.stats.EQOverruns++
		if !eq.oi {
			// Without oi an overrun is an EQ error; on the async EQ the
			// function reports it in the health buffer (syndrome 0xC,
			// "async EQ overrun", kernel health.c) and stops.
			d.violations.EQOverrun++
			d.fatal = 0xC
		}
		return
	}
	e, err := d.mem.Slice(eq.base+uint64(eq.p&(n-1))*prm.EQESize, prm.EQESize)
	if err != nil {
		return
	}
	clear(e[:prm.EQEOwnerOffset])
	e[prm.EQEType] = typ
	e[prm.EQESubType] = sub
	copy(e[prm.EQEData:prm.EQEData+28], data)
	storeEQEOwner(e, uint8(eq.p>>eq.logSize)&1)
	eq.p++
}

func (d *Device) eqDoorbell(uar uint32, v uint32) {
	eq := d.eqs[v>>24]
	if eq == nil || eq.uar != uar {
		return
	}
	eq.ci = v & 0xFFFFFF
}

// --- CQ, RQ, SQ, TIS ---

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

// --- RSS and steering ---

func (d *Device) createRQT(in, out []byte) (uint8, uint32) {
	maxSize := prm.RQTCMaxSize.Get(in)
	actual := prm.RQTCActualSize.Get(in)
	if maxSize == 0 || maxSize&(maxSize-1) != 0 || maxSize > 1<<d.cfg.LogMaxRQTSize || actual == 0 || actual > maxSize {
		return prm.StatusBadParam, synBadSize
	}
	if len(in) < prm.CreateRQTInBaseLen+4*int(actual) {
		return prm.StatusBadInputLen, synShortInput
	}
	var uses []*object
	var rqns []uint32
	var st uint8
	for i := 0; i < int(actual); i++ {
		f := prm.F(uint32(prm.CreateRQTInBaseLen+4*i), 23, 0)
		rq := d.ref(kRQ, f.Get(in), &st)
		if st != 0 {
			return st, synBadObject
		}
		uses = append(uses, rq)
		rqns = append(rqns, rq.id)
	}
	prm.OutObjID.Set(out, uint64(d.objs.create(kRQT, rqns, uses...).id))
	return 0, 0
}

func (d *Device) createTIR(in, out []byte) (uint8, uint32) {
	var st uint8
	td := d.ref(kTD, prm.TIRCTD.Get(in), &st)
	if st != 0 {
		return st, synBadObject
	}
	var target *object
	switch prm.TIRCDispType.Get(in) {
	case prm.TIRDispDirect:
		target = d.ref(kRQ, prm.TIRCInlineRQN.Get(in), &st)
	case prm.TIRDispIndirect:
		target = d.ref(kRQT, prm.TIRCIndirect.Get(in), &st)
		if fn := prm.TIRCHashFn.Get(in); fn > prm.RxHashToeplitz {
			return prm.StatusBadParam, synBadField
		}
	default:
		return prm.StatusBadParam, synBadField
	}
	if st != 0 {
		return st, synBadObject
	}
	info := &TIRInfo{Indirect: prm.TIRCDispType.Get(in) == prm.TIRDispIndirect, Target: target.id,
		HashFn: uint8(prm.TIRCHashFn.Get(in)), IPv6: prm.TIRCHashL3.Get(in) == 1, UDP: prm.TIRCHashL4.Get(in) == 1,
		Fields: uint32(prm.TIRCHashFields.Get(in)), ToeplitzKey: append([]byte(nil), prm.TIRCToeplitz.Slice(in)...)}
	prm.OutObjID.Set(out, uint64(d.objs.create(kTIR, info, td, target).id))
	return 0, 0
}

type flowTable struct {
	typ, level uint8
	logSize    uint8
	groups     []*object
}

type flowGroup struct {
	table      *object
	start, end uint32
	criteria   []byte // outer_headers mask (fte_match_set_lyr_2_4)
}

type fte struct {
	table *object
	index uint32
	value []byte // outer_headers values
}

func (d *Device) createFlowTable(in, out []byte) (uint8, uint32) {
	typ := prm.FTTableType.Get(in)
	if typ != prm.FlowTableNICRX {
		return prm.StatusBadParam, synBadField
	}
	if prm.FTLogSize.Get(in) > 16 || prm.FTLevel.Get(in) > 64 || prm.FTMissAction.Get(in) != 0 {
		return prm.StatusBadParam, synBadField
	}
	ft := &flowTable{typ: uint8(typ), level: uint8(prm.FTLevel.Get(in)), logSize: uint8(prm.FTLogSize.Get(in))}
	prm.OutObjID.Set(out, uint64(d.objs.create(kFT, ft).id))
	return 0, 0
}

func (d *Device) table(typ, id uint64) *object {
	o := d.objs.get(kFT, uint32(id))
	if o == nil || uint64(o.data.(*flowTable).typ) != typ {
		return nil
	}
	return o
}

func (d *Device) destroyFlowTable(in, out []byte) (uint8, uint32) {
	o := d.table(prm.FTDestroyType.Get(in), prm.FTDestroyID.Get(in))
	if o == nil {
		return prm.StatusBadResource, synBadObject
	}
	if !d.objs.destroy(o) {
		return prm.StatusResourceBusy, synBusy
	}
	return 0, 0
}

func (d *Device) createFlowGroup(in, out []byte) (uint8, uint32) {
	t := d.table(prm.FGTableType.Get(in), prm.FGTableID.Get(in))
	if t == nil {
		return prm.StatusBadResource, synBadObject
	}
	ft := t.data.(*flowTable)
	start, end := uint32(prm.FGStartIndex.Get(in)), uint32(prm.FGEndIndex.Get(in))
	if start > end || end >= 1<<ft.logSize {
		return prm.StatusBadParam, synBadSize
	}
	for _, g := range ft.groups {
		fg := g.data.(*flowGroup)
		if start <= fg.end && fg.start <= end {
			return prm.StatusBadParam, synBadSize // ranges overlap
		}
	}
	// Only outer L2-L4 matching is modelled; other match sets are refused
	// rather than silently ignored.
	if prm.FGCriteriaEn.Get(in)&^prm.MatchOuterHeaders != 0 {
		return prm.StatusBadParam, synBadField
	}
	crit := make([]byte, prm.OuterHeadersSize)
	if prm.FGCriteriaEn.Get(in) != 0 {
		copy(crit, in[prm.FGMatchCriteria:])
	}
	g := d.objs.create(kFG, &flowGroup{table: t, start: start, end: end, criteria: crit}, t)
	ft.groups = append(ft.groups, g)
	prm.OutObjID.Set(out, uint64(g.id))
	return 0, 0
}

func (d *Device) destroyFlowGroup(in, out []byte) (uint8, uint32) {
	t := d.table(prm.FGDestroyType.Get(in), prm.FGDestroyTable.Get(in))
	if t == nil {
		return prm.StatusBadResource, synBadObject
	}
	g := d.objs.get(kFG, uint32(prm.FGDestroyID.Get(in)))
	if g == nil || g.data.(*flowGroup).table != t {
		return prm.StatusBadResource, synBadObject
	}
	if !d.objs.destroy(g) {
		return prm.StatusResourceBusy, synBusy
	}
	ft := t.data.(*flowTable)
	for i, x := range ft.groups {
		if x == g {
			ft.groups = append(ft.groups[:i], ft.groups[i+1:]...)
			break
		}
	}
	return 0, 0
}

func (d *Device) findFTE(t *object, index uint32) *object {
	for _, o := range d.objs.tab[kFTE] {
		if e := o.data.(*fte); e.table == t && e.index == index {
			return o
		}
	}
	return nil
}

func (d *Device) setFTE(in, out []byte) (uint8, uint32) {
	if prm.InOpMod.Get(in) != 0 {
		return prm.StatusBadParam, synBadOpMod
	}
	t := d.table(prm.FTETableType.Get(in), prm.FTETableID.Get(in))
	if t == nil {
		return prm.StatusBadResource, synBadObject
	}
	g := d.objs.get(kFG, uint32(prm.FTEGroupID.Get(in)))
	if g == nil || g.data.(*flowGroup).table != t {
		return prm.StatusBadResource, synBadObject
	}
	idx := uint32(prm.FTEFlowIndex.Get(in))
	if fg := g.data.(*flowGroup); idx < fg.start || idx > fg.end {
		return prm.StatusBadParam, synBadSize
	}
	if d.findFTE(t, idx) != nil {
		return prm.StatusBadParam, synBusy
	}
	uses := []*object{g}
	action := prm.FTEAction.Get(in)
	n := int(prm.FTEDestListSize.Get(in))
	if action&prm.FlowActionFwdDest != 0 {
		if n == 0 || len(in) < prm.SetFTEDestinations+8*n {
			return prm.StatusBadParam, synBadSize
		}
		for i := 0; i < n; i++ {
			off := uint32(prm.SetFTEDestinations + 8*i)
			typ := prm.F(off, 31, 24).Get(in)
			id := prm.F(off, 23, 0).Get(in)
			var st uint8
			switch typ {
			case prm.FlowDestTIR:
				uses = append(uses, d.ref(kTIR, id, &st))
			case prm.FlowDestFlowTable:
				dst := d.table(uint64(t.data.(*flowTable).typ), id)
				if dst == nil {
					return prm.StatusBadResource, synBadObject
				}
				if dst.data.(*flowTable).level <= t.data.(*flowTable).level {
					return prm.StatusBadParam, synBadField // only to a deeper level
				}
				uses = append(uses, dst)
			default:
				return prm.StatusBadParam, synBadField
			}
			if st != 0 {
				return st, synBadObject
			}
		}
	} else if action&^(prm.FlowActionAllow|prm.FlowActionDrop) != 0 {
		return prm.StatusBadParam, synBadField
	}
	value := append([]byte(nil), in[prm.FTEMatchValue:prm.FTEMatchValue+prm.OuterHeadersSize]...)
	d.objs.create(kFTE, &fte{table: t, index: idx, value: value}, uses...)
	return 0, 0
}

func (d *Device) deleteFTE(in, out []byte) (uint8, uint32) {
	t := d.table(prm.FTEDelTableType.Get(in), prm.FTEDelTableID.Get(in))
	if t == nil {
		return prm.StatusBadResource, synBadObject
	}
	e := d.findFTE(t, uint32(prm.FTEDelIndex.Get(in)))
	if e == nil {
		return prm.StatusBadParam, synBadObject
	}
	d.objs.destroy(e)
	return 0, 0
}

func (d *Device) setRoot(in, out []byte) (uint8, uint32) {
	if prm.RootTableType.Get(in) != prm.FlowTableNICRX {
		return prm.StatusBadParam, synBadField
	}
	if d.rootNICRX != nil {
		d.rootNICRX.users--
		d.rootNICRX = nil
	}
	if prm.InOpMod.Get(in) == 1 {
		return 0, 0 // disconnect
	}
	t := d.table(prm.FlowTableNICRX, prm.RootTableID.Get(in))
	if t == nil {
		return prm.StatusBadResource, synBadObject
	}
	t.users++ // the root pins its table until disconnected
	d.rootNICRX = t
	return 0, 0
}

// --- vport ---

func (d *Device) queryVport(in, out []byte) (uint8, uint32) {
	prm.QVportMinInline.Set(out, uint64(d.cfg.VportMinInline))
	prm.QVportMTU.Set(out, uint64(d.vport.mtu))
	prm.QVportDisableUCLB.Set(out, boolTo(d.vport.disableUCLB, 1, 0))
	prm.QVportDisableMCLB.Set(out, boolTo(d.vport.disableMCLB, 1, 0))
	prm.QVportPromiscUC.Set(out, boolTo(d.vport.promiscUC, 1, 0))
	prm.QVportPromiscMC.Set(out, boolTo(d.vport.promiscMC, 1, 0))
	prm.QVportPromiscAll.Set(out, boolTo(d.vport.promiscAll, 1, 0))
	mac := d.cfg.MAC
	prm.QVportMAC47_32.Set(out, uint64(binary.BigEndian.Uint16(mac[0:])))
	prm.QVportMAC31_0.Set(out, uint64(binary.BigEndian.Uint32(mac[2:])))
	return 0, 0
}

func (d *Device) modifyVport(in, out []byte) (uint8, uint32) {
	sel := prm.D32(0x0C).Get(in)
	if sel&prm.VportFieldMTU != 0 {
		mtu := int(prm.MVportMTU.Get(in))
		if mtu < 68+prm.HWMTUOverhead || mtu > d.cfg.MaxMTU {
			return prm.StatusBadParam, synBadSize
		}
		d.vport.mtu = mtu
	}
	if prm.MVportSelDisableUCLB.Get(in) == 1 {
		if !d.cfg.DisableLocalLB {
			return prm.StatusBadParam, synBadField
		}
		d.vport.disableUCLB = prm.MVportDisableUCLB.Get(in) == 1
	}
	if prm.MVportSelDisableMCLB.Get(in) == 1 {
		if !d.cfg.DisableLocalLB {
			return prm.StatusBadParam, synBadField
		}
		d.vport.disableMCLB = prm.MVportDisableMCLB.Get(in) == 1
	}
	if sel&prm.VportFieldPromisc != 0 {
		d.vport.promiscUC = prm.MVportPromiscUC.Get(in) == 1
		d.vport.promiscMC = prm.MVportPromiscMC.Get(in) == 1
		d.vport.promiscAll = prm.MVportPromiscAll.Get(in) == 1
	}
	if sel&prm.VportFieldAddresses != 0 {
		if prm.MVportListType.Get(in) != 0 {
			return prm.StatusBadParam, synBadField // only the UC list is modelled
		}
		n := int(prm.MVportListSize.Get(in))
		if len(in) < prm.ModifyNICVportInLen+8*n {
			return prm.StatusBadInputLen, synShortInput
		}
		d.vport.ucList = nil
		for i := 0; i < n; i++ {
			var m [6]byte
			copy(m[:], in[prm.ModifyNICVportInLen+8*i+2:])
			d.vport.ucList = append(d.vport.ucList, m)
		}
	}
	return 0, 0
}

func (d *Device) queryVportState(in, out []byte) (uint8, uint32) {
	if prm.InOpMod.Get(in) != 0 {
		return prm.StatusBadParam, synBadOpMod
	}
	prm.VportStateAdmin.Set(out, boolTo(d.vport.adminUp, 1, 0))
	prm.VportStateOper.Set(out, boolTo(d.linkUp(), 1, 0))
	return 0, 0
}

// Vport reports the vport settings the driver made: the HW MTU frames are
// held to (the smaller of the vport's and the port's PMTU), promiscuous
// bits and the unicast MAC list.
func (d *Device) Vport() (mtu int, promiscUC, promiscMC, promiscAll bool, uc [][6]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.vport
	return min(v.mtu, d.pmtu), v.promiscUC, v.promiscMC, v.promiscAll, append([][6]byte(nil), v.ucList...)
}

// Steer classifies a packet with the given ethertype and IP protocol
// through the NIC RX root table (entries in index order, following
// forwarding to deeper tables) and reports the TIR it reaches, or false
// when it would be dropped. Only the two fields are filled in, which is
// what the driver's classifier matches on.
func (d *Device) Steer(ethertype uint16, ipProtocol uint8) (uint32, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	pkt := make([]byte, prm.FTEMatchValue+prm.OuterHeadersSize)
	prm.FTEEthertype.Set(pkt, uint64(ethertype))
	prm.FTEIPProtocol.Set(pkt, uint64(ipProtocol))
	hdr := pkt[prm.FTEMatchValue:]
	t := d.rootNICRX
	for depth := 0; t != nil && depth < 8; depth++ {
		var entries []*object
		for _, o := range d.objs.tab[kFTE] {
			if o.data.(*fte).table == t {
				entries = append(entries, o)
			}
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].data.(*fte).index < entries[j].data.(*fte).index })
		var next *object
	search:
		for _, o := range entries {
			e := o.data.(*fte)
			crit := o.uses[0].data.(*flowGroup).criteria
			for i := range crit {
				if hdr[i]&crit[i] != e.value[i]&crit[i] {
					continue search
				}
			}
			for _, u := range o.uses[1:] {
				switch u.kind {
				case kTIR:
					return u.id, true
				case kFT:
					next = u
				}
			}
			break
		}
		t = next
	}
	return 0, false
}

// TIRInfo describes a TIR's dispatch and hash.
type TIRInfo struct {
	Indirect    bool
	Target      uint32 // RQ (direct) or RQT (indirect)
	HashFn      uint8
	IPv6, UDP   bool
	Fields      uint32
	ToeplitzKey []byte
}

// TIR reports a live TIR's settings.
func (d *Device) TIR(tirn uint32) (TIRInfo, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.objs.get(kTIR, tirn)
	if o == nil {
		return TIRInfo{}, false
	}
	return *o.data.(*TIRInfo), true
}

// RQT reports the RQ numbers of a live RQ table, bucket by bucket.
func (d *Device) RQT(rqtn uint32) ([]uint32, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.objs.get(kRQT, rqtn)
	if o == nil {
		return nil, false
	}
	return append([]uint32(nil), o.data.([]uint32)...), true
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
