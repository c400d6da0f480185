//go:build linux

package fullsim

import (
	"errors"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovfwd/ovfwd/fwd"
)

// wireRig is a model port whose wire is one end of a datagram socketpair;
// the test holds the other end (peer), standing in for the interface.
type wireRig struct {
	port fwd.Port
	dev  *Device
	wire *Wire
	peer int
}

func newWireRig(t *testing.T, queues int) *wireRig {
	t.Helper()
	p, dev, err := NewPort("w", testMAC, 1500, queues)
	if err != nil {
		t.Fatal(err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	if err := unix.SetsockoptTimeval(fds[1], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	w, err := plugWire(dev, "socketpair", os.NewFile(uintptr(fds[0]), "wire"), queues)
	if err != nil {
		t.Fatal(err)
	}
	r := &wireRig{port: p, dev: dev, wire: w, peer: fds[1]}
	t.Cleanup(func() {
		err := w.Close()
		unix.Close(fds[1])
		if err := dev.Err(); err != nil {
			t.Error(err)
		}
		if err := errors.Join(err, p.Close()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return r
}

// TestWireRingFullAndClose: when the interface side stops taking frames,
// the transmit ring fills and further frames are dropped and counted
// instead of stalling the worker; Close returns even with the writer
// waiting, and frames sent after it are counted too.
func TestWireRingFullAndClose(t *testing.T) {
	r := newWireRig(t, 1)
	f := udpFrame(rand.New(rand.NewPCG(3, 4)), 128, 1)
	const n = wireRingSlots + 1000
	for range n {
		r.wire.transmit(f) // the peer never reads: its queue fills, then the ring
	}
	// The writer moves what the socket takes (its buffer), then waits.
	var queued uint64
	var st WireStats
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		r.wire.mu.Lock()
		queued = r.wire.tail - r.wire.head
		r.wire.mu.Unlock()
		if st = r.wire.Stats(); st.TxFrames+st.TxDropped+queued == n {
			break
		}
	}
	if st.TxDropped == 0 || queued > wireRingSlots || st.TxFrames+st.TxDropped+queued != n {
		t.Fatalf("%d frames into a stuck wire: %d queued, %+v", n, queued, st)
	}
	done := make(chan error, 1)
	go func() { done <- r.wire.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs while the writer waits for the socket")
	}
	before := r.wire.Stats().TxDropped
	r.wire.transmit(f)
	if after := r.wire.Stats().TxDropped; after != before+1 {
		t.Fatalf("frame after Close: dropped count %d → %d", before, after)
	}
}
