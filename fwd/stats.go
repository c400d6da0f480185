package fwd

import "sync/atomic"

// PortStats counts one port's traffic as the engine saw it.
type PortStats struct {
	RxPackets, RxBytes, TxPackets, TxBytes uint64
}

// Stats sums the counters of every worker.
type Stats struct {
	Ports         []PortStats
	Drops         [NumDropReasons]uint64
	Copies        uint64 // packets copied because ingress and egress pools differ
	ICMPSent      uint64 // ICMP/ICMPv6 errors generated
	ICMPLimited   uint64 // ICMP errors suppressed by the rate limit
	Solicits      uint64 // ARP requests and neighbour solicitations sent
	Replies       uint64 // ARP replies, neighbour adverts and echo replies sent
	Punts         uint64 // frames handed to the control plane
	Uplinked      uint64 // IP packets handed to site-to-site uplinks
	Handoffs      uint64 // NAT'd packets copied to the worker owning their flow
	Floods        uint64 // bridge frames flooded
	Clamped       uint64 // TCP SYNs whose MSS was lowered
	Fragmented    uint64 // IPv4 datagrams, and IPv6 packets of our own, split to fit the egress MTU
	HostFragments uint64 // IP fragments for our addresses, handed to the host stack to reassemble
	CsumPartial   uint64 // forwarded or punted TCP/UDP whose unfinished checksum (pseudo-header sum only) was completed
	LearnDropped  uint64 // neighbour learn messages lost to a full ring
	// NeighRefused counts ARP/ND messages that claimed a different MAC for
	// a confirmed neighbour (not applied); NeighUnsolicited adverts and
	// replies for addresses nobody asked about (no entry made);
	// NeighTableFull neighbours not added for lack of room
	// (Config.NeighTable); NeighEvicted entries removed to make room.
	NeighRefused     uint64
	NeighUnsolicited uint64
	NeighTableFull   uint64
	NeighEvicted     uint64
	MACTableFull     uint64 // bridge MACs not learned for lack of a slot
	EventsDropped    uint64
}

// Counter layout: workers keep plain uint64 counters (no atomics per
// packet) and copy them into atomics once per poll for Stats to read.
const (
	cDrops  = 0
	cCopies = int(NumDropReasons) + iota - 1
	cICMPSent
	cICMPLimited
	cSolicits
	cReplies
	cPunts
	cFloods
	cClamped
	cLearnDropped
	cMACTableFull
	cFragments
	cUplinked
	cHostFragments
	cCsumPartial
	cHandoffs
	cNeighRefused
	cNeighUnsolicited
	cPorts // then 4 per port: rx packets, rx bytes, tx packets, tx bytes
)

func (w *Worker) publishCounters() {
	for i, v := range w.cnt {
		if w.pub[i].Load() != v {
			w.pub[i].Store(v)
		}
	}
}

// Stats sums the per-worker counters as of each worker's last poll.
func (e *Engine) Stats() Stats {
	s := Stats{Ports: make([]PortStats, len(e.ports))}
	for _, w := range e.workers {
		get := func(i int) uint64 { return w.pub[i].Load() }
		for r := range NumDropReasons {
			s.Drops[r] += get(cDrops + int(r))
		}
		s.Copies += get(cCopies)
		s.ICMPSent += get(cICMPSent)
		s.ICMPLimited += get(cICMPLimited)
		s.Solicits += get(cSolicits)
		s.Replies += get(cReplies)
		s.Punts += get(cPunts)
		s.Floods += get(cFloods)
		s.Clamped += get(cClamped)
		s.LearnDropped += get(cLearnDropped)
		s.MACTableFull += get(cMACTableFull)
		s.Fragmented += get(cFragments)
		s.Uplinked += get(cUplinked)
		s.HostFragments += get(cHostFragments)
		s.CsumPartial += get(cCsumPartial)
		s.Handoffs += get(cHandoffs)
		s.NeighRefused += get(cNeighRefused)
		s.NeighUnsolicited += get(cNeighUnsolicited)
		for p := range s.Ports {
			b := cPorts + 4*p
			s.Ports[p].RxPackets += get(b)
			s.Ports[p].RxBytes += get(b + 1)
			s.Ports[p].TxPackets += get(b + 2)
			s.Ports[p].TxBytes += get(b + 3)
		}
	}
	e.mu.Lock()
	s.EventsDropped = e.evDrops
	s.NeighTableFull, s.NeighEvicted = e.neighFull, e.neighEvicted
	e.mu.Unlock()
	return s
}

type pubCounters = []atomic.Uint64
