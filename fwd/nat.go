package fwd

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/ovfwd/ovfwd/fwd/nat"
)

// NAT44, the pipeline's NAT stage (fwd/nat does the translating). With
// no [[nat]] rule the router tests nat.Table.Active once where each of
// these would run, and nothing else of NAT's runs.
//
//   - routeFrame, parking an IPv4 TCP or UDP packet for the batch's FIB
//     lookup, starts the load of its session's index line (in line there:
//     a call costs a frame per packet) and parks the hint in w.fib.natSlot.
//   - forwardPendingNAT, routePending's loop with NAT on, finds the
//     batch's sessions (nat.Table.Touch) and passes each packet its hint.
//   - forwardIP, for a routed IPv4 packet leaving through a port, after
//     the TTL and MTU checks (so ICMP errors quote what the sender sent)
//     and before the per-hop rewrite and neighbour resolution: the hinted
//     session's fast path in line, natOutRouted for the rest.
//   - natLocal: a packet the FIB says is ours is offered before local
//     delivery; a translated one is routed again by its new (inside)
//     destination, usually into the tunnel.
//
// A flow belongs to one worker (see fwd/nat); a packet that arrived on
// another worker's queue is copied over a bounded ring to its owner,
// which routes it from the start.

// handSlots bounds each worker-to-worker handoff ring (2 KiB a slot): it
// absorbs the owner being off its CPU for a moment at a TCP burst's rate.
// Many workers make many rings (n·(n-1)), each then smaller.
func handSlots(workers int) int {
	if workers <= 4 {
		return 1024
	}
	return 256
}

type handSlot struct {
	port uint16
	how  uint8
	n    uint16
	data [2048]byte
}

// SetNAT publishes a NAT configuration to every worker (from its next
// poll); nil turns NAT off. Sessions of rules k keeps unchanged survive.
func (e *Engine) SetNAT(k *nat.Compiled) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if k != nil && len(e.workers) > 1 && e.workers[0].hand == nil {
		for _, w := range e.workers {
			w.handed = make([]bool, len(e.workers))
			hand := make([]*spscRing[handSlot], len(e.workers))
			for j := range hand {
				if j != w.q {
					hand[j] = newSPSCRing[handSlot](handSlots(len(e.workers)))
				}
			}
			w.hand = hand
		}
	}
	e.nat.Store(k) // after the rings: a worker that sees k sees them
}

// NATStats sums the workers' NAT counters as of their last poll.
func (e *Engine) NATStats() nat.Stats {
	var s nat.Stats
	for _, w := range e.workers {
		s.Add(w.nat.Stats())
	}
	return s
}

// NATEvents calls fn with every port block allocation and release since
// the last call; the control plane logs them.
func (e *Engine) NATEvents(fn func(nat.Event)) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, w := range e.workers {
		n += w.nat.Events(fn)
	}
	return n
}

func l4Off(p *Packet) int {
	if p.L4Off == 0 {
		return 0
	}
	return int(p.L4Off) - int(p.L3Off)
}

// forwardPendingNAT is routePending's loop with NAT on: Touch finds the
// batch's sessions by the index lines Prefetch loaded (routeFrame), and
// each packet goes to forwardIP with its own hint (0 for IPv6).
func (w *Worker) forwardPendingNAT(t *tables, n int, how uint8) {
	f := &w.fib
	w.nat.Touch(f.natSlot[:n])
	j4, j6 := 0, 0
	for i, p := range f.pend[:n] {
		if p.Flags&FlagIPv4 != 0 {
			w.forwardIP(t, p, f.natSlot[i&(MaxBatch-1)], how, f.val4[j4&(MaxBatch-1)], f.ok4[j4&(MaxBatch-1)])
			j4++
		} else {
			w.forwardIP(t, p, 0, how, f.val6[j6&(MaxBatch-1)], f.ok6[j6&(MaxBatch-1)])
			j6++
		}
	}
}

// natOut translates a packet about to leave through a's port (hint: its
// Touch hint, or 0); false when it was consumed (dropped or handed to
// its owner).
func (w *Worker) natOut(p *Packet, a *adjacency, how uint8, hint uint64) bool {
	if !w.nat.Active() { // inlined: no call per packet when NAT is off
		return true
	}
	return w.natTranslateOut(p, a, how, hint)
}

