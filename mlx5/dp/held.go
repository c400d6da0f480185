package dp

import "github.com/ovfwd/ovfwd/fwd"

// Held names a packet parked in its buffer: the buffer's handle (stride or
// spare, with its pool's member number) and the line of the stride that
// holds its record. It is what a packet that outlives its batch (waiting
// for a neighbour, queued for another stage) is kept as instead of a
// fwd.Packet value: 8 bytes, and the packet's fields stay in the record,
// in the line right after the frame, which RX already wrote and which
// Hold and Resume touch together with the frame's tail.
type Held uint64

const heldLineShift = 58 // 6 bits: a stride of at most 4 KiB has 64 lines

// heldHandle is h's buffer handle; bits between it and the line stay set,
// so lookup refuses a Held that was never Hold's answer.
func heldHandle(h Held) uint64 { return uint64(h) &^ (63 << heldLineShift) }

// The record a packet leaves in its buffer, four little-endian words at
// the first line after its data (Off+Len rounded up to 64), as RX writes
// it (deliverRun) and Hold rewrites it:
//
//	0: Off|Len|Pool|InPort            (fwd.Packet's words, packet_le_unsafe.go)
//	1: OutPort|Flags|VLAN|L3Off|L4Off
//	2: RSS hash (RX only) | dataref<<32 (owners of the buffer)
//	3: Verdict|Reason|Peer            (written by Hold only)
//
// dataref plays the part of skb_shared_info's dataref
// (include/linux/skbuff.h): how many owners the buffer has. Each owner
// holds one reference on the buffer's WQE (wqeRec.refs), so the stride is
// not reposted, and its bytes not overwritten, until the last owner is
// done; a reader that finds dataref > 1 must not write the bytes in place.
const recordRefOne = 1 << 32

// lookup resolves handle h of the group to its pool and buffer index; ok
// is false for a handle naming no stride or spare (the guard page, another
// group, a caller bug).
func (p *Pool) lookup(h uint64) (o *Pool, l uint32, ok bool) {
	if h>>(handleMemberShift+packMemberBits) != 0 {
		return nil, 0, false
	}
	o = p.owner(h)
	if h>>handleMemberShift != o.member>>handleMemberShift {
		return nil, 0, false
	}
	l = uint32(h)
	if l < o.rxBufs || (l >= o.spareFirst && l < o.handles()) {
		return o, l, true
	}
	return nil, 0, false
}

// Hold parks pk in its buffer: its fields go into the record after its
// data, and the returned Held names it; pk's slot no longer owns the
// buffer (the reference it held on the WQE passes to the Held). ok is
// false, and nothing is written, when pk is not a buffer of queue q's pool
// group or its data leaves no room for the record in front of the stride
// end: the caller then keeps the packet as a value, as before.
func (p *Port) Hold(q int, pk *fwd.Packet) (Held, bool) {
	h := p.queues[q].RX.pool.hold(pk)
	return h, h != 0
}

// HoldBatch holds every packet of pkts (len(out) ≥ len(pkts)); out[i] is 0
// where Hold would have refused pkts[i].
func (p *Port) HoldBatch(q int, pkts []fwd.Packet, out []Held) {
	pool := p.queues[q].RX.pool
	out = out[:len(pkts)]
	// A stride of this pool is the per-packet case, written out here: as
	// a call per packet (pool.hold) the loop spilled its values every time.
	member, rxBufs, id, logStride, limit := pool.member, uint64(pool.rxBufs), pool.id, pool.logStride&31, pool.strideSize-ShinfoSize
	for i := range pkts {
		pk := &pkts[i]
		off := (uint32(pk.Off) + uint32(pk.Len) + 63) &^ 63
		if l := pk.Handle - member; l < rxBufs && pk.Pool == id && off <= limit && off != 0 {
			w0, w1, w2 := packetWords(pk)
			storeRecord(pool.pagePtr.atUnchecked(uint32(l)<<logStride), off, w0, w1, recordRefOne, w2)
			out[i] = Held(pk.Handle | uint64(off/64)<<heldLineShift)
			continue
		}
		out[i] = pool.hold(pk)
	}
}

// hold writes pk's record and names it, or returns 0 (no Held is 0: a
// record line is never line 0, the headroom comes first).
func (pool *Pool) hold(pk *fwd.Packet) Held {
	off := (uint32(pk.Off) + uint32(pk.Len) + 63) &^ 63
	o, l := pool, uint32(pk.Handle-pool.member)
	if pk.Handle-pool.member >= uint64(pool.rxBufs) {
		var ok bool
		if o, l, ok = pool.lookup(pk.Handle); !ok {
			return 0
		}
	}
	if pk.Pool != pool.id || off+ShinfoSize > o.strideSize || off == 0 {
		return 0
	}
	w0, w1, w2 := packetWords(pk)
	storeRecord(o.pagePtr.atUnchecked(l<<o.logStride), off, w0, w1, recordRefOne, w2)
	return Held(pk.Handle | uint64(off/64)<<heldLineShift)
}

