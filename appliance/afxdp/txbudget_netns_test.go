package afxdp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// With XDP_MAX_TX_SKB_BUDGET at the ring size, one copy-mode kick sends a
// whole 64-frame batch; at the kernel's default of 32 the same batch takes
// two sendto calls (the first answered EAGAIN). Frames arrive either way.
// A kernel before 6.17 has no such option (ENOPROTOOPT): the port reports
// the default budget and the batch takes two kicks (the 6.12 guest of
// appliance/testbed/vmtest runs this).
func TestTxBudgetOneKickPerBatch(t *testing.T) {
	tp := newTopo(t, 1)
	p := openIn(t, tp.app, "h8a1", Options{Pool: 1})
	sink := attachSink(t, tp.a, "h8a0")
	dst := macOf(t, tp.a, "h8a0")
	kicks := func(n int) uint64 {
		before := p.Stats().TxKicks
		if got := sendFrames(p, n, dst); got != n {
			t.Fatalf("alloc gave %d of %d frames", got, n)
		}
		return p.Stats().TxKicks - before
	}
	if p.Modes()[0].TxBudget == defaultTxBudget {
		if err := unix.SetsockoptInt(p.FD(0), unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, 64); err == nil {
			t.Fatal("the kernel takes XDP_MAX_TX_SKB_BUDGET but the port kept the default budget")
		}
		if k := kicks(64); k != 2 {
			t.Errorf("budget 32 (kernel default): 64 frames took %d kicks, want 2", k)
		}
		if got := waitCount(sink, 64); got < 64 {
			t.Errorf("sink counted %d frames, want at least the 64 sent", got)
		}
		return
	}
	if got := p.Modes()[0].TxBudget; got < 64 {
		t.Fatalf("tx budget %d: the kernel has XDP_MAX_TX_SKB_BUDGET but did not take the ring size", got)
	}
	if k := kicks(64); k != 1 {
		t.Errorf("budget %d: 64 frames took %d kicks, want 1", p.Modes()[0].TxBudget, k)
	}
	if err := unix.SetsockoptInt(p.FD(0), unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, defaultTxBudget); err != nil {
		t.Fatal(err)
	}
	if k := kicks(64); k != 2 {
		t.Errorf("budget 32: 64 frames took %d kicks, want 2", k)
	}
	// ≥: the peer also sees the kernel's own IPv6 chatter from h8a1.
	if got := waitCount(sink, 128); got < 128 {
		t.Errorf("sink counted %d frames, want at least the 128 sent", got)
	}
}
