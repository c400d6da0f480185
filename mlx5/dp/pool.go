package dp

import (
	"encoding/binary"
	"fmt"
)

// wqeRec is the per-WQE buffer record, the analogue of the kernel's struct
// page for a striding RQ: how many strides the device consumed and how many
// delivered packets still hold a stride of it. One cache line each, because
// the prefetcher fetches it ahead of the packet that will bump it.
type wqeRec struct {
	refs     int32
	consumed uint32
	_        [56]byte
}

// Pool owns the receive buffer window of one RX queue: it posts the striding
// RQ's WQEs, counts references to their strides until every packet of a WQE
// was freed or sent, and then reposts the WQE. It also lends Spare buffers for
// packets the engine builds. Buffer handles are stride indices in the window.
type Pool struct {
	id         uint16
	iova       uint64
	pages      [][]byte
	pagePtr    pagePtrs // pages as pointers (ring_unsafe.go)
	logStride  uint8
	strideSize uint32
	logStrides uint8
	strides    uint32 // per WQE
	nWQE       uint32
	rxBufs     uint32 // nWQE × strides
	spareFirst uint32 // first spare handle (after the guard page)
	spareFree  []uint32
	recs       []wqeRec

	// Striding RQ ring (cyclic): ci counts posted WQEs, retire is the oldest
	// posted WQE in ring order, which the device finishes first.
	ring   []byte
	dbr    []byte
	lkey   uint32
	ci     uint32
	retire uint32

	headroom int

	// group is the pools of one queue index whose ports share memory
	// (SharePorts), this one included, indexed by member; a packet's
	// Handle carries its pool's member number above bit 32, so any port of
	// the group can send, free and complete it. Alone, group is {p}.
	group  []*Pool
	member uint64 // this pool's member number << handleMemberShift
	// iovas[m] is group[m].iova (the members share the stride size);
	// packIdx masks a handle's stride index in a fifo entry (all 32 bits
	// when alone, as pack does).
	iovas   []uint64
	packIdx uint32

	Reposted uint64 // WQEs given back to the device
}

// handleMemberShift places a pool's member number in a packet Handle, above
// the stride index. In the TX queue's fifo of 32-bit handles (half the
// cache footprint of 64-bit ones: measurable on the warm model bench) a
// shared pool's member number takes the top packMemberBits bits, so
// SharePorts requires stride indices below 1 << (32 − packMemberBits).
const (
	handleMemberShift = 32
	packMemberBits    = 8
	packIndexMask     = 1<<(32-packMemberBits) - 1
)

// pack is h as a 32-bit fifo entry; unpack undoes it.
func (p *Pool) pack(h uint64) uint32 {
	if len(p.group) == 1 {
		return uint32(h)
	}
	return uint32(h>>handleMemberShift)<<(32-packMemberBits) | uint32(h)&packIndexMask
}

func (p *Pool) unpack(e uint32) uint64 {
	if len(p.group) == 1 {
		return uint64(e)
	}
	return uint64(e>>(32-packMemberBits))<<handleMemberShift | uint64(e&packIndexMask)
}

// handles is how many buffer handles the pool has (RX strides, guard, spares).
func (p *Pool) handles() uint32 { return p.spareFirst + uint32(cap(p.spareFree)) }

func newPool(id uint16, rq *RQMem, headroom int) (*Pool, error) {
	if err := checkPow2Ring("RQ", rq.Ring, rq.LogWQEs, RxWQESize); err != nil {
		return nil, err
	}
	if len(rq.DBRec) < 8 {
		return nil, errDBRec
	}
	if rq.WQType != 0 && rq.WQType != WQTypeCyclicStride {
		return nil, fmt.Errorf("dp: RQ wq_type %d: only the cyclic striding RQ (%d) is supported", rq.WQType, WQTypeCyclicStride)
	}
	if rq.LogStrideSize < MPWRQMinStrideLog || rq.LogStrideSize > 12 {
		return nil, fmt.Errorf("dp: stride log %d outside 6..12", rq.LogStrideSize)
	}
	if rq.LogStrides < MPWRQMinStridesLog || rq.LogStrides > MPWRQMaxStridesLog {
		return nil, fmt.Errorf("dp: strides-per-WQE log %d outside 3..16", rq.LogStrides)
	}
	p := &Pool{
		id: id, iova: rq.IOVA, pages: rq.Pages,
		logStride: rq.LogStrideSize, strideSize: 1 << rq.LogStrideSize,
		logStrides: rq.LogStrides, strides: 1 << rq.LogStrides,
		nWQE: 1 << rq.LogWQEs, ring: rq.Ring, dbr: rq.DBRec, lkey: rq.LKey,
		headroom: headroom,
	}
	p.group, p.iovas, p.packIdx = []*Pool{p}, []uint64{p.iova}, ^uint32(0)
	if headroom+64+ShinfoSize > int(p.strideSize) {
		return nil, fmt.Errorf("dp: stride %d too small for headroom %d", p.strideSize, headroom)
	}
	p.rxBufs = p.nWQE * p.strides
	perPage := uint32(PageSize) >> p.logStride
	// One guard page after the window: an oversize frame in the last stride
	// may run headroom bytes past it (the device places data at stride +
	// headroom but counts whole strides).
	p.spareFirst = p.rxBufs + perPage
	need := (int(p.spareFirst) + rq.Spare) << p.logStride
	if len(rq.Pages)*PageSize < need {
		return nil, fmt.Errorf("dp: buffer window has %d pages, need %d", len(rq.Pages), (need+PageSize-1)/PageSize)
	}
	for i, pg := range rq.Pages {
		if len(pg) < PageSize {
			return nil, fmt.Errorf("dp: buffer page %d is %d bytes", i, len(pg))
		}
	}
	p.pagePtr = pagePtrsOf(rq.Pages)
	p.recs = make([]wqeRec, p.nWQE)
	p.spareFree = make([]uint32, 0, rq.Spare)
	for i := rq.Spare - 1; i >= 0; i-- {
		p.spareFree = append(p.spareFree, p.spareFirst+uint32(i))
	}
	// Post every WQE (cyclic striding RQ: all N may be outstanding).
	for w := uint32(0); w < p.nWQE; w++ {
		p.writeWQE(w)
	}
	p.ci = p.nWQE
	storeBE32(p.dbr[RcvDBROff:], p.ci&WQEIndexMask)
	return p, nil
}

