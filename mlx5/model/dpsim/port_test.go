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
