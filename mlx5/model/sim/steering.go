package sim

import (
	"sort"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// Receive steering: RQ tables, TIRs, the NIC RX flow tables with their
// groups and entries, and the classification the model applies to a frame.

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
