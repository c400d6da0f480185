package dp

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// rxDesc is one decoded receive completion: the fields of a CQE (or of a
// title CQE plus a mini-CQE) that the delivery loop needs. The poll loop
// decodes a whole burst into the RX queue's array of these before any packet
// is touched, so the prefetcher knows packet i+N exactly (stride and length)
// while packet i is handled.
type rxDesc struct {
	// buf is the packet's stride (host memory), found once when the CQE is
	// decoded; deliver and the prefetch assembly (prefetch_amd64.s, which
	// reads buf and length at their offsets) both start from it.
	buf     unsafePointer
	hash    uint32
	wqe     uint16
	stride  uint16
	strides uint16
	length  uint16
	hdrType uint8 // l4_l3_hdr_type
	vlan    uint16
	// Nothing else: the checksum and hds_ip_ext are not used by the
	// delivery loop, and every stored field costs a store per packet.
}

// RxStats counts what the receive path saw. Plain fields: see the package
// threading contract.
type RxStats struct {
	Packets, Bytes       uint64
	CQEs                 uint64 // CQ slots consumed
	FillerCQEs           uint64
	FillerStrides        uint64
	ErrCQEs              uint64
	LastSyndrome         uint8
	Oversize             uint64 // longer than the configured frame: dropped
	Malformed            uint64 // CQEs naming a WQE/stride that cannot exist: dropped
	CompSessions         uint64
	CompPackets          uint64
	PrefetchExact        uint64 // prefetches aimed with CQE i+N's own stride and length
	PrefetchGuess        uint64 // prefetches aimed N strides ahead with packet i's length
	PrefetchSkippedWQEnd uint64 // guesses that would have left the WQE
	PrefetchShinfoEarly  uint64 // shinfo lines PREFETCHWed a group before their header lines (inside a burst)
	PrefetchL2           uint64 // packets whose lines were prefetched into L2 as their CQEs were decoded
	PrefetchOffBursts    uint64 // bursts the adaptive prefetch ran without prefetching (probes included)
}

// cqRing is a CQ seen from the consumer.
type cqRing struct {
	ring    []byte
	ptr     unsafePointer // ring start (ring_unsafe.go); index with at
	logSize uint8
	mask    uint32
	dbr     []byte
	cc      uint32 // consumer counter (free running)
	base    uintptr
	pfCQE   bool // prefetch a burst's CQE lines when a poll starts (with prefetch on)
	comp    bool
	enh     bool // enhanced layout: validity from the iteration count byte
	miniFmt uint8
}

func newCQRing(c *CQMem) (cqRing, error) {
	if err := checkPow2Ring("CQ", c.Ring, c.LogSize, CQESize); err != nil {
		return cqRing{}, err
	}
	if len(c.DBRec) < 8 {
		return cqRing{}, errDBRec
	}
	if c.Compressed && c.MiniFormat != MiniFmtHash && c.MiniFormat != MiniFmtCSUM && c.MiniFormat != MiniFmtCSUMStrdx {
		// FTAG_STRIDX puts flow_tag_high where the checksum is and
		// flow_tag[7:0] in byte_cnt's low byte (DPDK mlx5_rx.c
		// rxq_cq_decompress): not decoded here.
		return cqRing{}, fmt.Errorf("dp: mini-CQE format %d not supported (HASH, CSUM and CSUM_STRIDX are)", c.MiniFormat)
	}
	return cqRing{ring: c.Ring, ptr: ptrOf(c.Ring), logSize: c.LogSize, mask: 1<<c.LogSize - 1, dbr: c.DBRec,
		comp: c.Compressed, enh: c.Compressed && c.Enhanced, miniFmt: c.MiniFormat, base: addrOf(c.Ring)}, nil
}

// at is the CQE at counter i: the mask keeps it inside the ring.
func (c *cqRing) at(i uint32) *[CQESize]byte { return cqeAt(c.ptr, i&c.mask) }

func (c *cqRing) slot(i uint32) []byte { return c.at(i)[:] }

