package fullsim

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// TestNewPortConnect: two full-stack model ports (driver "mlx5-sim") wired
// back to back; a frame sent on A crosses to B through B's steering and RSS,
// B sends it back and A receives it, byte-exact both ways; Close tears
// everything down and leaves both models empty.
func TestNewPortConnect(t *testing.T) {
	macA := net.HardwareAddr{0x02, 0, 0x5e, 0, 0, 0xa}
	macB := net.HardwareAddr{0x02, 0, 0x5e, 0, 0, 0xb}
	a, da, err := NewPort("a", macA, 1500, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, db, err := NewPort("b", macB, 1500, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := Connect(da, db); err != nil {
		t.Fatal(err)
	}
	if err := Connect(db, da); err != nil {
		t.Fatal(err)
	}
	if i := a.Info(); !bytes.Equal(i.MAC, macA) || i.MTU != 1500 || i.Queues != 2 || i.Name != "a" {
		t.Fatalf("info %+v", i)
	}
	if a.Info().Pool == b.Info().Pool {
		t.Fatalf("two model ports share pool id %d", a.Info().Pool)
	}
	r := rand.New(rand.NewPCG(5, 6))
	batch := fwd.NewBatch(8)
	for i := 0; i < 50; i++ {
		f := udpFrame(r, 60+r.IntN(1400), uint32(i))
		copy(f[0:6], macB)
		if a.Alloc(0, batch, 1) != 1 {
			t.Fatal("no spare buffer")
		}
		p := &batch.Pkts[0]
		copy(p.Buf[p.Off:], f)
		p.Len = uint16(len(f))
		if a.Tx(0, batch) != 1 {
			t.Fatal("A did not send")
		}
		q := expectedQueue(f, 2)
		if b.Rx(1-q, batch) != 0 {
			t.Fatalf("frame %d arrived on B's queue %d, RSS says %d", i, 1-q, q)
		}
		if b.Rx(q, batch) != 1 || !bytes.Equal(batch.Pkts[0].Data(), f) {
			t.Fatalf("frame %d did not arrive intact on B (%+v)", i, db.Stats)
		}
		if b.Tx(q, batch) != 1 {
			t.Fatal("B did not send")
		}
		if a.Rx(q, batch) != 1 || !bytes.Equal(batch.Pkts[0].Data(), f) {
			t.Fatalf("frame %d did not come back intact to A", i)
		}
		a.Free(q, batch)
	}
	// Warm and allocation-free across the wire: A → B → A.
	frame := udpFrame(r, 300, 99)
	copy(frame[0:6], macB)
	var aq int
	q := expectedQueue(frame, 2)
	pingPong := func() {
		a.Alloc(0, batch, 1)
		p := &batch.Pkts[0]
		copy(p.Buf[p.Off:], frame)
		p.Len = uint16(len(frame))
		a.Tx(0, batch)
		b.Rx(q, batch)
		b.Tx(q, batch)
		aq += a.Rx(q, batch)
		a.Free(q, batch)
	}
	if n := testing.AllocsPerRun(200, pingPong); n != 0 {
		t.Fatalf("%v allocations per round trip", n)
	}
	if aq != 201 {
		t.Fatalf("%d of 201 frames came back", aq)
	}
	if err := errorsOf(da, db); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Device{da, db} {
		if d.HCA() != nil || len(d.Model().Objects()) != 0 || d.Model().Enabled() {
			t.Fatalf("device still up after the port closed: %v", d.Model().Objects())
		}
	}
	if _, _, err := NewPort("c", net.HardwareAddr{1, 2}, 1500, 1); err == nil {
		t.Fatal("short MAC accepted")
	}
	if _, _, err := NewPort("c", nil, 20000, 1); err == nil {
		t.Fatal("MTU above the port maximum accepted")
	}
}

func errorsOf(ds ...*Device) error {
	for _, d := range ds {
		if err := d.Err(); err != nil {
			return err
		}
	}
	return nil
}
