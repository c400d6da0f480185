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
//	2: RSS hash | dataref<<32         (owners of the buffer)
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
	pool := p.queues[q].RX.pool
	o, l, ok := pool.lookup(pk.Handle)
	off := (uint32(pk.Off) + uint32(pk.Len) + 63) &^ 63
	if !ok || pk.Pool != pool.id || off+ShinfoSize > o.strideSize {
		return 0, false
	}
	at := o.pagePtr.at(l << o.logStride)
	w0, w1, w2 := packetWords(pk)
	// The RX record is on this line when the packet's end did not move
	// into another line: keep its hash.
	var hash uint64
	if r0, _, r2, _ := loadRecord(at, off); (uint32(uint16(r0))+uint32(uint16(r0>>16))+63)&^63 == off && uint16(r0>>32) == pk.Pool {
		hash = uint64(uint32(r2))
	}
	storeRecord(at, off, w0, w1, hash|recordRefOne, w2)
	return Held(pk.Handle | uint64(off/64)<<heldLineShift), true
}

// Resume rebuilds a held packet in pk from its record, in place: pk.Buf is
// the stride itself, no byte is copied. The packet takes the Held's
// ownership (its Tx or Free drops the WQE reference); shared reports
// whether other owners remain (Share), in which case the bytes must not be
// written in place. ok is false for a Held that names no buffer.
func (p *Port) Resume(q int, h Held, pk *fwd.Packet) (shared, ok bool) {
	o, l, ok := p.queues[q].RX.pool.lookup(heldHandle(h))
	off := uint32(h>>heldLineShift) * 64
	if !ok || off+ShinfoSize > o.strideSize {
		return false, false
	}
	at := o.pagePtr.at(l << o.logStride)
	w0, w1, w2, w3 := loadRecord(at, off)
	putPacketAll(pk, at.stride(o.strideSize), heldHandle(h), w0, w1, w3)
	return w2>>32 > 1, true
}

// Share adds an owner to a held receive stride (one more WQE reference and
// dataref), for a second consumer of the same bytes; each owner ends with
// Resume (then Tx or Free) or Release. A spare buffer has no WQE to count
// owners on and cannot be shared.
func (p *Port) Share(q int, h Held) bool {
	o, l, ok := p.queues[q].RX.pool.lookup(heldHandle(h))
	off := uint32(h>>heldLineShift) * 64
	if !ok || l >= o.rxBufs || off+ShinfoSize > o.strideSize {
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
	if !ok || off+ShinfoSize > o.strideSize {
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
