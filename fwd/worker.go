package fwd

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/ovfwd/ovfwd/fwd/acl"
	"github.com/ovfwd/ovfwd/fwd/nat"
)

// Worker is the data plane of queue index q: it polls queue q of every
// port and runs each batch to completion. Everything it needs per packet is
// allocated once here and reused; only its own goroutine may call Poll.
type Worker struct {
	e *Engine
	q int

	now    int64 // engine clock, read once per poll
	nowSec uint32

	rx      *Batch
	tx      []*Batch // per egress port
	free    []*Batch // per owner port
	decap   *Batch
	encap   *Batch
	scratch *Batch // Alloc of one buffer

	lim    Limits  // a copy of *limSrc, taken at the start of a poll
	limSrc *Limits // the engine's published Limits lim was copied from

	fragID uint32 // last IPv6 fragment identification this worker used (fragment6)

	icmpTokens int64 // token bucket in nano-tokens
	icmpLast   int64

	nc    neighCache // the last next hop nextHop looked up
	hold  holdTable
	glean gleanState
	learn *spscRing[learnMsg]
	// learnLost tells Service a learn message was dropped: a move the
	// worker already applied may be missing from the events.
	learnLost atomic.Bool
	punts     *spscRing[puntSlot]
	uplinks   *spscRing[puntSlot]   // IP packets routed to an uplink (uplink.go)
	inject    *injectQueue          // worker 0 only: frames from the control plane (inject.go)
	nat       *nat.Table            // this worker's NAT sessions (nat.go)
	natRel    natRelease            // clients whose NAT state to end (ReleaseNATClient)
	hand      []*spscRing[handSlot] // hand[j]: packets for worker j's NAT flows; nil until NAT is set
	handed    []bool                // handed[j]: this poll handed worker j packets
	wake      func()                // wakes this worker's runner from its idle sleep (SetWake)
	sleeping  atomic.Bool           // the runner is (about to be) asleep

	// The ACL stage (acl.go): the filter for this poll (nil: none), the
	// rules aclHits counts for, the rules whose counters changed this
	// poll, the cache of recent decisions.
	acl      *ACL
	aclRules *acl.Rules
	aclHits  []uint64
	aclPub   atomic.Pointer[aclCounters]
	aclDirty []uint64
	aclCache acl.Cache

	// Packets the worker builds, kept here so they never escape to the heap.
	tmpICMP, tmpSolicit, tmpCopy, tmpFlood, tmpFrag, tmpInject, tmpHand Packet

	cnt []uint64
	pub pubCounters

	// Last: its arrays (about 11 KiB) would otherwise push the fields
	// after it away from those before.
	fib fibBatch // routed packets of the batch being received, looked up together
}

// learnRingSlots is each worker's ring of neighbour news for the control
// plane (about 28 bytes a slot). A neighbour storm fills 256 between two
// control passes on a busy machine; a lost message is recovered by
// Service's resync (learnLost), at the cost of a sweep.
const learnRingSlots = 1024

// PuntRingSlots is each worker's ring of frames for the control plane (and,
// on ports ovfwd owns outright, the host's exception path). A TCP burst to
// the host fills 64 slots within one poll; 512 (1 MiB a worker) absorbed it
// without drops in the exception-TAP test.
const PuntRingSlots = 512

func newWorker(e *Engine, q int) *Worker {
	n := len(e.ports)
	w := &Worker{e: e, q: q, rx: NewBatch(e.cfg.Batch), decap: NewBatch(e.cfg.Batch),
		encap: NewBatch(e.cfg.Batch), scratch: NewBatch(1),
		learn: newSPSCRing[learnMsg](learnRingSlots), punts: newSPSCRing[puntSlot](PuntRingSlots),
		uplinks: newSPSCRing[puntSlot](UplinkRingSlots),
		cnt:     ownLines(cPorts + 4*n), pub: make(pubCounters, cPorts+4*n)}
	for range n {
		w.tx = append(w.tx, NewBatch(e.cfg.Batch))
		w.free = append(w.free, NewBatch(e.cfg.Batch))
	}
	w.fib.max, w.fib.how = e.cfg.Batch, rParsed
	if q == 0 {
		w.inject = newInjectQueue()
	}
	// RFC 7739 §5: fragment identifications should not be predictable
	// from the outside; a random start per worker and a counter suffice
	// for the appliance's own (tunnel) traffic.
	w.fragID = rand.Uint32()
	w.icmpTokens = int64(e.cfg.ICMPBurst) * 1e9
	w.hold.init(holdEntries, e.cfg.NeighHold)
	w.glean.ports = make([]tokenBucket, n)
	w.refreshLimits()
	return w
}

