package dp

// prefetchPacket issues, in one call, PREFETCHT0 on the two header lines at
// data and PREFETCHW on the shinfo line, so a packet that has not been
// touched yet is in L1 (and its shinfo line owned for write) when the loop
// reaches it. Prefetches never fault. (The WQE record is no longer among
// them: the poll touches it when it decodes the CQE.)
//
//go:noescape
func prefetchPacket(data, shinfo uintptr)

const havePrefetch = true

// prefetchLine issues PREFETCHT0 on one line (a CQE ahead of the poll).
//
//go:noescape
func prefetchLine(p uintptr)