// Resume rebuilds a held packet in pk from its record, in place: pk.Buf is
// the stride itself, no byte is copied. The packet takes the Held's
// ownership (its Tx or Free drops the WQE reference); shared reports
// whether other owners remain (Share), in which case the bytes must not be
// written in place. ok is false for a Held that names no buffer.
func (p *Port) Resume(q int, h Held, pk *fwd.Packet) (shared, ok bool) {
	r := p.queues[q].RX.pool.resume(h, pk)
	return r > 1, r != 0
}

// ResumeBatch resumes held[i] into pkts[i] (len(pkts) ≥ len(held)) and
// returns how many of them it could; a Held naming no buffer leaves its
// slot with a nil Buf and Len 0 (Tx and Free skip such a packet's bytes).
func (p *Port) ResumeBatch(q int, held []Held, pkts []fwd.Packet) int {
	pool := p.queues[q].RX.pool
	pkts = pkts[:len(held)]
	member, rxBufs, logStride, size := pool.member, uint64(pool.rxBufs), pool.logStride&31, pool.strideSize
	n := 0
	for i, h := range held {
		hd, off := heldHandle(h), uint32(h>>heldLineShift)*64
		if l := hd - member; l < rxBufs && off+ShinfoSize <= size && off != 0 {
			at := pool.pagePtr.atUnchecked(uint32(l) << logStride)
			w0, w1, _, w3 := loadRecord(at, off)
			putPacketAll(&pkts[i], at.stride(size), hd, w0, w1, w3)
			n++
			continue
		}
		if pool.resume(h, &pkts[i]) != 0 {
			n++
		} else {
			pkts[i] = fwd.Packet{}
		}
	}
	return n
}

// resume fills pk from h's record and returns its dataref (0: h names no
// buffer).
func (pool *Pool) resume(h Held, pk *fwd.Packet) uint64 {
	hd := heldHandle(h)
	off := uint32(h>>heldLineShift) * 64
	o, l := pool, uint32(hd-pool.member)
	if hd-pool.member >= uint64(pool.rxBufs) {
		var ok bool
		if o, l, ok = pool.lookup(hd); !ok {
			return 0
		}
	}
	if off+ShinfoSize > o.strideSize || off == 0 {
		return 0
	}
	at := o.pagePtr.atUnchecked(l << o.logStride)
	w0, w1, w2, w3 := loadRecord(at, off)
	putPacketAll(pk, at.stride(o.strideSize), hd, w0, w1, w3)
	return max(w2>>32, 1)
}

// Share adds an owner to a held receive stride (one more WQE reference and
// dataref), for a second consumer of the same bytes; each owner ends with
// Resume (then Tx or Free) or Release. A spare buffer has no WQE to count
// owners on and cannot be shared.
func (p *Port) Share(q int, h Held) bool {
	o, l, ok := p.queues[q].RX.pool.lookup(heldHandle(h))
	off := uint32(h>>heldLineShift) * 64
	if !ok || l >= o.rxBufs || off+ShinfoSize > o.strideSize || off == 0 {
		return false
	}
	at := o.pagePtr.at(l << o.logStride)
	_, _, w2, _ := loadRecord(at, off)
	storeRecordRef(at, off, w2+recordRefOne)
	o.recs[l>>o.logStrides].refs++
	return true
}

// Release drops a held packet without resuming it (its neighbour never
// answered): one owner fewer in the record and on the WQE, or, for a
// spare, the buffer back to the free list when no owner remains.
func (p *Port) Release(q int, h Held) {
	pool := p.queues[q].RX.pool
	o, l, ok := pool.lookup(heldHandle(h))
	off := uint32(h>>heldLineShift) * 64
	if !ok || off+ShinfoSize > o.strideSize || off == 0 {
		return
	}
	at := o.pagePtr.at(l << o.logStride)
	_, _, w2, _ := loadRecord(at, off)
	if w2>>32 > 1 {
		storeRecordRef(at, off, w2-recordRefOne)
		if l < o.rxBufs {
			o.recs[l>>o.logStrides].refs--
		}
		return
	}
	storeRecordRef(at, off, w2&^(0xFFFFFFFF<<32))
	pool.release(heldHandle(h))
}