// owned reports whether software owns the CQE at counter i: owner bit equal
// to the lap parity, and not the INVALID opcode the ring is pre-filled with.
// w is the atomically loaded bytes 60..63 (wqe_counter, signature, op_own).
func (c *cqRing) owned(i uint32) (cqe *[CQESize]byte, w uint32, ok bool) {
	cqe = c.at(i)
	w = loadOwnerWord(cqe)
	if c.enh {
		// Enhanced layout: valid iff validity_iteration_count is this lap's.
		return cqe, w, uint8(w>>16) == uint8(i>>c.logSize)
	}
	op := uint8(w >> 24)
	return cqe, w, op&CQEOwnerMask == uint8(i>>c.logSize)&1 && op>>CQEOpcodeShift != CQEInvalid
}

// release tells the device the CQ slots before cc are free again.
func (c *cqRing) release() { storeBE32(c.dbr[CQSetCIOff:], c.cc&CQIndexMask) }

// cqeBurstPrefetch bounds the CQE lines prefetched at the start of a poll.
const cqeBurstPrefetch = 64

// poll decodes up to len(out) received packets from the CQ into out, handling
// filler and error CQEs (stride accounting only) and whole basic-layout
// compressed sessions, and returns how many it decoded and whether more
// completions are waiting. Only bytes of the ring are read; wqe/stride
// values are checked against the RQ geometry so no input can index out of
// range later.
func (q *RxQueue) poll(out []rxDesc) (n int, more bool) {
	c := &q.cq
	if q.spillAt < q.spillN {
		// First the rest of a session an earlier, smaller batch cut.
		n = copy(out, q.spill[q.spillAt:q.spillN]) // each keeps its reference
		q.spillAt += n
		if q.spillAt < q.spillN {
			return n, true
		}
	}
	start := c.cc
	if c.pfCQE {
		// Without DDIO every CQE is a DRAM miss: ask for the burst's
		// lines at once so their misses overlap instead of one per slot.
		k := min(uint32(len(out)-n), cqeBurstPrefetch)
		first := c.cc & c.mask
		if first+k > c.mask+1 {
			prefetchLines(c.base, int(first+k-c.mask-1)) // wrapped part
			k = c.mask + 1 - first
		}
		prefetchLines(c.base+uintptr(first*CQESize), int(k))
	}
	// The head of the burst (packets 0..N-1, which deliver's stride-ahead
	// prefetch never reaches) is prefetched into L1 as it is decoded, a
	// group at a time, a whole poll ahead of its delivery; the rest into L2
	// as it is decoded (prefetchHead), so every packet's DRAM misses start
	// during the poll, not N packets before its turn.
	head := 0
	pf := q.dist > 0
	for n < len(out) {
		g := q.groupAt(head)
		for pf && n-head >= g {
			// A compressed session may have moved n past several groups.
			head = q.prefetchHead(out, head, n)
			pf, g = q.lab.farL2() || head < q.dist, q.groupAt(head)
		}
		if !c.enh && q.lab.plain() {
			lim := len(out)
			if pf {
				lim = min(lim, head+g) // > n: the loop above left fewer than g
			}
			if m := q.pollPlain(out, n, lim); m > n {
				n = m
				continue
			}
		}
		cqe, w, ok := c.owned(c.cc)
		if !ok {
			break
		}
		op := uint8(w >> 24)
		if (op>>CQEFormatShift)&CQEFormatMask == CQEFormatComp {
			var stop bool
			n, more, stop = q.pollCompressed(cqe, op, out, n)
			if stop {
				break
			}
			continue
		}
		c.cc++
		if q.decodeOne(cqe, w, &out[n]) {
			n++
		}
	}
	for pf && head < n {
		head = q.prefetchHead(out, head, n)
		pf = q.lab.farL2() || head < q.dist
	}
	if n == len(out) && !more {
		_, _, more = c.owned(c.cc)
	}
	if c.cc != start {
		q.Stats.CQEs += uint64(c.cc - start)
		c.release()
	}
	return n, more
}

