package dp

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/ovfwd/ovfwd/fwd"
)

// TxOptions tune the send path.
type TxOptions struct {
	// FragmentWQEBBs is the fragment size; no WQE crosses a fragment edge
	// and the ring end is always one. 0 means 64 (4 KiB).
	FragmentWQEBBs int
	// PadToEdge selects the pre-2025 kernel policy: when fewer than a full
	// MPWQE's WQEBBs remain before the edge, fill them with NOPs and open
	// the session at the next fragment. The default opens a smaller MPWQE
	// in the remaining room instead (zero NOPs).
	PadToEdge bool
	// CompletionEvery requests a CQE every N WQEs (and always on the last
	// WQE of a Tx call, so no buffer waits for later traffic). 0 means 32.
	CompletionEvery int
	// MaxMPWWQEBBs bounds one MPWQE; 0 means the kernel's
	// max_sq_mpw_wqebbs: min(15, the SQ's MaxWQEBBs).
	MaxMPWWQEBBs int
}

// TxStats counts what the send path did.
type TxStats struct {
	Packets, Bytes uint64
	WQEs           uint64 // all WQEs, NOPs included
	WQEBBs         uint64 // all basic blocks posted, NOPs included
	MPWQEs         uint64
	MPWPackets     uint64
	SendWQEs       uint64
	NOPs           uint64
	Doorbells      uint64
	CQEs           uint64 // completions that released WQEs (error CQEs included)
	ErrCQEs        uint64
	LastSyndrome   uint8
	DropFull       uint64 // no room even after reaping completions
	DropForeign    uint64 // buffer of another pool: a caller bug, never sent
	DropBadLen     uint64
	BadCQEs        uint64 // completions ignored: unknown opcode, or naming no outstanding WQE
}

type txInfo struct {
	wqebbs uint8
	pkts   uint8
}

// TxQueue is one send queue with its CQ. Only the owning worker calls it.
type TxQueue struct {
	ring      []byte
	mask      uint32
	frag      uint32
	pc        uint32 // producer counter in WQEBBs (free running; 16 bits go to the device)
	cc        uint32 // completed up to here
	sqn       uint32
	lkey      uint32
	dbr       []byte
	mmio      Doorbeller
	doorbell  uint32
	minInline uint32
	mpw       bool
	maxMPW    uint32
	pad       bool
	compEvery uint32
	stopRoom  uint32
	maxFrame  uint32

	cq       cqRing
	pool     *Pool
	info     []txInfo
	fifo     []uint32 // handles of posted packets, in WQE order (Pool.pack)
	fifoMask uint32
	ringPtr  unsafePointer // ring (ring_unsafe.go)
	fh       uint32        // fifo head (next to complete), free running
	ft       uint32        // fifo tail

	// Open MPWQE session.
	open    bool
	sessPI  uint32
	sessDS  uint32
	sessMax uint32

	sinceComp uint32
	lastPI    int32 // slot of the last WQE posted in this Tx call, -1: none

	Stats TxStats
}

