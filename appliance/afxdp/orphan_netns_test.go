package afxdp

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A ring mapping left after its socket's fd is closed keeps the socket
// alive and bound, holding the queue. After a bind that fails with EBUSY
// and after Close, no ring mapping of a closed socket may remain, and the
// queue binds again at once.
func TestNoOrphanRingMappings(t *testing.T) {
	tp := newTopo(t, 1)
	ifindex, holder := holdQueue(t, tp)
	if n := orphanRingCount(); n != 0 {
		t.Fatalf("%d orphan ring mappings before the test", n)
	}
	for range 3 {
		err := tp.app.Do(func() error {
			qu, err := tryOpenSocket(ifindex, 0, defaultRings, unix.XDP_COPY)
			if err == nil {
				qu.close()
			}
			return err
		})
		if !errors.Is(err, unix.EBUSY) {
			holder.close()
			t.Fatalf("bind while held: %v, want EBUSY", err)
		}
	}
	if n := orphanRingCount(); n != 0 {
		t.Errorf("%d ring mappings of closed sockets after 3 failed binds, want 0", n)
	}
	holder.close()
	if n := orphanRingCount(); n != 0 {
		t.Errorf("%d ring mappings of closed sockets after close, want 0", n)
	}
	// Closed for real, the queue binds again (the kernel may still take a
	// moment to release the pool: the bounded retry covers it).
	if err := tp.app.Do(func() error {
		qu, err := openSocketFlags(ifindex, 0, defaultRings, unix.XDP_COPY)
		if err == nil {
			qu.close()
		}
		return err
	}); err != nil {
		t.Fatalf("rebind after close: %v", err)
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

// holdQueue binds a copy-mode socket to queue 0 of the topology's h8a1
// (in app) and returns the device's index and the socket.
func holdQueue(t *testing.T, tp *topo) (int, *queue) {
	t.Helper()
	var ifindex int
	var holder *queue
	if err := tp.app.Do(func() error {
		ifi, err := net.InterfaceByName("h8a1")
		if err != nil {
			return err
		}
		ifindex = ifi.Index
		holder, err = tryOpenSocket(ifindex, 0, defaultRings, unix.XDP_COPY)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ifindex, holder
}