// pollPlain decodes, from the consumer index on, the run of ordinary
// receive CQEs into out[n:lim] and returns the new n: owned this lap,
// opcode RESP_SEND with no other op_own bit, a packet (not a filler) of a
// legal length in strides its WQE still has. It stops, consuming nothing
// more, at the first CQE that is anything else, and at the end of the lap;
// the general loop (decodeOne, pollCompressed) handles that one. Its few
// live values stay in registers: the general loop's do not. It stays one
// loop: split into decoding and WQE accounting it ran 6 fewer instructions
// per packet but was 2.5 ns slower on flushed 512 B (scattered/512/D4).
func (q *RxQueue) pollPlain(out []rxDesc, n, lim int) int {
	c := &q.cq
	p := q.pool
	cc := c.cc
	if left := (cc | c.mask) + 1 - cc; uint32(lim-n) > left {
		lim = n + int(left) // the owner parity flips at the lap end
	}
	want := uint8(CQERespSend<<CQEOpcodeShift) | uint8(cc>>c.logSize)&CQEOwnerMask
	// Up to the lap end the slots are consecutive: one pointer steps
	// through them, no mask per CQE.
	first := cqeAt(c.ptr, cc&c.mask)
	recs, pages := p.recs, p.pagePtr
	// Shift counts masked to 31 (they are at most 16): an unmasked count
	// costs a compare and a mask per shift (Go defines shifts past the width).
	nWQE, strides, logStrides, logStride := p.nWQE, p.strides, p.logStrides, p.logStride
	// 14 ≤ l ≤ maxFrame as one unsigned compare.
	span := q.maxFrame - 14
	todo := out[n:lim]
	// The record of the WQE being filled stays in registers (consumed,
	// refs) while consecutive completions name it, and is written back
	// when the WQE changes and at the end: a store and reload per CQE
	// would chain the iterations through store forwarding.
	cur := uint32(0)
	r := &recs[0]
	consumed, refs := r.consumed, r.refs
	k := 0
	for ; k < len(todo); k++ {
		cqe := cqeNext(first, k)
		w := loadOwnerWord(cqe)
		if uint8(w>>24) != want {
			break
		}
		bc := binary.BigEndian.Uint32(cqe[CQEOffByteCnt:])
		wqe := uint32(binary.BigEndian.Uint16(cqe[CQEOffWQEID:]))
		stride := uint32(bits.ReverseBytes16(uint16(w)))
		cs := (bc >> MPWRQConsumedShift) & MPWRQConsumedMask
		l := bc & MPWRQByteCntMask
		if bc&MPWRQFillerFlag != 0 || wqe >= nWQE || cs == 0 || stride+cs > strides || l-14 > span {
			break
		}
		if wqe != cur {
			r.consumed, r.refs = consumed, refs
			r, cur = recAt(recs, wqe), wqe // wqe < nWQE = len(recs)
			consumed, refs = r.consumed, r.refs
		}
		if consumed+cs > strides {
			break
		}
		consumed += cs
		refs++ // held by the packet until it is freed or sent
		// hds_ip_ext, l4_l3_hdr_type, vlan_info (be16), byte-swapped and
		// rotated: l4_l3_hdr_type in the low byte, hds_ip_ext in the
		// next (rxDesc's unused byte), vlan above.
		hv := bits.RotateLeft32(binary.BigEndian.Uint32(cqe[CQEOffHdsIPExt:]), 16)
		// Two 8-byte stores for the six scalar fields (putDesc): field
		// by field they were seven stores and as many spilled registers.
		// The stride lies inside the window (wqe < nWQE, stride < strides).
		putDesc(&todo[k], pages.atUnchecked((wqe<<(logStrides&31)|stride)<<(logStride&31)),
			uint64(binary.BigEndian.Uint32(cqe[CQEOffRSSHashResult:]))|uint64(wqe)<<32|uint64(stride)<<48,
			uint64(cs)|uint64(l)<<16|uint64(hv)<<32)
	}
	r.consumed, r.refs = consumed, refs
	c.cc = cc + uint32(k)
	return n + k
}