// NewTxQueue builds a TX queue that sends buffers of pool.
func NewTxQueue(sq *SQMem, cq *CQMem, pool *Pool, o TxOptions) (*TxQueue, error) {
	if err := checkPow2Ring("SQ", sq.Ring, sq.LogWQEBBs, SendWQEBBSize); err != nil {
		return nil, err
	}
	if len(sq.DBRec) < 8 {
		return nil, errDBRec
	}
	c, err := newCQRing(cq)
	if err != nil {
		return nil, err
	}
	size := uint32(1) << sq.LogWQEBBs
	if o.FragmentWQEBBs == 0 {
		o.FragmentWQEBBs = DefaultFragment
	}
	devMax := MaxMPWWQEBBs
	if sq.MaxWQEBBs > 0 {
		// Kernel mlx5e_get_max_sq_aligned_wqebbs: min(15, max_wqe_sz_sq / 64).
		devMax = min(devMax, sq.MaxWQEBBs)
	}
	if o.MaxMPWWQEBBs == 0 {
		o.MaxMPWWQEBBs = devMax
	}
	if o.CompletionEvery == 0 {
		o.CompletionEvery = 32
	}
	frag := uint32(o.FragmentWQEBBs)
	if frag > size {
		frag = size
	}
	if frag&(frag-1) != 0 || frag < MaxSendWQEBBs {
		return nil, fmt.Errorf("dp: fragment of %d WQEBBs must be a power of two ≥ %d", frag, MaxSendWQEBBs)
	}
	if o.MaxMPWWQEBBs < 1 || o.MaxMPWWQEBBs > devMax {
		return nil, fmt.Errorf("dp: MPWQE size %d outside 1..%d (the device's max_wqe_sz_sq allows %d)", o.MaxMPWWQEBBs, devMax, devMax)
	}
	// Stop room: the largest WQE plus the padding it may need (kernel
	// MLX5E_STOP_ROOM = 2w−1), so a started WQE always fits.
	stop := uint32(2*MaxSendWQEBBs - 1)
	if size < 2*stop {
		return nil, fmt.Errorf("dp: SQ of %d WQEBBs is below twice the stop room %d", size, stop)
	}
	if int(c.mask+1) < int(size) {
		return nil, fmt.Errorf("dp: TX CQ of %d entries is smaller than the SQ (%d)", c.mask+1, size)
	}
	q := &TxQueue{
		ring: sq.Ring, mask: size - 1, frag: frag, sqn: sq.SQN, lkey: sq.LKey, dbr: sq.DBRec,
		mmio: sq.MMIO, doorbell: sq.Doorbell, minInline: uint32(sq.MinInline),
		mpw: sq.EnhancedMPW && sq.MinInline == 0, maxMPW: uint32(o.MaxMPWWQEBBs), pad: o.PadToEdge,
		compEvery: uint32(o.CompletionEvery), stopRoom: stop, maxFrame: pool.strideSize,
		cq: c, pool: pool, info: make([]txInfo, size),
		// At most 4 packets per WQEBB (one data segment each, header DSes excluded).
		fifo:   make([]uint32, 4*size),
		lastPI: -1, fifoMask: 4*size - 1, ringPtr: ptrOf(sq.Ring),
	}
	return q, nil
}

// Tx posts every packet of b, rings the doorbell once and resets b. Packets
// that find no room even after completions are reaped are dropped (their
// buffers freed) and counted.
func (q *TxQueue) Tx(b *fwd.Batch) int {
	q.Reap()
	var sent int
	var bytes uint64
	if q.mpw {
		sent, bytes = q.txMPW(b.Pkts)
	} else {
		sent, bytes = q.txSend(b.Pkts)
	}
	q.Stats.Packets += uint64(sent)
	q.Stats.Bytes += bytes
	q.closeSession()
	q.ring_()
	b.Reset()
	return sent
}

// admit checks p before it is posted: a foreign buffer is counted and
// skipped (never freed: it is not this pool's), a bad length or no room
// even after reaping completions drops and frees it.
func (q *TxQueue) admit(p *fwd.Packet) bool {
	if p.Pool != q.pool.id {
		q.Stats.DropForeign++
		return false
	}
	if p.Len < 14 || uint32(p.Off)+uint32(p.Len) > q.maxFrame {
		q.Stats.DropBadLen++
		q.pool.release(p.Handle)
		return false
	}
	if q.free() < q.stopRoom {
		q.closeSession()
		q.Reap()
		if q.free() < q.stopRoom {
			q.Stats.DropFull++
			q.pool.release(p.Handle)
			return false
		}
	}
	return true
}

// txSend posts each packet as a SEND WQE (devices without eMPWQE).
func (q *TxQueue) txSend(pkts []fwd.Packet) (sent int, bytes uint64) {
	for i := range pkts {
		p := &pkts[i]
		if !q.admit(p) {
			continue
		}
		q.postSend(p)
		bytes += uint64(p.Len)
		sent++
	}
	return sent, bytes
}

// txMPW posts each packet as one pointer entry of the open (or a new)
// MPWQE session. Runs of packets that fit the open session go through
// mpwRun, which calls nothing, so its values stay in registers (Go saves no
// register across a call: the session calls inside one loop made it spill
// and reload them on every packet); the first packet of a session and any
// packet admit must look at take the general path here.
func (q *TxQueue) txMPW(pkts []fwd.Packet) (sent int, bytes uint64) {
	for i := 0; i < len(pkts); i++ {
		if q.open && q.free() >= q.stopRoom {
			k, by := q.mpwRun(pkts[i:])
			sent, bytes = sent+k, bytes+by
			if q.sessDS == q.sessMax {
				q.closeSession()
			}
			if i += k; i == len(pkts) {
				break
			}
		}
		p := &pkts[i]
		if !q.admit(p) { // may close the session and reap
			continue
		}
		if !q.open {
			q.openSession() // may pad to the fragment edge
		}
		d := dsAt(q.ringPtr, q.sessPI*SendWQEBBSize+q.sessDS*DSSize)
		binary.LittleEndian.PutUint64(d[DataOffByteCount:], uint64(bits.ReverseBytes16(p.Len))<<16|uint64(bits.ReverseBytes32(q.lkey))<<32)
		binary.BigEndian.PutUint64(d[DataOffAddr:], q.pool.IOVA(p.Handle, p.Off))
		q.fifo[q.ft&q.fifoMask] = q.pool.pack(p.Handle)
		q.ft++
		q.sessDS++
		sent++
		bytes += uint64(p.Len)
		if q.sessDS == q.sessMax {
			q.closeSession()
		}
	}
	return sent, bytes
}

