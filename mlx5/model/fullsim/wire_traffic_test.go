//go:build linux

package fullsim

// These tests run the wire's reader (which injects into the model) next
// to the test goroutine acting as the driver's worker: the model publishes
// CQE owner words and reads doorbell records atomically, as the driver does,
// so they run under -race too.

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovfwd/ovfwd/fwd"
)

// receive polls every queue until n frames arrived or 5 s passed.
func (r *wireRig) receive(t *testing.T, n int) map[uint32][]byte {
	t.Helper()
	got := map[uint32][]byte{}
	b := fwd.NewBatch(64)
	for deadline := time.Now().Add(5 * time.Second); len(got) < n && time.Now().Before(deadline); {
		for q := 0; q < r.port.Info().Queues; q++ {
			for _, f := range drain(t, r.port, q, b) {
				got[seqOf(f)] = f
			}
			r.port.Free(q, b)
		}
		time.Sleep(time.Millisecond)
	}
	return got
}

// TestWireCarriesFrames: frames written to the interface side arrive on
// the port's queues byte-exact (through the model's filter and RSS), and
// frames the port transmits come out on the interface side byte-exact and
// in order; a frame longer than the vport MTU is dropped and counted.
func TestWireCarriesFrames(t *testing.T) {
	r := newWireRig(t, 2)
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 300
	sent := map[uint32][]byte{}
	for i := range n {
		f := udpFrame(rng, 60+rng.IntN(1514-60+1), uint32(i))
		sent[uint32(i)] = f
		if _, err := unix.Write(r.peer, f); err != nil {
			t.Fatal(err)
		}
		if i%32 == 31 {
			time.Sleep(time.Millisecond) // the unix socket queue is short
		}
	}
	long := udpFrame(rng, 1600, n)
	if _, err := unix.Write(r.peer, long); err != nil {
		t.Fatal(err)
	}
	got := r.receive(t, n)
	if len(got) != n {
		t.Fatalf("port received %d of %d frames; wire %+v, device %+v", len(got), n, r.wire.Stats(), r.dev.Stats)
	}
	for seq, f := range sent {
		if !bytes.Equal(got[seq], f) {
			t.Fatalf("frame %d changed on the way in: %s, got %d bytes", seq, describe(f), len(got[seq]))
		}
	}
	for deadline := time.Now().Add(5 * time.Second); r.wire.Stats().RxTruncated == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if st := r.wire.Stats(); st.RxTruncated != 1 || st.RxFrames != n {
		t.Fatalf("wire stats %+v: want %d frames and 1 truncated", st, n)
	}

	// Back out: the port sends in seq order, the peer reads them in order.
	b := fwd.NewBatch(1)
	buf := make([]byte, 4096)
	for i := range n {
		f := sent[uint32(i)]
		if r.port.Alloc(0, b, 1) != 1 {
			t.Fatal("no spare buffer")
		}
		p := &b.Pkts[0]
		copy(p.Buf[p.Off:], f)
		p.Len = uint16(len(f))
		if r.port.Tx(0, b) != 1 {
			t.Fatal("port did not send")
		}
		m, err := readPeer(r.peer, buf)
		if err != nil {
			t.Fatalf("frame %d not on the interface side: %v (wire %+v)", i, err, r.wire.Stats())
		}
		if !bytes.Equal(buf[:m], f) {
			t.Fatalf("frame %d changed on the way out: %s, got %d bytes", i, describe(f), m)
		}
	}
	// The writer counts a batch after sendmmsg returns, maybe after the peer read it.
	for deadline := time.Now().Add(5 * time.Second); r.wire.Stats().TxFrames < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if st := r.wire.Stats(); st.TxFrames != n || st.TxDropped != 0 || st.TxErrors != 0 {
		t.Fatalf("wire stats %+v: want %d frames sent, no drops", st, n)
	}
}

// TestWireAllocs: a frame's round trip — interface to port and back —
// allocates nothing, in the wire's goroutines or anywhere else.
func TestWireAllocs(t *testing.T) {
	r := newWireRig(t, 1)
	f := udpFrame(rand.New(rand.NewPCG(1, 2)), 512, 1)
	b := fwd.NewBatch(8)
	buf := make([]byte, 2048)
	roundTrip := func() {
		if _, err := unix.Write(r.peer, f); err != nil {
			panic(err)
		}
		// AllocsPerRun runs on one P: yield so the wire's reader runs.
		for deadline := time.Now().Add(5 * time.Second); r.port.Rx(0, b) == 0 && time.Now().Before(deadline); {
			runtime.Gosched()
		}
		if len(b.Pkts) != 1 {
			panic("frame did not arrive")
		}
		r.port.Tx(0, b)
		if m, err := readPeer(r.peer, buf); err != nil || m != len(f) {
			panic("frame did not come back")
		}
	}
	roundTrip()
	if a := testing.AllocsPerRun(200, roundTrip); a != 0 {
		t.Fatalf("%v allocations per round trip, want 0", a)
	}
}

// readPeer is a read from the peer's socket that a signal interrupted
// (EINTR: the runtime's preemption signal, which SA_RESTART does not
// restart on a socket with a receive timeout) made again, a bounded number
// of times.
func readPeer(fd int, buf []byte) (int, error) {
	for range 100 {
		n, err := unix.Read(fd, buf)
		if err != unix.EINTR {
			return n, err
		}
	}
	return 0, unix.EINTR
}
