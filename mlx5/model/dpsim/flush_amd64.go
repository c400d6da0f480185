package dpsim

// flushRange runs CLFLUSHOPT on every cache line of [p, p+n) and then SFENCE,
// so the lines are out of every cache level before the driver runs.
//
//go:noescape
func flushRange(p, n uintptr)

// fence orders earlier flushes before later loads (MFENCE).
func fence()

const canFlush = true