// mpwRun appends pkts to the open session, one pointer entry each, while
// the session has room and each packet is a buffer of this pool's group of
// a legal length (the checks admit would pass; the room check does not
// change inside a session), and returns how many it posted and their bytes.
func (q *TxQueue) mpwRun(pkts []fwd.Packet) (int, uint64) {
	pool := q.pool
	id, maxFrame := pool.id, q.maxFrame
	// The group's members share the stride size (SharePorts): a member
	// differs by its window's IOVA alone, one table load per packet.
	iovas, logStride, idxMask := pool.iovas, pool.logStride&63, pool.packIdx
	lkeyBE := uint64(bits.ReverseBytes32(q.lkey)) << 32
	fifo, fifoMask, ft := q.fifo, q.fifoMask, q.ft
	// Inside the ring: a session never crosses its fragment edge, and
	// the loop stops at the session's end.
	pkts = pkts[:min(len(pkts), int(q.sessMax-q.sessDS))]
	d0 := dsAt(q.ringPtr, q.sessPI*SendWQEBBSize+q.sessDS*DSSize)
	var bytes uint64
	i := 0
	for ; i < len(pkts); i++ {
		p := &pkts[i]
		h := p.Handle
		m := h >> handleMemberShift
		if p.Pool != id || p.Len < 14 || uint32(p.Off)+uint32(p.Len) > maxFrame || m >= uint64(len(iovas)) {
			break // admit and Pool.IOVA decide
		}
		d := dsNext(d0, i)
		// byte_count and lkey, both big-endian, as one little-endian word
		// (written as a big-endian 64-bit value the compiler splits it
		// into four partial stores, knowing the top bytes are zero).
		binary.LittleEndian.PutUint64(d[DataOffByteCount:], uint64(bits.ReverseBytes16(p.Len))<<16|lkeyBE)
		binary.BigEndian.PutUint64(d[DataOffAddr:], iovas[m]+uint64(uint32(h))<<logStride+uint64(p.Off))
		// Pool.pack: m is 0 when the pool is alone.
		fifoSet(fifo, (ft+uint32(i))&fifoMask, uint32(h)&idxMask|uint32(m)<<(32-packMemberBits))
		bytes += uint64(p.Len)
	}
	q.ft, q.sessDS = ft+uint32(i), q.sessDS+uint32(i)
	return i, bytes
}

func (q *TxQueue) free() uint32 { return q.mask + 1 - (q.pc - q.cc) }

// contig is the number of WQEBBs from slot pi to its fragment edge.
func (q *TxQueue) contig(pi uint32) uint32 { return q.frag - pi&(q.frag-1) }

// padTo posts one-WQEBB NOPs up to the fragment edge.
func (q *TxQueue) padTo(n uint32) {
	for ; n > 0; n-- {
		pi := q.pc & q.mask
		w := q.ring[pi*SendWQEBBSize : pi*SendWQEBBSize+DSSize]
		binary.BigEndian.PutUint32(w[CtrlOffOpmodIdxOpcode:], (q.pc&WQEIndexMask)<<8|OpNOP)
		binary.BigEndian.PutUint32(w[CtrlOffQPNDS:], q.sqn<<8|1)
		binary.BigEndian.PutUint32(w[CtrlOffSignature:], 0)
		binary.BigEndian.PutUint32(w[CtrlOffImm:], 0)
		q.info[pi] = txInfo{wqebbs: 1}
		q.finishWQE(pi)
		q.pc++
		q.Stats.NOPs++
		q.Stats.WQEs++
		q.Stats.WQEBBs++
	}
}