// natOutRouted is forwardIP's NAT stage for a packet the fast path did
// not take: the general translation, then the TTL.
func (w *Worker) natOutRouted(p *Packet, a *adjacency, how uint8, hint uint64) bool {
	if !w.natTranslateOut(p, a, how, hint) {
		return false
	}
	if how&rOrigin == 0 {
		decHop(ip4Hdr(p), p.Flags&FlagIPv4 != 0)
	}
	return true
}

func (w *Worker) natTranslateOut(p *Packet, a *adjacency, how uint8, hint uint64) bool {
	if how&rOrigin != 0 || p.Flags&FlagIPv4 == 0 || a.kind == adjUplink {
		return true
	}
	// Only what the general path needs to work out again lives across
	// the fast path's call.
	if w.nat.OutFast(p.Buf, int(p.Off)+int(p.L3Off), int(a.port), hint) {
		return true
	}
	return w.natOutSlow(p, int(a.port), how, hint)
}

func (w *Worker) natOutSlow(p *Packet, port int, how uint8, hint uint64) bool {
	// A VPN client's address may only come out of the tunnel: from a port
	// it is someone on the LAN using it, who would be translated (and
	// given port blocks, logged under the client's name) as the client.
	// Checked here, where NAT would make new state; a packet of a live
	// session takes the fast path unchecked.
	if how&rInner == 0 && w.tunnelSource(w.e.tables.Load(), p) {
		w.drop(p, DropTunnelSource)
		return false
	}
	v, owner := w.nat.OutHint(p.Data()[p.L3Off:], l4Off(p), port, hint)
	switch v {
	case nat.Pass, nat.Done:
		return true
	case nat.Handoff:
		w.handoff(p, owner, how|rFiltered)
		return false
	}
	w.drop(p, DropNAT)
	return false
}

// natLocal offers a packet for one of our addresses to NAT: a returning
// packet for an inside host, or a hairpinned one (an inside client to an
// outside address and port, RFC 4787 REQ-9: its source is translated as
// if it left, then it is delivered as if it came back). false: not NAT's,
// deliver it locally.
func (w *Worker) natLocal(t *tables, p *Packet, how uint8) bool {
	if !w.nat.Active() || how&rOrigin != 0 || p.Flags&FlagIPv4 == 0 {
		return false
	}
	// Before NAT's incremental update, as forwardIP does; not for a VPN
	// datagram, which NAT passes and the tunnel decrypts.
	if p.Flags&(FlagTCP|FlagUDP) != 0 && p.Flags&FlagFrag == 0 && !tunnelData(t, p, how) && finishPartialCsum(p) {
		w.cnt[cCsumPartial]++
	}
	l3, l4 := p.Data()[p.L3Off:], l4Off(p)
	hair := false
	if port, ok := w.nat.OutsidePort([4]byte(l3[16:20])); ok && w.nat.Claims(l3, l4) {
		switch v, owner := w.nat.Out(l3, l4, port); v {
		case nat.Done:
			hair = true
		case nat.Pass:
		case nat.Handoff:
			w.handoff(p, owner, how)
			return true
		default:
			w.drop(p, DropNAT)
			return true
		}
	}
	switch v, owner := w.nat.In(l3, l4); v {
	case nat.Pass:
		return false
	case nat.Done:
		if hair {
			w.nat.Hairpinned()
			how &^= rFromPeer // translated: from the outside now, not peer to peer (client_to_client)
		}
		w.routeIP(t, p, how)
	case nat.Handoff:
		if hair {
			how = 0 // translated: it is an outside packet now
		}
		w.handoff(p, owner, how)
	default:
		w.drop(p, DropNAT)
	}
	return true
}

// handoff copies p's IP packet to worker to's ring and frees p.
func (w *Worker) handoff(p *Packet, to int, how uint8) {
	r := w.hand[to]
	s := r.slot()
	l3 := p.Data()[p.L3Off:]
	if s == nil || len(l3) > len(s.data) {
		w.drop(p, DropHandoffFull)
		return
	}
	s.port, s.how, s.n = p.InPort, how, uint16(copy(s.data[:], l3))
	r.publish()
	w.handed[to] = true
	w.cnt[cHandoffs]++
	w.release(p)
}

