package vpn

import (
	"net/netip"
	"sync/atomic"
)

// Rings from the data plane to the control plane. Each worker queue has its
// own ring with exactly one producer (the worker) and one consumer (the
// control plane, serialised by the Tunnel), so head and tail need only
// atomic loads and stores: the producer publishes a slot by storing tail
// after filling it, the consumer frees it by storing head after reading it.

// MaxControlPacket is the largest control-channel datagram the punt ring
// carries (2.6 keeps control packets under tls-mtu 1250 plus wrapping).
const MaxControlPacket = 2048

// ControlPacket is one datagram the data plane handed to the control plane.
type ControlPacket struct {
	From  netip.AddrPort // the client
	To    netip.AddrPort // the appliance address it was sent to
	Queue int            // the worker queue it arrived on
	Data  []byte         // valid until the next ReadControl
}

type puntSlot struct {
	from, to netip.AddrPort
	n        int
	data     [MaxControlPacket]byte
}

type puntRing struct {
	head, tail atomic.Uint32
	slots      []puntSlot
	_          [64]byte // keep the next queue's hot fields off this line
}

func (r *puntRing) init(n int) { r.slots = make([]puntSlot, ceilPow2(n)) }

// put copies data into the ring; false when the ring is full.
func (r *puntRing) put(from, to netip.AddrPort, data []byte) bool {
	t := r.tail.Load()
	if t-r.head.Load() >= uint32(len(r.slots)) {
		return false
	}
	s := &r.slots[t&uint32(len(r.slots)-1)]
	s.from, s.to = from, to
	s.n = copy(s.data[:], data)
	r.tail.Store(t + 1)
	return true
}

// get copies the oldest packet into dst.
func (r *puntRing) get(dst []byte) (n int, from, to netip.AddrPort, ok bool) {
	h := r.head.Load()
	if h == r.tail.Load() {
		return 0, from, to, false
	}
	s := &r.slots[h&uint32(len(r.slots)-1)]
	n = copy(dst, s.data[:s.n])
	from, to = s.from, s.to
	r.head.Store(h + 1)
	return n, from, to, true
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	EventFloat        EventKind = iota + 1 // the peer authenticated from a new address (Addr); it now sends there
	EventKeyWearOut                        // the key reached PacketIDWrapTrigger: renegotiate now
	EventKeyExhausted                      // the key's packet-ids ran out; it no longer sends
	EventExpired                           // nothing authenticated from the peer within its keepalive timeout
	EventPingDue                           // nothing sent to the peer within its keepalive interval: send SealPing
	EventExit                              // the peer sent OCC EXIT (explicit-exit-notify)
)

var eventNames = [...]string{"", "float", "key_wear_out", "key_exhausted", "expired", "ping_due", "exit"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && k != 0 {
		return eventNames[k]
	}
	return "unknown"
}

// Event is a notice from the data plane to the control plane.
type Event struct {
	Kind  EventKind
	Peer  uint32
	KeyID uint8
	Addr  netip.AddrPort // EventFloat: the new remote address
}

type eventRing struct {
	head, tail atomic.Uint32
	slots      []Event
	_          [64]byte
}

func (r *eventRing) init(n int) { r.slots = make([]Event, ceilPow2(n)) }

func (r *eventRing) put(e Event) bool {
	t := r.tail.Load()
	if t-r.head.Load() >= uint32(len(r.slots)) {
		return false
	}
	r.slots[t&uint32(len(r.slots)-1)] = e
	r.tail.Store(t + 1)
	return true
}

func (r *eventRing) get() (Event, bool) {
	h := r.head.Load()
	if h == r.tail.Load() {
		return Event{}, false
	}
	e := r.slots[h&uint32(len(r.slots)-1)]
	r.head.Store(h + 1)
	return e, true
}

func ceilPow2(n int) int {
	if n < 1 {
		n = 1
	}
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