// pollCompressed handles a compressed slot at the consumer index (a
// basic-layout session title or an enhanced mini-CQE block): it decodes the
// whole session into out[n:], or into the spill when out is too short, and
// returns the new count, whether more completions wait and whether the
// poll must stop.
func (q *RxQueue) pollCompressed(cqe *[CQESize]byte, op uint8, out []rxDesc, n int) (int, bool, bool) {
	c := &q.cq
	if c.enh {
		cnt := uint32(op>>CQEOpcodeShift) + 1
		if !q.titleOK || cnt > MiniCQEArraySize-1 {
			// The block still consumed cnt indices; the slots after
			// it were not written this lap, so stepping by one would
			// wait on them forever.
			q.Stats.Malformed++
			c.cc += cnt
			return n, false, false
		}
		if n+int(cnt) > len(out) {
			if n > 0 {
				return n, true, true
			}
			return q.spillSession(q.decompressBlock(cqe[:], cnt, q.spill), out), true, true
		}
		return n + q.decompressBlock(cqe[:], cnt, out[n:]), false, false
	}
	cnt := binary.BigEndian.Uint32(cqe[CQEOffByteCnt:])
	if cnt < 2 || cnt > c.mask+1 || !c.comp {
		// Not a session this CQ can hold: skip the slot.
		q.Stats.Malformed++
		c.cc++
		return n, false, false
	}
	if n+int(cnt) > len(out) {
		if n > 0 {
			return n, true, true // the next poll starts with this session
		}
		// The batch is smaller than the session: decode it whole and
		// keep what does not fit for the next polls.
		return q.spillSession(q.decompress(cqe[:], cnt, q.spill), out), true, true
	}
	return n + q.decompress(cqe[:], cnt, out[n:]), false, false
}

// prefetchGroup is how many packets one prefetch call covers: the call
// (and the registers it clobbers) costs more than the prefetches in it.
const prefetchGroup = 8

// farGroup is how many decoded packets past the first N one L2 prefetch
// call covers (prefetchHead).
const farGroup = 16

// groupAt is how many decoded packets from head the poll gathers before
// prefetchHead: a group for the head of the burst, farGroup past it.
func (q *RxQueue) groupAt(head int) int {
	if head < q.dist {
		return prefetchGroup
	}
	return farGroup
}

// prefetchHead prefetches out[head:min(n, N)] into L1 (header lines, the
// shinfo line for write) or, once head ≥ N, out[head:n] into L2 (PREFETCHT1,
// the same lines), and returns where it stopped. Into L2 because all of a
// burst's header lines fall into a few L1 sets (strides are 2 KiB-aligned
// and the headroom is fixed): prefetched into L1 that far ahead they evict
// each other before their turn; L2's sets are indexed by more address bits.
// deliver's stride-ahead prefetch then moves them from L2 to L1.
func (q *RxQueue) prefetchHead(out []rxDesc, head, n int) int {
	if head >= q.dist {
		prefetchDescsL2(&out[head], n-head, uintptr(q.headroom), &q.oneLine)
		q.Stats.PrefetchL2 += uint64(n - head)
		return n
	}
	end := min(n, q.dist)
	m := end - head
	if !q.lab.record() {
		m = 0
	}
	prefetchDescs(&out[head], end-head, uintptr(q.headroom), &q.oneLine, 0, m)
	q.Stats.PrefetchExact += uint64(end - head)
	return end
}

// spillSession moves the first len(out) of the k packets decoded into
// q.spill to out and keeps the rest (each holds the reference on its WQE
// that decoding took).
func (q *RxQueue) spillSession(k int, out []rxDesc) int {
	n := copy(out, q.spill[:k])
	q.spillAt, q.spillN = n, k
	return n
}