// openSession starts an MPWQE at the producer index. Edge reuse: its
// capacity is whatever room is left before the fragment edge (at most
// maxMPW WQEBBs). PadToEdge: NOPs fill a short tail and the session opens a
// full-size MPWQE at the next fragment.
func (q *TxQueue) openSession() {
	pi := q.pc & q.mask
	room := q.contig(pi)
	if room < q.maxMPW && q.pad {
		q.padTo(room)
		pi = q.pc & q.mask
		room = q.contig(pi)
	}
	if room > q.maxMPW {
		room = q.maxMPW
	}
	w := q.ring[pi*SendWQEBBSize : pi*SendWQEBBSize+2*DSSize]
	clear(w) // ctrl + eth seg: no checksum flags, no inline header
	q.open, q.sessPI, q.sessDS, q.sessMax = true, pi, MPWEmptyDS, room*DSPerWQEBB
}

// closeSession writes the session's control segment and advances pc.
func (q *TxQueue) closeSession() {
	if !q.open {
		return
	}
	q.open = false
	pi := q.sessPI
	n := (q.sessDS + DSPerWQEBB - 1) / DSPerWQEBB
	w := q.ring[pi*SendWQEBBSize:]
	binary.BigEndian.PutUint32(w[CtrlOffOpmodIdxOpcode:], (q.pc&WQEIndexMask)<<8|OpEnhancedMPSW)
	binary.BigEndian.PutUint32(w[CtrlOffQPNDS:], q.sqn<<8|q.sessDS)
	pkts := q.sessDS - MPWEmptyDS // one pointer entry per packet
	q.info[pi] = txInfo{wqebbs: uint8(n), pkts: uint8(pkts)}
	q.finishWQE(pi)
	q.pc += n
	q.Stats.WQEs++
	q.Stats.MPWQEs++
	q.Stats.MPWPackets += uint64(pkts)
	q.Stats.WQEBBs += uint64(n)
}

// postSend posts p as a plain SEND WQE with MinInline header bytes inline
// (for devices that need them, where eMPWQE cannot be used).
func (q *TxQueue) postSend(p *fwd.Packet) {
	data := p.Data()
	inl := q.minInline
	if inl > uint32(len(data)) {
		inl = uint32(len(data))
	}
	ds := uint32(2)
	if inl > 2 {
		ds += (inl - 2 + DSSize - 1) / DSSize
	}
	rest := uint32(len(data)) > inl
	if rest {
		ds++
	}
	n := (ds + DSPerWQEBB - 1) / DSPerWQEBB
	if c := q.contig(q.pc & q.mask); c < n {
		q.padTo(c) // non-MPWQE WQEs keep NOP padding, as in the kernel
	}
	pi := q.pc & q.mask
	w := q.ring[pi*SendWQEBBSize : (pi+n)*SendWQEBBSize]
	clear(w[:2*DSSize])
	binary.BigEndian.PutUint32(w[CtrlOffOpmodIdxOpcode:], (q.pc&WQEIndexMask)<<8|OpSend)
	binary.BigEndian.PutUint32(w[CtrlOffQPNDS:], q.sqn<<8|ds)
	eth := w[EthSegOff:]
	binary.BigEndian.PutUint16(eth[EthOffInlineHdrSz:], uint16(inl))
	if inl == MinInlineL2 {
		// The usual minimum (Ethernet + one tag): fixed-size moves, no
		// memmove call. The first 2 bytes end the Ethernet segment, the
		// other 16 fill the next one.
		*(*[2]byte)(eth[EthOffInlineHdrStart:]) = [2]byte(data[:2])
		*(*[MinInlineL2 - 2]byte)(w[2*DSSize:]) = [MinInlineL2 - 2]byte(data[2:MinInlineL2])
	} else {
		copy(eth[EthOffInlineHdrStart:EthOffInlineHdrStart+2], data[:min(inl, 2)])
		if inl > 2 {
			copy(w[2*DSSize:], data[2:inl])
		}
	}
	if rest {
		d := w[(ds-1)*DSSize : ds*DSSize]
		binary.BigEndian.PutUint32(d[DataOffByteCount:], uint32(len(data))-inl)
		binary.BigEndian.PutUint32(d[DataOffLKey:], q.lkey)
		binary.BigEndian.PutUint64(d[DataOffAddr:], q.pool.IOVA(p.Handle, p.Off)+uint64(inl))
	}
	q.fifo[q.ft&q.fifoMask] = q.pool.pack(p.Handle)
	q.ft++
	q.info[pi] = txInfo{wqebbs: uint8(n), pkts: 1}
	q.finishWQE(pi)
	q.pc += n
	q.Stats.WQEs++
	q.Stats.SendWQEs++
	q.Stats.WQEBBs += uint64(n)
}

