package nat

// prefetchSlot and prefetchSession issue PREFETCHT0 on the line at p: the
// load starts and the caller goes on without waiting for it, unlike a
// plain load, which holds the CPU's reorder window until it completes.
//
//go:noescape
func prefetchSlot(p *uint64)

//go:noescape
func prefetchSession(p *session)
