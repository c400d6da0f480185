package afxdp

import (
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// The per-queue path allocates nothing: Alloc, Tx (with its kicks and
// completion reclaim), Rx and Free, with frames really moving through the
// kernel (TX to host A, whose ping traffic comes back in as RX).
func TestHotPathZeroAllocs(t *testing.T) {
	tp := newTopo(t, 1)
	p := openIn(t, tp.app, "h8a1", Options{Pool: 1})
	sink := attachSink(t, tp.a, "h8a0")
	dst := macOf(t, tp.a, "h8a0")
	b := fwd.NewBatch(64)
	rx := fwd.NewBatch(64)
	allocs := testing.AllocsPerRun(200, func() {
		n := p.Alloc(0, b, 32)
		for i := 0; i < n; i++ {
			pk := &b.Pkts[i]
			pk.Len = uint16(udpFrame(pk.Buf[pk.Off:], dst, p.Info().MAC))
		}
		p.Tx(0, b)
		p.Rx(0, rx)
		p.Free(0, rx)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per batch, want 0", allocs)
	}
	if got := waitCount(sink, 200*32); got < 100*32 {
		t.Errorf("sink counted %d frames of %d sent: the loop did not really transmit", got, 201*32)
	}
}

// BenchmarkTx measures Alloc + Tx of 32-frame batches (copy-mode TX, the
// peer drops them in XDP) and Rx/Free of what comes back. Root only.
func BenchmarkTx(b *testing.B) {
	tp := newTopo(b, 1)
	p := openIn(b, tp.app, "h8a1", Options{Pool: 1})
	attachSink(b, tp.a, "h8a0")
	dst := macOf(b, tp.a, "h8a0")
	tx, rx := fwd.NewBatch(64), fwd.NewBatch(64)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		n := p.Alloc(0, tx, 32)
		for i := 0; i < n; i++ {
			pk := &tx.Pkts[i]
			pk.Len = uint16(udpFrame(pk.Buf[pk.Off:], dst, p.Info().MAC))
		}
		p.Tx(0, tx)
		p.Rx(0, rx)
		p.Free(0, rx)
	}
	b.ReportMetric(float64(b.N*32)/b.Elapsed().Seconds(), "frames/s")
}
