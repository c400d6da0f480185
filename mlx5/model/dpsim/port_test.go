package dpsim

import (
	"bytes"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// TestConnectedPorts: two model ports wired back to back; a frame sent on A
// arrives on B through B's driver queue, byte-exact, with CQE-derived flags.
func TestConnectedPorts(t *testing.T) {
	a, da, err := NewPort(Config{Name: "a", PoolID: 1, Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, db, err := NewPort(Config{Name: "b", PoolID: 2, Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := Connect(da, db); err != nil {
		t.Fatal(err)
	}
	if err := Connect(da, &Device{}); err == nil {
		t.Fatal("mismatched queue counts accepted")
	}
	batch := fwd.NewBatch(8)
	if a.Alloc(1, batch, 1) != 1 {
		t.Fatal("no spare buffer")
	}
	f := benchFrame(300, 9)
	p := &batch.Pkts[0]
	copy(p.Buf[p.Off:], f)
	p.Len = uint16(len(f))
	if a.Tx(1, batch) != 1 {
		t.Fatal("not sent")
	}
	if b.Rx(0, batch) != 0 {
		t.Fatal("queue 1's frame arrived on queue 0")
	}
	if b.Rx(1, batch) != 1 {
		t.Fatalf("B received nothing: %+v", db.RX[1].Stats)
	}
	got := &batch.Pkts[0]
	if !bytes.Equal(got.Data(), f) || got.Pool != 2 || got.Flags&(fwd.FlagIPv4|fwd.FlagUDP|fwd.FlagParsed) != fwd.FlagIPv4|fwd.FlagUDP|fwd.FlagParsed || got.L4Off != 34 {
		t.Fatalf("received %+v", got)
	}
	if b.Info().Queues != 2 || b.Info().Pool != 2 || b.Info().BufSize != 2048 {
		t.Fatalf("info %+v", b.Info())
	}
}

// TestFlushedDMAExact: with no-DDIO DMA the model writes frames with
// non-temporal stores (8 bytes at a time, the tail normally); every length,
// aligned or not, must arrive byte-exact, and a frame sent on a flushed
// port must leave it byte-exact.
func TestFlushedDMAExact(t *testing.T) {
	for _, layout := range []Layout{Contiguous, Scattered} {
		a, da, err := NewPort(Config{Name: "a", PoolID: 1, Flush: true, Layout: layout, Seed: 7, DeferredTx: true})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		var sent [][]byte
		da.TX[0].Sink = func(f []byte) { sent = append(sent, bytes.Clone(f)) }
		batch := fwd.NewBatch(8)
		for _, n := range []int{14, 15, 60, 63, 64, 65, 127, 300, 511, 512, 1013, 1514} {
			f := benchFrame(max(n, 42), uint16(n))[:n]
			for i := 42; i < n; i++ {
				f[i] = byte(i*7 + n)
			}
			da.RX[0].Inject(f)
			if a.Rx(0, batch) != 1 {
				t.Fatalf("%v: %d-byte frame not received: %+v", layout, n, da.RX[0].Stats)
			}
			if got := batch.Pkts[0].Data(); !bytes.Equal(got, f) {
				t.Fatalf("%v: %d-byte frame received as\n%x\nwant\n%x", layout, n, got, f)
			}
			sent = sent[:0]
			if a.Tx(0, batch) != 1 || da.Process() == 0 || len(sent) != 1 || !bytes.Equal(sent[0], f) {
				t.Fatalf("%v: %d-byte frame sent as %x", layout, n, sent)
			}
		}
	}
}