// decodeOne handles one uncompressed CQE and reports whether it is a packet.
// w is the owner word already loaded (bytes 60..63: wqe_counter, signature,
// op_own, little-endian). The descriptor is written field by field: a
// composite literal is built on the stack and copied with wide loads that
// cannot be forwarded from its narrow stores (a stall on every CQE).
func (q *RxQueue) decodeOne(cqe *[CQESize]byte, w uint32, d *rxDesc) bool {
	op := uint8(w >> 24)
	bc := binary.BigEndian.Uint32(cqe[CQEOffByteCnt:])
	wqe := binary.BigEndian.Uint16(cqe[CQEOffWQEID:])
	stride := uint16(w)<<8 | uint16(w)>>8
	cs := uint16(bc>>MPWRQConsumedShift) & MPWRQConsumedMask
	// hds_ip_ext, l4_l3_hdr_type and vlan_info are bytes 28..31.
	hv := binary.LittleEndian.Uint32(cqe[CQEOffHdsIPExt:])
	if q.cq.enh {
		// The last normal CQE is the title of the mini-CQE blocks after it.
		q.title = rxDesc{wqe: wqe, stride: stride + cs, hdrType: uint8(hv >> 8),
			vlan: uint16(hv>>16)<<8 | uint16(hv>>24)}
		q.titleOK = op>>CQEOpcodeShift == CQERespSend
	}
	if !q.account(wqe, stride, cs) {
		return false
	}
	if op>>CQEOpcodeShift != CQERespSend {
		switch op >> CQEOpcodeShift {
		case CQERespErr, CQEReqErr:
			q.Stats.ErrCQEs++
			q.Stats.LastSyndrome = cqe[ErrCQEOffSyndrome]
		default:
			q.Stats.Malformed++
		}
		return false
	}
	if bc&MPWRQFillerFlag != 0 {
		q.Stats.FillerCQEs++
		q.Stats.FillerStrides += uint64(cs)
		return false
	}
	if !q.take(wqe, bc) {
		return false
	}
	d.wqe, d.stride, d.strides, d.length = wqe, stride, cs, uint16(bc&MPWRQByteCntMask)
	d.hdrType = uint8(hv >> 8)
	d.vlan = uint16(hv>>16)<<8 | uint16(hv>>24)
	d.hash = binary.BigEndian.Uint32(cqe[CQEOffRSSHashResult:])
	q.locate(d)
	return true
}

// locate sets d.buf from its WQE and stride.
func (q *RxQueue) locate(d *rxDesc) {
	p := q.pool
	d.buf = p.pagePtr.at((uint32(d.wqe)<<p.logStrides | uint32(d.stride)) << p.logStride)
}

// take checks a packet's length and takes the reference its delivery
// holds on its WQE (the WQE is not reposted until every packet of it was
// freed or sent). Too long or too short: dropped and counted, no reference.
func (q *RxQueue) take(wqe uint16, bc uint32) bool {
	if l := bc & MPWRQByteCntMask; l > q.maxFrame || l < 14 {
		q.Stats.Oversize++
		return false
	}
	q.pool.recs[wqe].refs++
	return true
}

// account adds a completion's consumed strides to its WQE's record (always,
// for packets, fillers and errors alike: the device skipped them either way).
// It refuses completions that name a WQE or strides outside the RQ.
func (q *RxQueue) account(wqe, stride, cs uint16) bool {
	p := q.pool
	if uint32(wqe) >= p.nWQE || cs == 0 || uint32(stride)+uint32(cs) > p.strides {
		q.Stats.Malformed++
		return false
	}
	r := &p.recs[wqe]
	if r.consumed+uint32(cs) > p.strides {
		q.Stats.Malformed++
		return false
	}
	r.consumed += uint32(cs)
	return true
}