// drainHandoffs routes what other workers handed this one, in buffers of
// the port each packet came in on, and returns how many.
func (w *Worker) drainHandoffs(t *tables) int {
	n := 0
	for _, o := range w.e.workers {
		if o == w {
			continue
		}
		r := o.hand[w.q]
		h, end := r.head.Load(), r.tail.Load()
		n += int(end - h)
		for i := h; i < end; i++ {
			s := &r.slots[i&r.mask]
			a := w.alloc(int(s.port))
			if a == nil {
				w.cnt[cDrops+int(DropHandoffFull)]++
				continue
			}
			w.tmpHand = *a // alloc's slot is reused by the next alloc (ICMP errors)
			p := &w.tmpHand
			if int(p.Off)+int(s.n) > len(p.Buf) {
				w.drop(p, DropHandoffFull)
				continue
			}
			p.Len = uint16(copy(p.Buf[p.Off:], s.data[:s.n]))
			p.Flags = FlagL3Only
			if r := Parse(p); r != DropNone {
				w.drop(p, r)
				continue
			}
			w.routeIP(t, p, s.how)
		}
		r.head.Store(end)
	}
	return n
}

// Waking a sleeping owner. A worker runner that sleeps while idle (in
// poll(2) on its sockets) would leave handed-off packets waiting for its
// timeout and let the ring overflow. The handshake is Dekker's, as for
// the inject ring: the runner calls SetSleeping(true) and then checks
// HandoffPending before it sleeps; a producer publishes into the ring and
// then, once per poll, loads sleeping and calls the owner's wake function.

// SetWake gives worker q a function that wakes it from its idle sleep
// (the daemon writes an eventfd). Call it before the workers start.
func (e *Engine) SetWake(q int, fn func()) { e.workers[q].wake = fn }

// SetSleeping says the runner is about to sleep (true) or has woken.
func (w *Worker) SetSleeping(on bool) { w.sleeping.Store(on) }

// HandoffPending reports whether other workers handed this one packets it
// has not routed yet.
func (w *Worker) HandoffPending() bool {
	for _, o := range w.e.workers {
		if o != w && o.hand != nil {
			if r := o.hand[w.q]; r.head.Load() != r.tail.Load() {
				return true
			}
		}
	}
	return false
}

// wakeHanded wakes the sleeping workers this poll handed packets to.
func (w *Worker) wakeHanded() {
	for j, on := range w.handed {
		if !on {
			continue
		}
		w.handed[j] = false
		if t := w.e.workers[j]; t.wake != nil && t.sleeping.Load() {
			t.wake()
		}
	}
}

// Releasing a client. When a VPN client leaves, its pool address may go
// to the next client at once: its NAT sessions and port blocks must end
// first, or the newcomer's flows would continue the old mappings and be
// logged under the old holder's blocks. The control plane asks every
// worker (each owns its own clients) and waits until all have done it.

// natRelease is a worker's queue of inside addresses to release, filled
// by the control plane, taken once a poll.
type natRelease struct {
	mu      sync.Mutex
	addrs   []uint32
	gen     uint64 // requests queued (under mu)
	pending atomic.Bool
	done    atomic.Uint64 // requests carried out
}

// ReleaseNATClient ends the NAT sessions and returns the port blocks of
// inside address a (a departing client's pool address) on every worker,
// from each one's next poll (an idle one is woken). done reports whether
// all have; call it before giving a to another client.
func (e *Engine) ReleaseNATClient(a netip.Addr) (done func() bool) {
	if !a.Is4() || e.nat.Load() == nil {
		return func() bool { return true }
	}
	b := a.As4()
	v := binary.BigEndian.Uint32(b[:])
	gens := make([]uint64, len(e.workers))
	for i, w := range e.workers {
		r := &w.natRel
		r.mu.Lock()
		r.addrs = append(r.addrs, v)
		r.gen++
		gens[i] = r.gen
		r.pending.Store(true)
		r.mu.Unlock()
		if w.wake != nil && w.sleeping.Load() {
			w.wake()
		}
	}
	return func() bool {
		for i, w := range e.workers {
			if w.natRel.done.Load() < gens[i] {
				return false
			}
		}
		return true
	}
}

// releaseNATClients carries out the releases queued for this worker.
func (w *Worker) releaseNATClients() {
	r := &w.natRel
	r.mu.Lock()
	addrs, gen := r.addrs, r.gen
	r.addrs = nil
	r.pending.Store(false)
	r.mu.Unlock()
	w.nat.ReleaseClients(addrs)
	r.done.Store(gen)
}

// tunnelSource reports whether p's IPv4 source routes into the tunnel (a
// VPN client's pool address or iroute).
func (w *Worker) tunnelSource(t *tables, p *Packet) bool {
	ai, ok := t.v4.Lookup([4]byte(ip4Hdr(p)[12:16]))
	return ok && t.adj[ai].kind == adjTunnel
}