// finishWQE sets the completion request on every CompletionEvery-th WQE and
// remembers the WQE for the doorbell.
func (q *TxQueue) finishWQE(pi uint32) {
	q.sinceComp++
	w := q.ring[pi*SendWQEBBSize:]
	if q.sinceComp >= q.compEvery {
		w[CtrlOffFmCeSe] = CtrlCQUpdate
		q.sinceComp = 0
	} else {
		w[CtrlOffFmCeSe] = 0
	}
	q.lastPI = int32(pi)
}

// ring_ publishes the WQEs: completion request on the last one if any WQE
// since the last request lacks one, then the doorbell record, then the MMIO
// doorbell with the last WQE's first 8 bytes.
func (q *TxQueue) ring_() {
	if q.lastPI < 0 {
		return
	}
	w := q.ring[uint32(q.lastPI)*SendWQEBBSize:]
	if q.sinceComp > 0 {
		w[CtrlOffFmCeSe] = CtrlCQUpdate
		q.sinceComp = 0
	}
	storeBE32(q.dbr[SndDBROff:], q.pc&WQEIndexMask)
	q.mmio.Write64(q.doorbell, binary.BigEndian.Uint64(w[:8]))
	q.lastPI = -1
	q.Stats.Doorbells++
}

// Reap processes TX completions: every CQE completes all WQEs up to and
// including the one it names; their packets' buffers are released and the
// RX pool reposts WQEs that became free.
func (q *TxQueue) Reap() {
	c := &q.cq
	start := c.cc
	for {
		cqe, w, ok := c.owned(c.cc)
		if !ok {
			break
		}
		c.cc++
		opc := uint8(w>>24) >> CQEOpcodeShift
		switch opc {
		case CQEReq:
		case CQEReqErr, CQERespErr:
			q.Stats.ErrCQEs++
			q.Stats.LastSyndrome = cqe[ErrCQEOffSyndrome]
		default:
			q.Stats.BadCQEs++
			continue
		}
		counter := uint32(uint16(w)<<8 | uint16(w)>>8) // wqe_counter, big-endian in the word
		if (counter-q.cc)&WQEIndexMask >= (q.pc-q.cc)&WQEIndexMask {
			q.Stats.BadCQEs++ // names a WQE not outstanding
			continue
		}
		q.Stats.CQEs++
		q.complete(counter)
	}
	if c.cc != start {
		c.release()
		q.pool.repostGroup()
	}
}

// complete releases the buffers of every WQE from the consumer index up
// to and including the one at wqe_counter counter.
func (q *TxQueue) complete(counter uint32) {
	pool := q.pool
	single := len(pool.group) == 1
	fh, cc := q.fh, q.cc
	fifo, fifoMask, rxBufs, logStrides := q.fifo, q.fifoMask, pool.rxBufs, pool.logStrides&31
	// Consecutive packets mostly come from one WQE: its reference count
	// drops by the run's length in one store, not by one per packet
	// (each decrement would wait on the previous one's store).
	run, cur := int32(0), uint32(0)
	for {
		inf := q.info[cc&q.mask]
		last := cc&WQEIndexMask == counter
		end := fh + uint32(inf.pkts)
		if !single {
			for ; fh != end; fh++ {
				pool.release(pool.unpack(fifoGet(fifo, fh&fifoMask)))
			}
		}
		for ; fh != end; fh++ {
			e := fifoGet(fifo, fh&fifoMask)
			if e >= rxBufs {
				pool.releaseOther(uint64(e))
				continue
			}
			// A stride of this pool (alone: member 0): the per-packet
			// case, release's fast path by hand.
			if w := e >> logStrides; w != cur {
				pool.recs[cur].refs -= run
				run, cur = 0, w
			}
			run++
		}
		cc += uint32(inf.wqebbs)
		if last || inf.wqebbs == 0 {
			break
		}
	}
	if run != 0 {
		pool.recs[cur].refs -= run
	}
	q.fh, q.cc = fh, cc
}

// Outstanding is the number of WQEBBs posted and not yet completed.
func (q *TxQueue) Outstanding() uint32 { return q.pc - q.cc }
