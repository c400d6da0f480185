package afxdp

import (
	"testing"

	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/fwd"
)

// runBridge bridges pa and pb with the engine, one worker per queue, until
// the test ends.
func runBridge(t *testing.T, pa, pb *Port) *fwd.Engine {
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
	return e
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
	e := runBridge(t, pa, pb)
	floodPing(t, tp, 12000)
	st := e.Stats()
	if st.Copies != 0 {
		t.Errorf("engine copied %d frames between ports sharing a UMEM, want 0", st.Copies)
	}
	for _, p := range []*Port{pa, pb} {
		s := p.Stats()
		if s.TxPackets < 12000 || s.RxPackets < 12000 {
			t.Errorf("%s: rx %d tx %d, want at least 12000 each", p.Info().Name, s.RxPackets, s.TxPackets)
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
	e := runBridge(t, pa, pb)
	floodPing(t, tp, 200)
	if c := e.Stats().Copies; c < 400 {
		t.Errorf("engine copied %d frames between separate UMEMs, want at least 400", c)
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
