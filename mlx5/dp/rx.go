package dp

import (
	"encoding/binary"
	"fmt"

	"github.com/ovfwd/ovfwd/fwd"
)

// RxOptions tune the receive path.
type RxOptions struct {
	// PrefetchDistance is N in "prefetch packet i+N while handling packet
	// i"; 0 disables prefetching. Negative means the default, 4.
	PrefetchDistance int
	// FixedPrefetch keeps the distance in every burst; otherwise the queue
	// switches the prefetch off while timed bursts find it cheaper so
	// (adapt.go).
	FixedPrefetch bool
	// MaxFrame is the largest frame accepted (hw MTU: L3 MTU + 22); longer
	// completions are dropped and counted as Oversize. 0 means 1522.
	MaxFrame int
	// Headroom in front of every packet; 0 means fwd.Headroom.
	Headroom int
}

// DefaultPrefetchDistance is the stride-ahead distance (docs/mlx5.md section 3).
const DefaultPrefetchDistance = 4

// RxQueue is one striding RQ with its CQ. Only the owning worker calls it.
//
// Its packet context is per queue and reused, never a struct per completion
// (Go zeroes every new variable, and one that escapes is a heap allocation):
// poll decodes each CQE into desc, the queue's array of packet records, and
// deliver carries a packet's fields from there to its packet slot and shinfo
// record in registers.
type RxQueue struct {
	cq       cqRing
	pool     *Pool
	headroom uint32
	maxFrame uint32
	dist     int // this burst's distance: distOn, or 0 while adapt chose off
	distOn   int // the configured distance
	adapt    prefetchAdapt
	// oneLine[t] is 1 when a frame whose CQE says l4_l3_hdr_type t has
	// all its headers (one 802.1Q tag allowed) in the first line from
	// the headroom: the prefetch then skips the second line.
	oneLine [256]uint8
	desc    [fwd.MaxBatch]rxDesc
	inPort  uint16
	tx      *TxQueue // the queue sending this pool's buffers: reaped on every Rx
	title   rxDesc   // enhanced compression: fields of the last normal CQE
	titleOK bool
	// spill holds the rest of a compressed session that did not fit the
	// caller's batch (spill[spillAt:spillN]); each holds a reference on its
	// WQE so the stride is not reposted before the packet is delivered.
	spill           []rxDesc
	spillAt, spillN int
	// lab: the measurement variants (lab.go); empty in the product build.
	lab rxLab

	Stats RxStats
}

// NewRxQueue builds an RX queue over a created CQ and striding RQ. poolID is
// the fwd pool id its buffers carry.
func NewRxQueue(cq *CQMem, rq *RQMem, poolID uint16, o RxOptions) (*RxQueue, error) {
	if o.Headroom == 0 {
		o.Headroom = fwd.Headroom
	}
	if o.MaxFrame == 0 {
		o.MaxFrame = 1522
	}
	if o.PrefetchDistance < 0 {
		o.PrefetchDistance = DefaultPrefetchDistance
	}
	c, err := newCQRing(cq)
	if err != nil {
		return nil, err
	}
	if c.mask+1 < 1<<(rq.LogWQEs+rq.LogStrides) {
		return nil, fmt.Errorf("dp: CQ of %d entries cannot hold one completion per stride (%d)", c.mask+1, 1<<(rq.LogWQEs+rq.LogStrides))
	}
	p, err := newPool(poolID, rq, o.Headroom)
	if err != nil {
		return nil, err
	}
	if (o.Headroom+o.MaxFrame+63)&^63+ShinfoSize > int(p.strideSize) {
		return nil, fmt.Errorf("dp: stride %d cannot hold headroom %d + frame %d + shinfo", p.strideSize, o.Headroom, o.MaxFrame)
	}
	c.pfCQE = o.PrefetchDistance > 0
	q := &RxQueue{cq: c, pool: p, headroom: uint32(o.Headroom), maxFrame: uint32(o.MaxFrame), dist: o.PrefetchDistance,
		distOn: o.PrefetchDistance, spill: make([]rxDesc, c.mask+1)}
	q.adapt.on, q.adapt.chosen = o.PrefetchDistance > 0 && !o.FixedPrefetch, true
	for t := range q.oneLine {
		if l := int(hdrTab[t].hdrLen); l != 0 && o.Headroom%64+l+vlanTagLen <= 64 {
			q.oneLine[t] = 1
		}
	}
	return q, nil
}

// Pool is the queue's buffer pool (shared with the TX queue that sends its
// buffers).
func (q *RxQueue) Pool() *Pool { return q.pool }

