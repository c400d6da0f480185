package porttest

import (
	"net"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

func TestPoolCatchesDoubleFreeAndForeignTx(t *testing.T) {
	pl := NewPool(1, 4, 0)
	other := NewPool(2, 4, 0)
	p := New("p", net.HardwareAddr{2, 0, 0, 0, 0, 1}, 1500, 1, pl)
	b := fwd.NewBatch(4)
	if p.Alloc(0, b, 2) != 2 || pl.InUse() != 2 {
		t.Fatal("alloc")
	}
	dup := b.Pkts[0]
	p.Free(0, b)
	if pl.InUse() != 0 {
		t.Fatal("free")
	}
	mustPanic(t, "double free", func() { b.Add(&dup); p.Free(0, b) })
	b.Reset()
	o := New("o", net.HardwareAddr{2, 0, 0, 0, 0, 2}, 1500, 1, other)
	o.Alloc(0, b, 1)
	mustPanic(t, "foreign Tx", func() { p.Tx(0, b) })
}

func TestInjectRxTxDrain(t *testing.T) {
	pl := NewPool(1, 8, 0)
	p := New("p", net.HardwareAddr{2, 0, 0, 0, 0, 1}, 1500, 1, pl)
	p.Inject(0, []byte("frame one"))
	p.Inject(0, []byte("frame two"))
	b := fwd.NewBatch(1)
	if p.Rx(0, b) != 1 || string(b.Pkts[0].Data()) != "frame one" || b.Pkts[0].Off != fwd.Headroom {
		t.Fatal("rx")
	}
	p.Tx(0, b)
	if p.Rx(0, b) != 1 || string(b.Pkts[0].Data()) != "frame two" {
		t.Fatal("rx 2")
	}
	p.Tx(0, b)
	out := p.Drain(0)
	if len(out) != 2 || string(out[1]) != "frame two" || pl.InUse() != 0 {
		t.Fatalf("drain %q inuse %d", out, pl.InUse())
	}
}

func mustPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	fn()
}
