package afxdp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A copy-mode kick sends up to the TX budget: a 64-frame batch takes one
// sendto at the ring-sized budget (XDP_MAX_TX_SKB_BUDGET, Linux 6.17+) and
// two at the kernel's default of 32 (the first answered EAGAIN), which is
// what older kernels keep (TestFallbacks/tx-budget-refused forces that).
// Frames arrive either way.
func TestTxBudgetKicksPerBatch(t *testing.T) {
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
	sent := uint64(0)
	budget := p.Modes()[0].TxBudget
	t.Logf("tx budget %d (%s)", budget, p.Modes()[0])
	if want := uint64((64 + budget - 1) / budget); kicks(64) != want {
		t.Errorf("budget %d: 64 frames did not take %d kicks", budget, want)
	}
	sent += 64
	if budget != defaultTxBudget {
		if err := unix.SetsockoptInt(p.FD(0), unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, defaultTxBudget); err != nil {
			t.Fatal(err)
		}
		if k := kicks(64); k != 2 {
			t.Errorf("budget 32: 64 frames took %d kicks, want 2", k)
		}
		sent += 64
	}
	// ≥: the peer also sees the kernel's own IPv6 chatter from h8a1.
	if got := waitCount(sink, sent); got < sent {
		t.Errorf("sink counted %d frames, want at least the %d sent", got, sent)
	}
}