// Rx appends up to b.Room() received packets to b and returns how many.
func (q *RxQueue) Rx(b *fwd.Batch) int {
	room := b.Room()
	if room > len(q.desc) {
		room = len(q.desc)
	}
	var probe uint8
	var t0 uint64
	if q.adapt.on {
		if probe = q.adaptStart(); probe != 0 {
			t0 = cycles()
		}
	}
	n, more := q.poll(q.desc[:room])
	got := q.deliver(b, n, more)
	if q.adapt.on && n > 0 {
		var dt uint64
		if probe != 0 {
			dt = cycles() - t0
		}
		q.adaptEnd(probe, dt, n)
	}
	if q.tx != nil {
		// Buffers come back through TX completions; reap them here too, so
		// an RX-only poll loop never starves the RQ of WQEs. After the
		// burst, not before: the TX CQE line has usually left L1 since
		// the last call, and here its miss overlaps the burst's last
		// stores instead of delaying the poll.
		q.tx.Reap()
	}
	q.pool.repost()
	return got
}

// deliver turns decoded completions 0..n-1 into packets of b, a prefetch
// group at a time: the prefetch call sits between groups and the packets
// of a group go through deliverRun, which calls nothing, so the loop's
// values stay in registers (Go saves no register across a call: a call
// inside the loop made it spill them and reload them on every packet).
// A packet deliverRun leaves (a tag to re-insert or a tagged frame) takes
// deliverSlow. The group prefetch stays written out in it: as a function it
// cost 8.3 instructions per packet, inline 4.8 (callgrind, BenchmarkForward
// warm/scattered/64/D4).
func (q *RxQueue) deliver(b *fwd.Batch, n int, more bool) int {
	k0 := len(b.Pkts)
	pkts := b.Pkts[k0 : k0+n] // n ≤ b.Room()
	descs := q.desc[:n]
	var bytes uint64
	for g := 0; g < n; g += prefetchGroup {
		if q.dist > 0 {
			// Stride-ahead, one assembly call: the header lines of
			// packets g+N … g+N+7 (decoded: exact addresses) and, for
			// write, the shinfo lines of the group after those, a group
			// earlier than their headers (the store waits for the whole
			// ownership request, a header load of a line already
			// arriving does not). The first group also asks for its own
			// shinfo lines; later ones' were asked for by the call
			// before. Written out here: a Go function holding it cost
			// its frame and argument spills every group.
			if j := g + q.dist; j < n {
				end := min(j+prefetchGroup, n)
				lo := end
				if g == 0 {
					lo = j
				}
				m := min(end+prefetchGroup, n) - lo
				if !q.lab.record() {
					m = 0
				}
				prefetchDescs(&q.desc[j], end-j, uintptr(q.headroom), &q.oneLine, lo-j, m)
			}
			if more && g+q.dist+prefetchGroup > n {
				q.prefetchGuess(g, n)
			}
		}
		end := min(g+prefetchGroup, n)
		for i := g; i < end; {
			run := end
			if q.lab.freshContext() { // constant false in the product build
				run = i + 1
			}
			k, by := q.deliverRun(descs[i:run], pkts[i:run])
			bytes += by
			if i += k; i < run {
				bytes += q.deliverSlow(&descs[i], &pkts[i])
				i++
			}
		}
	}
	if q.dist > 0 && n > q.dist {
		// What the stride-ahead prefetches of this burst asked for.
		q.Stats.PrefetchExact += uint64(n - q.dist)
		q.Stats.PrefetchShinfoEarly += uint64(max(n-q.dist-prefetchGroup, 0))
	}
	b.Pkts = b.Pkts[:k0+n]
	q.Stats.Packets += uint64(n)
	q.Stats.Bytes += bytes
	return n
}

