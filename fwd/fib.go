package fwd

import "encoding/binary"

// FIB lookups for a whole received batch. With a large FIB a route lookup
// is a chain of cache misses; doing the batch's lookups together in one
// lpm LookupBatch call per family overlaps those misses (memory-level
// parallelism) instead of paying them one packet at a time.
//
// routeFrame does everything up to the lookup and parks the packet with
// routeLater; once the received batch has been through routeFrame,
// routePending looks up every parked destination and finishes the packets
// in arrival order. Packets that routeFrame consumes (drops, ARP, ND,
// punts) are done before the parked ones, which only reorders packets of
// different kinds, never two routed packets.

// fibBatch is a worker's scratch for routePending, sized once to the
// batch size so that parking and looking up never allocate.
type fibBatch struct {
	pend []*Packet // parked packets, in arrival order
	slot []uint16  // pend[i]'s index into the v4 or v6 arrays

	dst4 [][4]byte
	val4 []uint32
	ok4  []bool
	dst6 [][16]byte
	val6 []uint32
	ok6  []bool

	natSlot []uint64 // NAT hints of pend: nat.Table.Prefetch, then Touch

	// single makes routeLater route at once with one Lookup per packet
	// (the unbatched path), for comparison in benchmarks.
	single bool
}

func newFIBBatch(n int) fibBatch {
	return fibBatch{
		pend: make([]*Packet, 0, n), slot: make([]uint16, 0, n),
		dst4: make([][4]byte, 0, n), val4: make([]uint32, n), ok4: make([]bool, n),
		dst6: make([][16]byte, 0, n), val6: make([]uint32, n), ok6: make([]bool, n),
		natSlot: make([]uint64, n),
	}
}

// routeLater parks a parsed IP packet received from a port (how = 0) until
// routePending. p must stay valid until then: it points into w.rx.
func (w *Worker) routeLater(t *tables, p *Packet) {
	f := &w.fib
	if f.single || len(f.pend) == cap(f.pend) {
		w.routeIP(t, p, rParsed)
		return
	}
	var h uint64
	if p.Flags&FlagIPv4 != 0 {
		f.slot = append(f.slot, uint16(len(f.dst4)))
		f.dst4 = append(f.dst4, [4]byte(ip4Hdr(p)[16:20]))
		if w.nat.Active() && p.Flags&(FlagTCP|FlagUDP) != 0 {
			// Parsed: the IP header and the ports are there (L4Off set).
			// NAT's index line loads while the rest of the batch is parsed.
			x := int(p.Off) + int(p.L4Off)
			h = w.nat.PrefetchIP(ip4Hdr(p), binary.LittleEndian.Uint32(p.Buf[x:x+4:x+4]))
		}
	} else {
		f.slot = append(f.slot, uint16(len(f.dst6)))
		f.dst6 = append(f.dst6, [16]byte(ip6Hdr(p)[24:40]))
	}
	f.natSlot[len(f.pend)] = h
	f.pend = append(f.pend, p)
}

// routePending looks up every parked packet's destination, two LookupBatch
// calls in all, and forwards the packets in the order they arrived.
func (w *Worker) routePending(t *tables) {
	f := &w.fib
	t.v4.LookupBatch(f.dst4, f.val4, f.ok4)
	t.v6.LookupBatch(f.dst6, f.val6, f.ok6)
	if w.nat.Active() {
		w.nat.Touch(f.natSlot[:len(f.pend)])
	}
	for i, p := range f.pend {
		j := f.slot[i]
		if p.Flags&FlagIPv4 != 0 {
			w.natHint = f.natSlot[i]
			w.forwardIP(t, p, rParsed, f.val4[j], f.ok4[j])
			w.natHint = 0
		} else {
			w.forwardIP(t, p, rParsed, f.val6[j], f.ok6[j])
		}
	}
	f.pend, f.slot, f.dst4, f.dst6 = f.pend[:0], f.slot[:0], f.dst4[:0], f.dst6[:0]
}
