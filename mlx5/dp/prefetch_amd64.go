package dp

// prefetchDescs prefetches, in one call, the header lines of the n
// consecutive decoded descriptors from d (PREFETCHT0 on the first data
// line, on the second only where oneLine, indexed by the CQE's
// l4_l3_hdr_type, is 0) and, for write (PREFETCHW), the shinfo lines of the
// m descriptors from d[s] on, so a packet not touched yet is in L1 (its
// shinfo line owned for write) when the loop reaches it. One call for a
// group of packets: a call clobbers every register the loop holds. The WQE
// record is not among the targets: the poll touches it when it decodes the
// CQE.
//
//go:noescape
func prefetchDescs(d *rxDesc, n int, headroom uintptr, oneLine *[256]uint8, s, m int)

// prefetchLines runs PREFETCHT0 on n consecutive lines from p (the CQE
// lines of a burst).
//
//go:noescape
func prefetchLines(p uintptr, n int)

const havePrefetch = true

// prefetchDescsL2 runs PREFETCHT1 on the header lines and the shinfo line
// of the n descriptors from d.
//
//go:noescape
func prefetchDescsL2(d *rxDesc, n int, headroom uintptr, oneLine *[256]uint8)

// cycles reads the time-stamp counter (RDTSC): the adaptive prefetch's
// per-burst clock, a few cycles where time.Now costs a vDSO call.
func cycles() uint64
