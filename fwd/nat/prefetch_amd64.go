package nat

// prefetchSlot issues PREFETCHT0 on the line at p: the load starts and the
// caller goes on without waiting for it, unlike a plain load, which holds
// the CPU's reorder window until it completes.
//
//go:noescape
func prefetchSlot(p *uint64)

// touchSessions is Touch for the session probes in hs: each one's id + 1
// (0: none), found by its hash tag in the index idx (whose length is
// mask+1), replaces it (kind kept, probeDone set), and the line of the
// record it names in sess is prefetched; it returns how many map probes
// it left for the caller. One call and one loop for a batch (in Go it was
// twice the instructions, and a second pass for the prefetches).
// touchSessionsGo is its definition.
//
//go:noescape
func touchSessions(idx []uint64, mask uint32, sess []session, hs []uint64) (maps int)

// PrefetchIPv4 is t.PrefetchIP(h) (its definition) with the common
// packet's path, the first rule's sources, in one assembly call: the hash
// and the index slot's prefetch without PrefetchIP's frame, the slot's
// bounds check and prefetchSlot's call. Any other packet with an
// option-less header goes on to prefetchRest.
//
//go:noescape
func PrefetchIPv4(t *Table, h *[PrefetchLen]byte) uint64
