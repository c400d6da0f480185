package dp

// prefetchDescs prefetches, in one call, the packets of n consecutive
// decoded descriptors from d: PREFETCHT0 on their header lines (the second
// only where oneLine, indexed by the CQE's l4_l3_hdr_type, is 0) and
// PREFETCHW on their shinfo lines, so a packet not touched yet is in L1
// (its shinfo line owned for write) when the loop reaches it; then
// PREFETCHW on the shinfo lines of the m descriptors after those. One call
// for a group of packets: a call clobbers every register the loop holds.
// The WQE record is not among the targets: the poll touches it when it
// decodes the CQE.
//
//go:noescape
func prefetchDescs(d *rxDesc, n int, headroom uintptr, oneLine *[256]uint8, m int)

// prefetchLines issues PREFETCHT0 on n consecutive lines from p (the CQE
// lines of a burst).
//
//go:noescape
func prefetchLines(p uintptr, n int)

const havePrefetch = true

// prefetchDescsL2 issues PREFETCHT1 on the lines prefetchDescs would
// prefetch for the n descriptors from d (header lines, shinfo line).
//
//go:noescape
func prefetchDescsL2(d *rxDesc, n int, headroom uintptr, oneLine *[256]uint8)
