package afxdp

import (
	"testing"

	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/fwd"
)

// runBridge bridges pa and pb with the engine, one worker per queue, until
// the test ends. With the suite's fast path forced on, fast is what the
// fast path forwarded so far (see suiteFastBridge); nil otherwise.
func runBridge(t *testing.T, tp *topo, pa, pb *Port) (e *fwd.Engine, fast func() uint64) {
	t.Helper()
	e, err := fwd.New(fwd.Config{Mode: fwd.ModeBridge}, []fwd.Port{pa, pb})
	if err != nil {
		t.Fatal(err)
	}
	run, err := runner.Start(e, []fwd.Port{pa, pb}, runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Stop(0) })
	return e, suiteFastBridge(t, tp, e, pa, pb)
}

// floodPing sends n echo requests from host A to host B as fast as replies
// come back: 2n frames through each port of the appliance.
func floodPing(t *testing.T, tp *topo, n int) {
	t.Helper()
	out, err := tp.a.Run("ping", "-f", "-c", itoa(n), "-w", "20", "-q", hostB)
	if err != nil {
		t.Fatalf("flood ping through the engine: %v\n%s", err, out)
	}
}

// With a Share, frames move between the two ports of a queue without a copy
// (fwd's Copies stays 0) and come back to the one pool through either
// port's completion ring: 12000 round trips move more frames through each
// port than the two queues' shared UMEMs hold (2 × 8192), so a frame that
// did not return would run the pool dry and stall the ping.
func TestSharedUMEMForwardsWithoutCopy(t *testing.T) {
	tp := newTopo(t, 2)
	sh := NewShare(7, 2)
	pa := openIn(t, tp.app, "h8a1", Options{Pool: 1, Index: 0, Share: sh})
	pb := openIn(t, tp.app, "h8b1", Options{Pool: 2, Index: 1, Share: sh})
	if pa.Info().Pool != 7 || pb.Info().Pool != 7 {
		t.Fatalf("pools %d, %d: want the Share's 7 for both", pa.Info().Pool, pb.Info().Pool)
	}
	for _, m := range append(pa.Modes(), pb.Modes()...) {
		t.Log(m)
	}
	e, fast := runBridge(t, tp, pa, pb)
	floodPing(t, tp, 12000)
	st := e.Stats()
	if st.Copies != 0 {
		t.Errorf("engine copied %d frames between ports sharing a UMEM, want 0", st.Copies)
	}
	// With the suite's fast path on, it carries most frames in the kernel
	// (the ping's completing is the result); the workers' share is then
	// what the fast path left them.
	var inKernel uint64
	if fast != nil {
		if inKernel = fast(); inKernel == 0 {
			t.Error("fast path forced on but it forwarded nothing")
		}
		t.Logf("fast path forwarded %d frames", inKernel)
	}
	for _, p := range []*Port{pa, pb} {
		s := p.Stats()
		if s.TxPackets+inKernel < 12000 || s.RxPackets+inKernel < 12000 {
			t.Errorf("%s: rx %d tx %d (fast path %d), want at least 12000 each", p.Info().Name, s.RxPackets, s.TxPackets, inKernel)
		}
		if s.BadFree != 0 || s.AllocShort != 0 {
			t.Errorf("%s: bad frees %d, short allocs %d", p.Info().Name, s.BadFree, s.AllocShort)
		}
	}
}

// Without a Share each port has its own UMEM and the engine copies every
// forwarded frame: the counter the shared test asserts 0 on does count.
func TestOwnUMEMsCopy(t *testing.T) {
	tp := newTopo(t, 1)
	pa := openIn(t, tp.app, "h8a1", Options{Pool: 1, Index: 0})
	pb := openIn(t, tp.app, "h8b1", Options{Pool: 2, Index: 1})
	e, fast := runBridge(t, tp, pa, pb)
	floodPing(t, tp, 200)
	var inKernel uint64
	if fast != nil {
		if inKernel = fast(); inKernel == 0 {
			t.Error("fast path forced on but it forwarded nothing")
		}
	}
	if c := e.Stats().Copies; c+inKernel < 400 {
		t.Errorf("engine copied %d frames between separate UMEMs (fast path forwarded %d), want at least 400 together", c, inKernel)
	}
}

// Closing the port that registered a shared UMEM first leaves the other
// port's frames mapped until it closes too (Share.release); then the queue
// index is free for a new Share.
func TestShareCloseOrder(t *testing.T) {
	tp := newTopo(t, 1)
	for round := range 2 {
		sh := NewShare(7, 2)
		var pa, pb *Port
		if err := tp.app.Do(func() (err error) {
			if pa, err = Open("h8a1", Options{Index: 0, Share: sh}); err != nil {
				return err
			}
			pb, err = Open("h8b1", Options{Index: 1, Share: sh})
			return err
		}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		pa.Close()
		b := fwd.NewBatch(8)
		if n := pb.Alloc(0, b, 8); n != 8 {
			t.Fatalf("round %d: alloc after the owner closed: %d of 8", round, n)
		}
		for i := range b.Pkts {
			b.Pkts[i].Buf[b.Pkts[i].Off] = 1 // the mapping is still there
		}
		pb.Free(0, b)
		pb.Close()
		if len(sh.umems) != 0 {
			t.Fatalf("round %d: %d UMEMs left in the Share after both ports closed", round, len(sh.umems))
		}
	}
}
