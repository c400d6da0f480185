package nat

// prefetchSlot issues PREFETCHT0 on the line at p: the load starts and the
// caller goes on without waiting for it, unlike a plain load, which holds
// the CPU's reorder window until it completes.
//
//go:noescape
func prefetchSlot(p *uint64)

// prefetchSessions issues PREFETCHT0 on the record of every session probe
// Touch resolved in hs (kind probeSess, id+1 in the low 32 bits, at most
// n): one call for a batch instead of one per packet.
//
//go:noescape
func prefetchSessions(base *session, hs []uint64, n int)