// deliverRun fills pkts[i] from descs[i] (len(pkts) == len(descs)) until a
// packet needs deliverSlow, and returns how many it filled and their
// bytes. The fields stay in registers from the descriptor to their final
// places (packet slot, shinfo), each written with 8-byte stores: a context
// in memory is stored and reloaded per field, and a composite literal is
// built on the stack and copied with wide loads the narrow stores cannot
// forward to. It stays whole and calls nothing: call-free delivery and TX
// runs took 440 → 409 instructions per packet (callgrind, warm/scattered/64/D0).
func (q *RxQueue) deliverRun(descs []rxDesc, pkts []fwd.Packet) (int, uint64) {
	p := q.pool
	var bytes uint64
	// Loop invariants in locals: the stores to the packet slots and shinfo
	// would otherwise make the compiler reload them from q and p. Shift
	// counts masked to 31 (they are at most 16): unmasked, each shift costs
	// a compare and a mask (Go defines shifts past the width).
	logStrides, strideSize, data := p.logStrides&31, p.strideSize, q.headroom
	// pool|inPort|offset, the slot's first word but for the length.
	member, word0 := p.member, uint64(p.id)<<32|uint64(q.inPort)<<48|uint64(data)
	pkts = pkts[:len(descs)]
	for i := range descs {
		desc := &descs[i]
		at := desc.buf
		w1, w2 := descWords(desc) // hash|wqe|stride, strides|length|hdrType|_|vlan
		t := uint8(w2 >> 32)
		if t&CQEVLANStripped != 0 {
			return i, bytes
		}
		if et := etherType(at, data); et == etherTypeVLAN || et == etherTypeSVLAN {
			return i, bytes
		}
		handle := uint32(uint16(w1>>32))<<logStrides | uint32(w1>>48)
		length := uint32(uint16(w2 >> 16)) // checked when decoded (take)
		// Untagged: everything follows from the CQE byte alone.
		h := &hdrTab[t]
		// The record: the packet's first two words, hash|dataref (one owner).
		w0 := word0 | uint64(length)<<16
		if q.lab.record() { // constant true in the product build
			writeShinfo(at, (data+length+63)&^63, w0, h.pkt, uint64(uint32(w1))|1<<32)
		}
		putPacketWords(&pkts[i], at.stride(strideSize), member|uint64(handle), w0, h.pkt)
		bytes += uint64(length)
	}
	return len(descs), bytes
}

// deliverSlow fills pk from desc for a frame whose tag the device stripped
// (re-inserted here) or that carries one; it returns the frame's length.
func (q *RxQueue) deliverSlow(desc *rxDesc, pk *fwd.Packet) uint64 {
	p := q.pool
	handle := uint32(desc.wqe)<<(p.logStrides&31) | uint32(desc.stride)
	length := uint32(desc.length)
	data := q.headroom
	at := desc.buf
	if desc.hdrType&CQEVLANStripped != 0 {
		data, length = reinsertTag(at, data, length, desc.vlan)
	}
	var flags fwd.Flags
	var l3Off, l4Off uint8
	var vlan uint16
	if et := etherType(at, data); et != etherTypeVLAN && et != etherTypeSVLAN {
		h := &hdrTab[desc.hdrType]
		flags, l3Off, l4Off = h.flags, h.l3Off, h.l4Off
	} else {
		flags, l3Off, l4Off, _, vlan = HeaderInfo(desc.hdrType, at.stride(p.strideSize)[data:data+length])
	}
	w0 := uint64(data) | uint64(length)<<16 | uint64(p.id)<<32 | uint64(q.inPort)<<48
	writeShinfo(at, (data+length+63)&^63, w0,
		uint64(flags)<<16|uint64(vlan)<<32|uint64(l3Off)<<48|uint64(l4Off)<<56, uint64(desc.hash)|1<<32)
	putPacket(pk, at.stride(p.strideSize), p.member|uint64(handle), w0, flags, vlan, l3Off, l4Off)
	return uint64(length)
}

// reinsertTag puts a tag the device took out (an RQ with vsd = 0) back in
// front of the frame at data, in the headroom, so every packet reaches fwd
// as it was on the wire (12 header bytes move, never the payload), and
// returns the frame's new offset and length.
func reinsertTag(at unsafePointer, data, length uint32, vlan uint16) (uint32, uint32) {
	buf := at.stride(data + length)
	d := data - vlanTagLen
	copy(buf[d:d+12], buf[data:data+12])
	binary.BigEndian.PutUint16(buf[d+12:], etherTypeVLAN)
	binary.BigEndian.PutUint16(buf[d+14:], vlan)
	return d, length + vlanTagLen
}

// hdrEntry is HeaderInfo's answer for an untagged frame, which depends on
// the CQE's l4_l3_hdr_type byte alone.
type hdrEntry struct {
	pkt          uint64 // flags, l3Off, l4Off at their places in the packet's second word (putPacketWords)
	flags        fwd.Flags
	l3Off, l4Off uint8
	hdrLen       uint16
}

// hdrTab holds HeaderInfo for every l4_l3_hdr_type value and an untagged
// frame, so the common case is one load instead of a chain of branches.
var hdrTab = func() (t [256]hdrEntry) {
	var frame [14]byte
	frame[12] = 0x08 // IPv4 ethertype: anything but a tag gives the same answer
	for i := range t {
		e := &t[i]
		e.flags, e.l3Off, e.l4Off, e.hdrLen, _ = HeaderInfo(uint8(i), frame[:])
		e.pkt = uint64(e.flags)<<16 | uint64(e.l3Off)<<48 | uint64(e.l4Off)<<56
	}
	return
}()

