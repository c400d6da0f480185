package dpsim

// flushRange runs CLFLUSHOPT on every cache line of [p, p+n) and then SFENCE,
// so the lines are out of every cache level before the driver runs.
//
//go:noescape
func flushRange(p, n uintptr)

// ntCopy copies n bytes (a multiple of 8) from src to dst with
// non-temporal stores, then SFENCE.
//
//go:noescape
func ntCopy(dst, src, n uintptr)

// fence orders earlier flushes before later loads (MFENCE).
func fence()

const canFlush = true