// ownLines returns n counters with a cache line of padding on each side,
// so that no other allocation (another worker's counters, say) shares a
// line with the ones this worker writes per packet.
func ownLines(n int) []uint64 {
	const line = 64 / 8
	return make([]uint64, line+n+line)[line : line+n : line+n]
}

// Poll does one pass over queue q of every port and returns how many
// packets it received, counting those the control plane injected: a
// runner that sleeps when idle keeps polling while they flow.
func (w *Worker) Poll() int {
	w.now = w.e.cfg.Now()
	w.nowSec = uint32(w.now / 1e9)
	w.refreshLimits()
	w.refillICMP()
	t := w.e.tables.Load()
	w.nat.Refresh(w.e.nat.Load(), w.now)
	w.refreshACL()
	if w.natRel.pending.Load() {
		w.releaseNATClients()
	}
	total := 0
	for pi, port := range w.e.ports {
		w.rx.Reset()
		n := port.Rx(w.q, w.rx)
		if n == 0 {
			continue
		}
		total += n
		bridge := w.e.cfg.Mode == ModeBridge
		var bytes uint64  // summed here, added to the counter once a batch
		pkts := w.rx.Pkts // nothing in the loop changes the batch: one load of it
		for i := range pkts {
			p := &pkts[i]
			p.InPort, p.Verdict, p.Reason, p.Peer = uint16(pi), VerdictForward, DropNone, 0
			p.Flags &^= FlagLocal
			bytes += uint64(p.Len)
			if bridge {
				w.bridgeFrame(t, p)
			} else {
				w.routeFrame(t, p)
			}
		}
		rxc := w.cnt[cPorts+4*pi : cPorts+4*pi+2]
		rxc[0] += uint64(len(pkts))
		rxc[1] += bytes
		if w.fib.n > 0 {
			w.routePending(t)
		}
		w.runTunnel(t)
	}
	if w.hand != nil {
		total += w.drainHandoffs(t)
		w.runTunnel(t)
	}
	if w.inject != nil {
		total += w.drainInject(t)
		w.runTunnel(t) // injected packets routed into the tunnel
	}
	if w.hold.active > 0 {
		w.serviceHold(t)
	}
	w.flush()
	if w.hand != nil {
		w.wakeHanded()
	}
	w.publishCounters()
	w.publishACL()
	w.nat.Publish()
	return total
}

func (w *Worker) drop(p *Packet, r DropReason) {
	w.cnt[cDrops+int(r)]++
	w.release(p)
}

// release returns a buffer to the port that owns its pool.
func (w *Worker) release(p *Packet) {
	owner := int(p.InPort)
	if owner >= len(w.e.pools) || w.e.pools[owner] != p.Pool {
		for i, pool := range w.e.pools {
			if pool == p.Pool {
				owner = i
				break
			}
		}
	}
	b := w.free[owner]
	b.Add(p)
	if b.Room() == 0 {
		w.e.ports[owner].Free(w.q, b)
	}
}

// send queues p for transmission on port out, copying it into a buffer of
// out's pool first when it lives elsewhere.
func (w *Worker) send(p *Packet, out int) {
	if p.Pool != w.e.pools[out] {
		w.scratch.Reset()
		if w.e.ports[out].Alloc(w.q, w.scratch, 1) == 0 {
			w.drop(p, DropTxFull)
			return
		}
		w.tmpCopy = w.scratch.Pkts[0]
		c := &w.tmpCopy
		if int(c.Off)+int(p.Len) > len(c.Buf) {
			w.release(c)
			w.drop(p, DropTxFull)
			return
		}
		copy(c.Buf[c.Off:], p.Data())
		c.Len, c.InPort, c.Flags, c.VLAN, c.L3Off, c.L4Off, c.Peer = p.Len, uint16(out), p.Flags, p.VLAN, p.L3Off, p.L4Off, p.Peer
		w.release(p)
		w.cnt[cCopies]++
		p = c
	}
	copyPacket(w.txSlot(out), p)
	w.txQueued(out)
}

