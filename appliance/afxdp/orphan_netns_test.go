package afxdp

import (
	"errors"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// asavie's Socket.Close (also run inside a failed NewSocket) leaves its
// four ring mappings, which keep the socket alive and bound. After a bind
// that fails with EBUSY and after Close, no ring mapping of a closed
// socket may remain, and the queue binds again at once.
func TestNoOrphanRingMappings(t *testing.T) {
	tp := newTopo(t, 1)
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
