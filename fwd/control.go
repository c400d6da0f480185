package fwd

import (
	"cmp"
	"net/netip"
	"slices"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	EventNeighbourLearned EventKind = iota + 1 // a neighbour resolved or changed MAC
	EventNeighbourExpired                      // a learned neighbour timed out
)

// Event tells the control plane (which mirrors neighbours into the kernel)
// what the data plane learned. It is a value: a neighbour storm makes
// thousands a second, and none of them may cost an allocation.
type Event struct {
	Kind EventKind
	Port int
	Addr netip.Addr
	MAC  [6]byte
	// Confirmed (EventNeighbourLearned): the address answered our
	// question. An unconfirmed entry (made from a request or solicitation
	// to us) is anyone's claim: forwarding asks before it trusts one, and
	// a mirror should not make it permanent. An entry's confirmation is
	// reported as another EventNeighbourLearned.
	Confirmed bool
}

// maxEvents bounds the event queue; older events are kept, newer counted
// as dropped, until Events drains it.
const maxEvents = 4096

// learnMsg is what a worker sends the control plane about a neighbour it
// heard from and has no entry for (or whose MAC changed).
type learnMsg struct {
	port      uint16
	is4       bool
	moved     bool // the worker already stored a changed MAC in the entry
	confirmed bool // an answer to our question
	addr      [16]byte
	mac       [6]byte
}

// puntSlot holds a copy of a frame the data plane hands to the control
// plane (traffic for the appliance it does not answer itself).
type puntSlot struct {
	port uint16
	n    uint16
	data [2048]byte
}

// Service is the control plane's periodic step (call it every ~50-100 ms):
// it applies what the workers learned, expires
// neighbours and publishes the new neighbour table.
func (e *Engine) Service() {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.cfg.Now()
	reach := int64(e.limits.Load().NeighReachable)
	resync := false
	for _, w := range e.workers {
		if w.learnLost.Load() {
			w.learnLost.Store(false)
			resync = true
		}
		w.learn.drain(func(m *learnMsg) {
			k := neighKey{port: m.port, addr: m.addr}
			mac := packMAC(m.mac[:])
			n := e.neighs[k]
			switch {
			case n != nil && n.static:
				return
			case n == nil:
				// An unconfirmed newcomer may only take an unconfirmed
				// entry's place: a flood of requests from made-up
				// sources must not push out the neighbours that answered.
				if len(e.neighs) >= e.cfg.NeighTable && !e.makeRoom(!m.confirmed) {
					e.neighFull++
					return
				}
				n = &neighbour{port: m.port, addr: m.addr, is4: m.is4}
				n.confirmed.Store(m.confirmed)
				// Complete before the workers can see it.
				n.expires.Store(now + reach)
				n.mac.Store(mac)
				e.putNeigh(k, n)
			case !m.moved && n.mac.Load() != mac && n.confirmed.Load() && !m.confirmed:
				return // made meanwhile from an answer; a request does not move it
			}
			n.expires.Store(now + reach)
			if m.confirmed {
				n.confirmed.Store(true)
			}
			n.mac.Store(mac)
			e.event(EventNeighbourLearned, n, mac)
		})
	}
	for k, n := range e.neighs {
		if resync && !n.static {
			if mac := n.mac.Load(); mac != n.reported {
				e.event(EventNeighbourLearned, n, mac)
			}
		}
		if !n.static && n.expires.Load() < now {
			e.dropNeigh(k)
			e.event(EventNeighbourExpired, n, n.mac.Load())
		}
	}
}

// putNeigh adds or replaces the entry for k, in e.neighs and in the
// workers' table; dropNeigh removes it. Caller holds e.mu.
func (e *Engine) putNeigh(k neighKey, n *neighbour) {
	e.neighs[k] = n
	if !e.neigh.Load().put(n) {
		e.neigh.Store(buildNeighTable(e.neighs))
	}
	e.neighGen.Add(1)
}

func (e *Engine) dropNeigh(k neighKey) {
	if n, ok := e.neighs[k]; ok {
		delete(e.neighs, k)
		e.neigh.Load().remove(n)
		e.neighGen.Add(1)
	}
}

// makeRoom evicts a batch of entries from a full neighbour table:
// unconfirmed ones first, then (unless onlyUnconfirmed) the confirmed
// ones nearest to expiry; static entries never. A batch (1/64 of the
// table) keeps a flood of new entries from costing a sweep each. It
// reports whether anything went.
func (e *Engine) makeRoom(onlyUnconfirmed bool) bool {
	victims := e.victims[:0] // kept: a flood calls this every few entries
	for _, n := range e.neighs {
		if !n.static && !(onlyUnconfirmed && n.confirmed.Load()) {
			victims = append(victims, n)
		}
	}
	e.victims = victims
	if len(victims) == 0 {
		return false
	}
	defer clear(victims) // no evicted entry stays reachable from here
	slices.SortFunc(victims, func(a, b *neighbour) int {
		if ac, bc := a.confirmed.Load(), b.confirmed.Load(); ac != bc {
			if ac {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.expires.Load(), b.expires.Load())
	})
	for _, n := range victims[:max(1, min(len(victims), e.cfg.NeighTable/64))] {
		e.dropNeigh(neighKey{port: n.port, addr: n.addr})
		e.neighEvicted++
		e.event(EventNeighbourExpired, n, n.mac.Load())
	}
	return true
}

func (e *Engine) event(kind EventKind, n *neighbour, mac uint64) {
	if len(e.events) >= maxEvents {
		e.evDrops++
		return
	}
	if kind == EventNeighbourLearned {
		n.reported = mac
	}
	ev := Event{Kind: kind, Port: int(n.port), Confirmed: n.confirmed.Load()}
	unpackMAC(mac, ev.MAC[:])
	ev.Addr = netip.AddrFrom16(n.addr)
	if n.is4 {
		ev.Addr = ev.Addr.Unmap()
	}
	e.events = append(e.events, ev)
}

// Events removes and returns the queued events, appended to dst.
func (e *Engine) Events(dst []Event) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	dst = append(dst, e.events...)
	e.events = e.events[:0]
	return dst
}

// Punts calls fn with every frame the workers punted since the last call
// (the frame is only valid during the call) and returns how many.
func (e *Engine) Punts(fn func(port int, frame []byte)) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, w := range e.workers {
		n += w.punts.drain(func(s *puntSlot) { fn(int(s.port), s.data[:s.n]) })
	}
	return n
}

// NeighbourCount is how many neighbour entries there are (status asks it
// every snapshot; Neighbours would copy them all to count them).
func (e *Engine) NeighbourCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.neighs)
}

// Neighbours lists the current neighbour entries (for status and tests).
func (e *Engine) Neighbours() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Event
	for _, n := range e.neighs {
		ev := Event{Kind: EventNeighbourLearned, Port: int(n.port), Confirmed: n.confirmed.Load()}
		unpackMAC(n.mac.Load(), ev.MAC[:])
		ev.Addr = netip.AddrFrom16(n.addr)
		if n.is4 {
			ev.Addr = ev.Addr.Unmap()
		}
		out = append(out, ev)
	}
	return out
}