// copyPacket copies *p to *q field by field. The stages before send store
// single fields of p (the ingress port, flags, the VLAN); a whole-struct
// copy reads them back with 16-byte loads, which the store buffer cannot
// forward from narrower stores, and waits for the stores to retire, once
// per packet. Loads of each field's own width forward at once.
// TestCopyPacketCopiesEveryField keeps this in step with Packet.
func copyPacket(q, p *Packet) {
	q.Buf, q.Handle, q.Off, q.Len, q.Pool = p.Buf, p.Handle, p.Off, p.Len, p.Pool
	q.InPort, q.OutPort, q.Flags, q.VLAN, q.L3Off, q.L4Off = p.InPort, p.OutPort, p.Flags, p.VLAN, p.L3Off, p.L4Off
	q.Verdict, q.Reason, q.Peer = p.Verdict, p.Reason, p.Peer
}

// txSlot appends an empty slot to port out's TX batch, for a packet of
// out's pool; txQueued must follow once the slot is filled.
func (w *Worker) txSlot(out int) *Packet {
	b := w.tx[out]
	n := len(b.Pkts)
	b.Pkts = b.Pkts[:n+1] // send flushes a full batch, so there is room
	q := &b.Pkts[n]
	return q
}

// txQueued finishes a txSlot: it stamps the egress port and flushes a full
// batch.
func (w *Worker) txQueued(out int) {
	b := w.tx[out]
	b.Pkts[len(b.Pkts)-1].OutPort = uint16(out)
	if b.Room() == 0 {
		w.flushTx(out)
	}
}

func (w *Worker) flushTx(out int) {
	b := w.tx[out]
	n, bytes := b.Len(), uint64(0)
	for i := range b.Pkts {
		bytes += uint64(b.Pkts[i].Len)
	}
	sent := w.e.ports[out].Tx(w.q, b)
	c := w.cnt[cPorts+4*out:]
	c[2] += uint64(sent)
	c[3] += bytes
	w.cnt[cDrops+int(DropTxFull)] += uint64(n - sent)
}

func (w *Worker) flush() {
	for i, b := range w.tx {
		if b.Len() > 0 {
			w.flushTx(i)
		}
	}
	for i, b := range w.free {
		if b.Len() > 0 {
			w.e.ports[i].Free(w.q, b)
		}
	}
}

// alloc lends one empty buffer of port's pool, or nil. The packet lives in
// w.scratch, which the next alloc or a send across pools reuses: a caller
// that keeps it past either copies it to a tmp* packet of its own first.
func (w *Worker) alloc(port int) *Packet {
	w.scratch.Reset()
	if w.e.ports[port].Alloc(w.q, w.scratch, 1) == 0 {
		return nil
	}
	p := &w.scratch.Pkts[0]
	p.InPort, p.Flags, p.Verdict, p.Reason, p.Peer = uint16(port), 0, VerdictForward, DropNone, 0
	return p
}

// punt copies p to the control plane's ring and frees it.
func (w *Worker) punt(p *Packet) {
	s := w.punts.slot()
	if s == nil || int(p.Len) > len(s.data) {
		w.drop(p, DropPuntFull)
		return
	}
	s.port, s.n = p.InPort, uint16(copy(s.data[:], p.Data()))
	w.punts.publish()
	w.cnt[cPunts]++
	w.release(p)
}

// refillICMP adds the tokens earned since the last poll.
func (w *Worker) refillICMP() {
	rate := int64(w.lim.ICMPRate)
	if rate < 0 {
		return
	}
	if w.icmpLast != 0 {
		w.icmpTokens = min(w.icmpTokens+(w.now-w.icmpLast)*rate, int64(w.lim.ICMPBurst)*1e9)
	}
	w.icmpLast = w.now
}

func (w *Worker) takeICMPToken() bool {
	if w.lim.ICMPRate < 0 || w.icmpTokens < 1e9 {
		w.cnt[cICMPLimited]++
		return false
	}
	w.icmpTokens -= 1e9
	return true
}
