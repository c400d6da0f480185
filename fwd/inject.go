package fwd

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Exception path: on a port ovfwd owns outright (VFIO) the kernel never
// sees the wire, so the host's own traffic goes through the control plane.
// Frames for the host come out of Engine.Punts; frames from the host go in
// through Engine.Inject, a bounded ring that worker 0 (which owns queue 0
// of every port) drains once per poll into buffers of the egress port.

// injectSlots bounds the inject ring: a host burst beyond it is refused
// (ErrInjectFull) and counted rather than queued without limit. An
// uplink's TCP receive burst overflowed 256 slots (2 MiB now).
const injectSlots = 1024

// ErrInjectFull is returned by Inject when worker 0 has not yet drained
// the frames injected before.
var ErrInjectFull = errors.New("fwd: inject ring full")

// injectQueue carries frames from the control plane to worker 0. Many
// control goroutines may inject, so producers serialise on mu; worker 0 is
// the single consumer and takes no lock.
type injectQueue struct {
	mu   sync.Mutex
	ring *spscRing[puntSlot]

	refused atomic.Uint64 // Inject found the ring full
	noBuf   atomic.Uint64 // worker 0 found no buffer (counted as DropTxFull too)
	sent    atomic.Uint64 // handed to the port's Tx
}

func newInjectQueue() *injectQueue {
	return &injectQueue{ring: newSPSCRing[puntSlot](injectSlots)}
}

// Inject queues an Ethernet frame (the host's ARP, ND, replies) to be sent
// out of port by worker 0 on its next poll. The frame is copied; it must
// fit the port's MTU. It never blocks: a full ring returns ErrInjectFull.
func (e *Engine) Inject(port int, frame []byte) error {
	if err := e.checkPort(port); err != nil {
		return err
	}
	mtu := e.tables.Load().ports[port].mtu
	if len(frame) < ethHdrLen || len(frame) > ethHdrLen+vlanTagLen+mtu || len(frame) > len(puntSlot{}.data) {
		return fmt.Errorf("fwd: inject on port %d: bad frame length %d (MTU %d)", port, len(frame), mtu)
	}
	return e.workers[0].inject.put(uint16(port), frame)
}

// put copies data into the next slot, tagged port, or refuses and counts
// when the ring is full.
func (iq *injectQueue) put(port uint16, data []byte) error {
	iq.mu.Lock()
	defer iq.mu.Unlock()
	s := iq.ring.slot()
	if s == nil {
		iq.refused.Add(1)
		return ErrInjectFull
	}
	s.port, s.n = port, uint16(copy(s.data[:], data))
	iq.ring.publish()
	return nil
}

// InjectStats says what became of injected frames: sent to a port's Tx,
// refused by Inject (ring full), dropped by worker 0 for lack of a buffer.
type InjectStats struct {
	Sent, Refused, NoBuffer uint64
}

// InjectStats reports the inject path's counters.
func (e *Engine) InjectStats() InjectStats {
	iq := e.workers[0].inject
	return InjectStats{Sent: iq.sent.Load(), Refused: iq.refused.Load(), NoBuffer: iq.noBuf.Load()}
}

// SetHostCopies makes the engine punt a copy of every ARP and neighbour
// discovery packet received on port (it still answers and learns from
// them itself), so a host stack behind an exception TAP learns its
// neighbours and sees answers to its own solicitations. Off by default.
func (e *Engine) SetHostCopies(port int, on bool) error {
	if err := e.checkPort(port); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.update(func(t *tables) error {
		t.ports[port].hostCopies = on
		return nil
	})
}

// drainInject sends what the control plane injected (and routes what it
// injected with InjectIP and InjectReceived) and returns how many it
// took; worker 0 only.
func (w *Worker) drainInject(t *tables) int {
	iq := w.inject
	r := iq.ring
	h, end := r.head.Load(), r.tail.Load()
	if h == end {
		return 0
	}
	sent := uint64(0)
	for i := h; i < end; i++ {
		s := &r.slots[i&r.mask]
		if s.port == injectRoute || s.port == injectReceived {
			if w.routeInjected(t, s) {
				sent++
			} else {
				iq.noBuf.Add(1)
				w.cnt[cDrops+int(DropTxFull)]++
			}
			continue
		}
		p := w.alloc(int(s.port))
		if p == nil || int(p.Off)+int(s.n) > len(p.Buf) {
			if p != nil {
				w.release(p)
			}
			iq.noBuf.Add(1)
			w.cnt[cDrops+int(DropTxFull)]++
			continue
		}
		p.Len = uint16(copy(p.Buf[p.Off:], s.data[:s.n]))
		sent++
		w.send(p, int(s.port))
	}
	r.head.Store(end)
	iq.sent.Add(sent)
	return int(end - h)
}

// puntCopy puts a copy of p on the punt ring and leaves p to the caller.
func (w *Worker) puntCopy(p *Packet) {
	s := w.punts.slot()
	if s == nil || int(p.Len) > len(s.data) {
		w.cnt[cDrops+int(DropPuntFull)]++
		return
	}
	s.port, s.n = p.InPort, uint16(copy(s.data[:], p.Data()))
	w.punts.publish()
	w.cnt[cPunts]++
}

// InjectPending reports whether the control plane has injected frames or
// packets worker 0 has not drained yet (false on other workers). A worker
// runner that sleeps between polls checks it after announcing that it is
// about to sleep, so an inject racing with the sleep is not left waiting.
func (w *Worker) InjectPending() bool {
	return w.inject != nil && w.inject.ring.head.Load() != w.inject.ring.tail.Load()
}