// decompress expands a basic-layout compressed session of cnt packets whose
// title is at the consumer index (kernel en_rx.c mlx5e_decompress_cqes_start;
// DPDK mlx5_rx.c rxq_cq_decompress): mini-CQE array 0 sits in
// the next slot, array k ≥ 1 at title + 8k; every other field comes from the
// title. Afterwards the owner bytes of all cnt consumed slots are rewritten
// (INVALID opcode, this lap's parity) so the slots hardware left untouched
// cannot look valid on the next lap.
func (q *RxQueue) decompress(title []byte, cnt uint32, out []rxDesc) int {
	c := &q.cq
	// The title's fields in locals, each packet's descriptor written in
	// place (a copied struct would be assembled on the stack).
	wqe := binary.BigEndian.Uint16(title[CQEOffWQEID:])
	hdrType := title[CQEOffL4L3HdrType]
	vlan := binary.BigEndian.Uint16(title[CQEOffVLANInfo:])
	op := title[CQEOffOpOwn] >> CQEOpcodeShift
	base := c.cc
	n := 0
	stride := binary.BigEndian.Uint16(title[CQEOffWQECounter:])
	var arr *[CQESize]byte
	for i := uint32(0); i < cnt; i++ {
		if i%MiniCQEArraySize == 0 {
			at := base + 1
			if i > 0 {
				at = base + i
			}
			arr = c.at(at)
		}
		m := (*[MiniCQESize]byte)(arr[(i%MiniCQEArraySize)*MiniCQESize:])
		bc := binary.BigEndian.Uint32(m[MiniOffByteCnt:])
		cs := uint16(bc>>MPWRQConsumedShift) & MPWRQConsumedMask
		if c.miniFmt == MiniFmtCSUMStrdx {
			stride = binary.BigEndian.Uint16(m[MiniOffStrideIdx:])
		}
		var hash uint32
		if c.miniFmt == MiniFmtHash {
			hash = binary.BigEndian.Uint32(m[0:])
		}
		s := stride
		stride += cs
		if !q.account(wqe, s, cs) {
			continue
		}
		if op != CQERespSend {
			q.Stats.Malformed++
			continue
		}
		if bc&MPWRQFillerFlag != 0 {
			q.Stats.FillerCQEs++
			q.Stats.FillerStrides += uint64(cs)
			continue
		}
		if !q.take(wqe, bc) {
			continue
		}
		d := &out[n]
		d.wqe, d.stride, d.strides, d.length = wqe, s, cs, uint16(bc&MPWRQByteCntMask)
		d.hdrType, d.vlan, d.hash = hdrType, vlan, hash
		q.locate(d)
		n++
	}
	for i := uint32(0); i < cnt; i++ {
		j := base + i
		c.slot(j)[CQEOffOpOwn] = CQEInvalid<<CQEOpcodeShift | uint8(j>>c.logSize)&1
	}
	c.cc = base + cnt
	q.Stats.CompSessions++
	q.Stats.CompPackets += uint64(n)
	return n
}

// decompressBlock expands an enhanced-layout block of cnt mini-CQEs (bytes
// 8i of the slot) against the current title (kernel en_rx.c
// mlx5e_decompress_enhanced_cqe). The block
// consumes cnt CQ indices; the slots after it up to cnt−1 were not written
// and need no fix-up, as validity is the 8-bit iteration count.
func (q *RxQueue) decompressBlock(blk []byte, cnt uint32, out []rxDesc) int {
	c := &q.cq
	n := 0
	t := &q.title
	for i := uint32(0); i < cnt; i++ {
		m := (*[MiniCQESize]byte)(blk[i*MiniCQESize:])
		bc := binary.BigEndian.Uint32(m[MiniOffByteCnt:])
		cs := uint16(bc>>MPWRQConsumedShift) & MPWRQConsumedMask
		stride := t.stride
		if c.miniFmt == MiniFmtCSUMStrdx {
			stride = binary.BigEndian.Uint16(m[MiniOffStrideIdx:])
		}
		hash := t.hash
		if c.miniFmt == MiniFmtHash {
			hash = binary.BigEndian.Uint32(m[0:])
		}
		t.stride = stride + cs // running stride index for formats without one
		if !q.account(t.wqe, stride, cs) {
			continue
		}
		if bc&MPWRQFillerFlag != 0 {
			q.Stats.FillerCQEs++
			q.Stats.FillerStrides += uint64(cs)
			continue
		}
		if !q.take(t.wqe, bc) {
			continue
		}
		d := &out[n]
		d.wqe, d.stride, d.strides, d.length = t.wqe, stride, cs, uint16(bc&MPWRQByteCntMask)
		d.hdrType, d.vlan, d.hash = t.hdrType, t.vlan, hash
		q.locate(d)
		n++
	}
	c.cc += cnt
	q.Stats.CompSessions++
	q.Stats.CompPackets += uint64(n)
	return n
}
