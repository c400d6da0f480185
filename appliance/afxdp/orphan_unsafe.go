package afxdp

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// unmapOrphanRings unmaps AF_XDP ring mappings whose socket is no longer
// open in this process.
//
// Workaround for an asavie/xdp v0.3.3 defect found while porting:
// xdp.NewSocket maps the four rings but keeps only slices into them, and
// Socket.Close — which NewSocket also calls when a later step such as bind
// fails — closes the fd without munmap. Each mapping holds a reference to
// the socket's file, so the socket outlives Close: a closed socket stays
// bound to its queue until the process exits (every later bind of that
// queue fails with EBUSY for good: TestBindRetryWhileHeld did, before this),
// and each failed bind of the EBUSY retry loop leaves a socket with its
// pinned UMEM behind. asavie exposes neither the mappings nor the socket of
// a failed NewSocket, so they are found in /proc/self/maps: mappings of a
// "socket:[inode]" at one of the four AF_XDP ring page offsets whose inode
// is not among the process's open fds.
//
// Invariant: nothing in the process uses a ring of a socket whose fd is
// closed. asavie's Close zeroes its ring slices, this package unmaps its
// own second mappings before closing (queue.close), and any other code
// reading a ring after closing its socket would already be reading a dead
// queue. Control plane only: called under socketFlagsMu after a failed
// NewSocket and after closing a socket; it reads two /proc files and
// allocates.
func unmapOrphanRings() {
	open := openSocketInodes()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	type span struct{ start, end uintptr }
	var orphans []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "socket:[") {
			continue
		}
		off, err := strconv.ParseUint(fields[2], 16, 64)
		if err != nil || !isXSKRingOffset(off) {
			continue
		}
		if open[fields[5]] {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		orphans = append(orphans, span{uintptr(start), uintptr(end)})
	}
	f.Close()
	for _, s := range orphans {
		_, _, _ = unix.Syscall(unix.SYS_MUNMAP, s.start, s.end-s.start, 0)
	}
}

func isXSKRingOffset(off uint64) bool {
	switch off {
	case unix.XDP_PGOFF_RX_RING, unix.XDP_PGOFF_TX_RING, unix.XDP_UMEM_PGOFF_FILL_RING, unix.XDP_UMEM_PGOFF_COMPLETION_RING:
		return true
	}
	return false
}

// openSocketInodes is the set of "socket:[inode]" names of the process's
// open fds.
func openSocketInodes() map[string]bool {
	set := map[string]bool{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return set
	}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
			set[l] = true
		}
	}
	return set
}

// orphanRingCount is how many AF_XDP ring mappings of closed sockets the
// process holds (for tests).
func orphanRingCount() int {
	open := openSocketInodes()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return -1
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		fields := strings.Fields(l)
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "socket:[") || open[fields[5]] {
			continue
		}
		if off, err := strconv.ParseUint(fields[2], 16, 64); err == nil && isXSKRingOffset(off) {
			n++
		}
	}
	return n
}