// prefetchGuess aims the stride-ahead prefetch of group i at the packets
// past the burst, which only queued completions will bring, the way the
// kernel patch does: further strides of the same WQE, each as long as
// packet i; a guess that leaves the WQE is skipped.
func (q *RxQueue) prefetchGuess(i, n int) {
	last := &q.desc[n-1]
	for j, end := max(i+q.dist, n), i+q.dist+prefetchGroup; j < end; j++ {
		stride := uint32(last.stride) + uint32(j-(n-1))*uint32(q.desc[i].strides)
		if stride >= q.pool.strides || last.strides == 0 {
			q.Stats.PrefetchSkippedWQEnd++
			return
		}
		q.Stats.PrefetchGuess++
		g := rxDesc{wqe: last.wqe, stride: uint16(stride), length: q.desc[i].length}
		q.locate(&g)
		prefetchDescs(&g, 1, uintptr(q.headroom), &q.oneLine, 0, 1)
	}
}

// The shinfo record (writeShinfo; held.go reads it) is the buffer-resident
// packet record: the packet's fwd.Packet words Off|Len|Pool|InPort and
// OutPort|Flags|VLAN|L3Off|L4Off, then hash|dataref, and, once held,
// Verdict|Reason|Peer. A packet that leaves its batch stays in its stride
// with its fields there (Port.Hold) — the role skb_shared_info plays for
// an skb that outlives the kernel's poll.

const (
	vlanTagLen     = 4
	etherTypeVLAN  = 0x8100
	etherTypeSVLAN = 0x88A8
)

// HeaderInfo decodes a CQE's l4_l3_hdr_type byte, with the frame's own
// ethertype for the L2 length, into packet flags, the L3 and L4 offsets
// from the frame start, the header length to copy when a packet must change
// buffers (0 when the CQE does not pin it down, e.g. IP options or an
// unknown L3) and the outer VLAN id. The CQE says nothing about a tag left
// in the frame (bit 0 is "stripped", clear here), so the ethertype at byte
// 12 decides: one 802.1Q tag shifts L3 by 4, two tags leave it to the
// parser. frame must hold at least 14 bytes. Payload is never copied.
func HeaderInfo(t uint8, frame []byte) (flags fwd.Flags, l3Off, l4Off uint8, hdrLen uint16, vlan uint16) {
	l2 := uint8(14)
	switch binary.BigEndian.Uint16(frame[12:]) {
	case etherTypeVLAN:
		if len(frame) < 18 {
			return fwd.FlagVLAN, 0, 0, 0, 0
		}
		flags |= fwd.FlagVLAN
		vlan = binary.BigEndian.Uint16(frame[14:]) & 0xFFF
		if et := binary.BigEndian.Uint16(frame[16:]); et == etherTypeVLAN || et == etherTypeSVLAN {
			return flags | fwd.FlagQinQ, 0, 0, 0, vlan
		}
		l2 += vlanTagLen
	case etherTypeSVLAN:
		if len(frame) >= 18 {
			vlan = binary.BigEndian.Uint16(frame[14:]) & 0xFFF
		}
		return fwd.FlagVLAN | fwd.FlagQinQ, 0, 0, 0, vlan
	}
	var l3len uint8
	switch (t >> CQEL3HdrShift) & CQEL3HdrMask {
	case CQEL3HdrIPv4:
		flags |= fwd.FlagIPv4
		l3len = 20
	case CQEL3HdrIPv6:
		flags |= fwd.FlagIPv6
		l3len = 40
	default:
		return flags, 0, 0, 0, vlan
	}
	if t&CQEIPFrag != 0 {
		flags |= fwd.FlagFrag
	}
	var l4len uint16
	switch (t >> CQEL4HdrShift) & CQEL4HdrMask {
	case CQEL4HdrUDP:
		flags |= fwd.FlagUDP
		l4len = 8
	case CQEL4HdrTCP, CQEL4HdrTCPAck, CQEL4HdrTCPAckD:
		flags |= fwd.FlagTCP
		l4len = 20 // minimum; options need the data-offset nibble
	}
	if t&CQEIPExt != 0 {
		// Options / extension headers: the L4 offset is unknown.
		return flags, 0, 0, 0, vlan
	}
	flags |= fwd.FlagParsed
	l4 := l2 + l3len
	if l4len == 0 {
		return flags, l2, 0, uint16(l4), vlan
	}
	return flags, l2, l4, uint16(l4) + l4len, vlan
}
