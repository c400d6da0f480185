package fwd

import (
	"errors"
	"fmt"
)

// Uplinks: site-to-site tunnels where the appliance is the client of
// another server run in the control plane (a kernel UDP socket and the
// client's own keys), not in the workers. A route with an Uplink next hop
// makes the worker copy the routed IP packet onto its bounded uplink ring
// (a full ring drops and counts DropUplinkFull); Engine.Uplinked drains the
// rings. What the uplink decrypts comes back through Engine.InjectIP, the
// inject ring of worker 0, and is routed like a packet out of a tunnel.
//
// The copy is the price of leaving the uplink's crypto and socket in the
// control plane: an uplink is one peer, so it gains nothing from the
// workers' batching, and the server role's data path stays free of
// client-side state.

// MaxUplinkPacket is the largest IP packet an uplink carries; a route's
// UplinkMTU may not exceed it.
const MaxUplinkPacket = len(puntSlot{}.data)

// UplinkRingSlots is each worker's ring of packets for the uplinks
// (4 MiB a worker): a TCP burst routed to an uplink arrives faster than
// the pump, which sleeps between drains, takes it; 512 slots overflowed
// in the site-to-site test.
const UplinkRingSlots = 2048

// Inject slots that hold an IP packet to route, not an Ethernet frame for
// a port: injectRoute as if out of a tunnel (InjectIP), injectReceived as
// if from the wire (InjectReceived).
const (
	injectRoute    = 0xffff
	injectReceived = 0xfffe
)

// ErrUplinkPacket is returned by InjectIP for what is not an IP packet of
// a sane size; the caller counts it.
var ErrUplinkPacket = errors.New("fwd: not an IP packet of 20..2048 bytes")

// toUplink copies p's IP packet onto the worker's uplink ring and frees p.
func (w *Worker) toUplink(p *Packet, a *adjacency) {
	ip := p.Data()[p.L3Off:]
	s := w.uplinks.slot()
	if s == nil || len(ip) > len(s.data) {
		w.drop(p, DropUplinkFull)
		return
	}
	s.port, s.n = uint16(a.peer), uint16(copy(s.data[:], ip))
	w.uplinks.publish()
	w.cnt[cUplinked]++
	w.release(p)
}

// Uplinked calls fn with every IP packet the workers routed to an uplink
// since the last call (ip is only valid during the call) and returns how
// many. One goroutine at a time drains; the engine's lock ensures it.
func (e *Engine) Uplinked(fn func(uplink uint16, ip []byte)) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, w := range e.workers {
		n += w.uplinks.drain(func(s *puntSlot) { fn(s.port, s.data[:s.n]) })
	}
	return n
}

// InjectIP queues an IP packet (an uplink's decrypted traffic) for worker 0
// to route on its next poll, as if it had come out of a tunnel. The packet
// is copied. It never blocks: a full ring returns ErrInjectFull.
func (e *Engine) InjectIP(ip []byte) error {
	if len(ip) < ipv4MinHdrLen || len(ip) > MaxUplinkPacket || ip[0]>>4 != 4 && ip[0]>>4 != 6 {
		return fmt.Errorf("%w (got %d bytes, version %d)", ErrUplinkPacket, len(ip), ipVersion(ip))
	}
	return e.workers[0].inject.put(injectRoute, ip)
}

// InjectReceived queues an IP packet for our own address that the host
// stack reassembled from fragments (a VPN client's full-size datagram) for
// worker 0 to handle as if it had arrived whole from the wire: to the VPN
// port it is decapsulated like any data packet. The packet is copied. It
// never blocks: a full ring returns ErrInjectFull.
func (e *Engine) InjectReceived(ip []byte) error {
	if len(ip) < ipv4MinHdrLen || len(ip) > MaxUplinkPacket || ip[0]>>4 != 4 && ip[0]>>4 != 6 {
		return fmt.Errorf("%w (got %d bytes, version %d)", ErrUplinkPacket, len(ip), ipVersion(ip))
	}
	return e.workers[0].inject.put(injectReceived, ip)
}

func ipVersion(ip []byte) int {
	if len(ip) == 0 {
		return 0
	}
	return int(ip[0] >> 4)
}

// routeInjected routes one injected IP packet (InjectIP, InjectReceived);
// worker 0 only.
func (w *Worker) routeInjected(t *tables, s *puntSlot) bool {
	a := w.alloc(0)
	if a == nil {
		return false
	}
	// Off the scratch batch: sending across pools, or a decap batch run
	// while this packet is routed, reuses it.
	w.tmpInject = *a
	p := &w.tmpInject
	if int(p.Off)+int(s.n) > len(p.Buf) {
		w.release(p)
		return false
	}
	p.Len = uint16(copy(p.Buf[p.Off:], s.data[:s.n]))
	p.Flags = FlagL3Only
	if r := Parse(p); r != DropNone {
		w.drop(p, r)
		return true
	}
	how := uint8(rInner)
	if s.port == injectReceived {
		how = 0
	}
	w.routeIP(t, p, how)
	return true
}