// writeWQE arms WQE w with its window: the device writes stride k's packet
// at addr + k×stride, so addr = window start + headroom leaves the headroom
// in front of every packet.
func (p *Pool) writeWQE(w uint32) {
	e := p.ring[w*RxWQESize : (w+1)*RxWQESize]
	clear(e[:RxWQEOffByteCount])
	binary.BigEndian.PutUint32(e[RxWQEOffByteCount:], p.strides*p.strideSize)
	binary.BigEndian.PutUint32(e[RxWQEOffLKey:], p.lkey)
	binary.BigEndian.PutUint64(e[RxWQEOffAddr:], p.iova+uint64(w*p.strides)<<p.logStride+uint64(p.headroom))
}

// ID is the fwd pool id of these buffers.
func (p *Pool) ID() uint16 { return p.id }

// buf returns the whole stride-sized buffer of handle h.
func (p *Pool) buf(h uint32) []byte { return p.pagePtr.stride(h<<p.logStride, p.strideSize) }

// IOVA returns the device address of byte off of buffer h, a Handle of
// any pool of the group.
func (p *Pool) IOVA(h uint64, off uint16) uint64 {
	o := p.owner(h)
	return o.iova + uint64(uint32(h))<<o.logStride + uint64(off)
}

// owner is the pool of the group that handle h belongs to; a handle naming
// no member (a caller bug) is charged to p, whose bounds checks drop it.
func (p *Pool) owner(h uint64) *Pool {
	m := h >> handleMemberShift
	if m == p.member>>handleMemberShift {
		return p // the common case, and the only one without SharePorts
	}
	if m < uint64(len(p.group)) {
		return p.group[m]
	}
	return p
}

// release drops one reference to buffer h (a freed or sent packet) in the
// pool of the group it belongs to. Small enough to inline: a stride of this
// pool is the per-packet case.
func (p *Pool) release(h uint64) {
	if l := h - p.member; l < uint64(p.rxBufs) {
		p.recs[uint32(l)>>(p.logStrides&31)].refs--
		return
	}
	p.releaseOther(h)
}

// releaseOther releases a spare buffer, or a buffer of another pool of the
// group; a handle naming no buffer is ignored.
func (p *Pool) releaseOther(h uint64) {
	o := p.owner(h)
	if h>>handleMemberShift != o.member>>handleMemberShift {
		return
	}
	l := uint32(h)
	if l < o.rxBufs {
		o.recs[l>>o.logStrides].refs--
		return
	}
	if l >= o.spareFirst && l < o.spareFirst+uint32(cap(o.spareFree)) && len(o.spareFree) < cap(o.spareFree) {
		o.spareFree = append(o.spareFree, l)
	}
}

// repostGroup reposts every pool of the group (sent buffers of any of them
// may have completed).
func (p *Pool) repostGroup() {
	for _, o := range p.group {
		o.repost()
	}
}

// repost gives every finished WQE (all strides consumed, no packet holding
// one) back to the device, in ring order, and rings the RQ doorbell record.
func (p *Pool) repost() {
	n := 0
	for {
		r := &p.recs[p.retire]
		if r.consumed < p.strides || r.refs != 0 {
			break
		}
		r.consumed = 0
		p.writeWQE(p.retire)
		p.retire = (p.retire + 1) & (p.nWQE - 1)
		p.ci++
		n++
		if n == int(p.nWQE) {
			break
		}
	}
	if n > 0 {
		p.Reposted += uint64(n)
		storeBE32(p.dbr[RcvDBROff:], p.ci&WQEIndexMask)
	}
}
