package fwd

// FIB lookups for a whole received batch. With a large FIB a route lookup
// is a chain of cache misses; doing the batch's lookups together in one
// lpm LookupBatch call per family overlaps those misses (memory-level
// parallelism) instead of paying them one packet at a time.
//
// routeFrame does everything up to the lookup and parks the packet in
// w.fib; once the received batch has been through routeFrame,
// routePending looks up every parked destination and finishes the packets
// in arrival order. Packets that routeFrame consumes (drops, ARP, ND,
// punts) are done before the parked ones, which only reorders packets of
// different kinds, never two routed packets.

// fibBatch is a worker's scratch for routePending: fixed arrays, so
// parking a packet is a few stores at known offsets and never allocates.
// A packet's index among its family's parked ones is its lookup lane:
// routePending counts them again in arrival order.
type fibBatch struct {
	n, n4, n6 int  // parked packets, of them IPv4, IPv6
	max       int  // the worker's batch size: routeFrame routes at once beyond it (0: always)
	busy      bool // routePending is forwarding: the arrays are being read
	// how the parked packets came (rParsed: a port's received batch;
	// runDecap and runEncap park theirs with their own and put it back).
	how uint8

	pend [MaxBatch]*Packet // parked packets, in arrival order

	dst4 [MaxBatch][4]byte
	val4 [MaxBatch]uint32
	ok4  [MaxBatch]bool
	dst6 [MaxBatch][16]byte
	val6 [MaxBatch]uint32
	ok6  [MaxBatch]bool

	natSlot [MaxBatch]uint64 // NAT's hints for pend (nat.go): nat.Table.Prefetch's, then Touch's
}

// routePending looks up every parked packet's destination, one LookupBatch
// call per family, and forwards the packets in the order they arrived.
func (w *Worker) routePending(t *tables) {
	f := &w.fib
	n, n4, n6, how := f.n, f.n4, f.n6, f.how
	f.n, f.n4, f.n6 = 0, 0, 0
	f.busy = true
	if n4 > 0 {
		t.v4.LookupBatch(f.dst4[:n4], f.val4[:n4], f.ok4[:n4])
	}
	if n6 > 0 {
		t.v6.LookupBatch(f.dst6[:n6], f.val6[:n6], f.ok6[:n6])
	}
	if w.nat.Active() {
		w.forwardPendingNAT(t, n, how)
		f.busy = false
		return
	}
	j4, j6 := 0, 0
	for _, p := range f.pend[:n] {
		if p.Flags&FlagIPv4 != 0 {
			w.forwardIP(t, p, 0, how, f.val4[j4&(MaxBatch-1)], f.ok4[j4&(MaxBatch-1)])
			j4++
		} else {
			w.forwardIP(t, p, 0, how, f.val6[j6&(MaxBatch-1)], f.ok6[j6&(MaxBatch-1)])
			j6++
		}
	}
	f.busy = false
}
