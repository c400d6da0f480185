package dp_test

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/model/dpsim"
)

// heldRig is a port of 4 WQEs × 8 strides with 4 spares and a sink.
func heldRig(t *testing.T) (*dp.Port, *dpsim.Device, *[][]byte) {
	t.Helper()
	port, dev, err := dpsim.NewPort(dpsim.Config{PoolID: 3, Spare: 4, LogWQEs: 2, LogStrides: 3,
		Rx: dp.RxOptions{PrefetchDistance: 4}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { port.Close() })
	got := new([][]byte)
	dev.TX[0].Sink = func(f []byte) { *got = append(*got, bytes.Clone(f)) }
	return port, dev, got
}

func rxRound(t *testing.T, port *dp.Port, dev *dpsim.Device, r *rand.Rand, seq uint32, n int) *fwd.Batch {
	t.Helper()
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = frame(200, seq+uint32(i), r)
	}
	dev.RX[0].InjectBatch(frames)
	b := fwd.NewBatch(64)
	if got := port.Rx(0, b); got != n {
		t.Fatalf("received %d of %d (model %+v)", got, n, dev.RX[0].Stats)
	}
	return b
}

// TestHeldResumedFromStride: a packet held past its batch keeps its stride
// (the WQE is not reposted, later bursts do not overwrite it) and is
// resumed from the record in that stride: same buffer, no spare taken
// (nothing was copied), the fields the pipeline set before holding it, and
// it is sent as it was left.
func TestHeldResumedFromStride(t *testing.T) {
	port, dev, got := heldRig(t)
	r := rand.New(rand.NewPCG(3, 3))
	b := rxRound(t, port, dev, r, 0, 8)
	pk := b.Pkts[0]
	pk.Data()[22]-- // TTL, as routing leaves it
	pk.OutPort, pk.Peer = 1, 77
	want := bytes.Clone(pk.Data())
	h, ok := port.Hold(0, &pk)
	if !ok {
		t.Fatal("Hold refused a received packet")
	}
	rest := fwd.NewBatch(8)
	rest.Pkts = append(rest.Pkts, b.Pkts[1:]...)
	port.Free(0, rest)
	reposted := port.Queue(0).RX.Pool().Reposted
	// Three more WQEs' worth: every other stride is used, the held WQE is
	// not given back (ring order stops at it), so nothing overwrites it.
	for round := range 3 {
		port.Free(0, rxRound(t, port, dev, r, uint32(100*(round+1)), 8))
	}
	if rp := port.Queue(0).RX.Pool().Reposted; rp != reposted {
		t.Fatalf("%d WQEs reposted while one of their strides was held", rp-reposted)
	}
	var back fwd.Packet
	if shared, ok := port.Resume(0, h, &back); !ok || shared {
		t.Fatalf("Resume: ok %v shared %v", ok, shared)
	}
	if unsafe.SliceData(back.Buf) != unsafe.SliceData(b.Pkts[0].Buf) || back.Handle != pk.Handle {
		t.Fatal("resumed packet is not in its stride")
	}
	if back.Off != pk.Off || back.Len != pk.Len || back.Pool != 3 || back.OutPort != 1 || back.Peer != 77 ||
		back.Flags != pk.Flags || back.L3Off != pk.L3Off || back.L4Off != pk.L4Off {
		back.Buf, pk.Buf = nil, nil
		t.Fatalf("resumed %+v, held %+v", back, pk)
	}
	if !bytes.Equal(back.Data(), want) {
		t.Fatal("held bytes changed")
	}
	spares := fwd.NewBatch(8)
	if n := port.Alloc(0, spares, 8); n != 4 {
		t.Fatalf("%d of 4 spares free: a copy took one", n)
	}
	port.Free(0, spares)
	*got = nil
	out := fwd.NewBatch(8)
	out.Pkts = append(out.Pkts, back)
	port.Tx(0, out)
	dev.Process()
	if len(*got) != 1 || !bytes.Equal((*got)[0], want) {
		t.Fatalf("sent %d frames, want the held one", len(*got))
	}
	port.Tx(0, out) // reap: the held WQE and the three behind it go back
	port.Free(0, rxRound(t, port, dev, r, 900, 8))
	if rp := port.Queue(0).RX.Pool().Reposted; rp < reposted+4 {
		t.Fatalf("%d WQEs reposted after the held packet was sent, want 4", rp-reposted)
	}
}

// TestHeldShareRelease: dataref counts owners; the stride goes back only
// when the last one releases it.
func TestHeldShareRelease(t *testing.T) {
	port, dev, _ := heldRig(t)
	r := rand.New(rand.NewPCG(4, 4))
	b := rxRound(t, port, dev, r, 0, 8)
	pk := b.Pkts[3]
	h, ok := port.Hold(0, &pk)
	if !ok || !port.Share(0, h) {
		t.Fatal("Hold/Share refused")
	}
	var back fwd.Packet
	if shared, _ := port.Resume(0, h, &back); !shared {
		t.Fatal("a shared buffer resumed as unshared")
	}
	rest := fwd.NewBatch(8)
	for i := range b.Pkts {
		if i != 3 {
			rest.Pkts = append(rest.Pkts, b.Pkts[i])
		}
	}
	port.Free(0, rest)
	pool := port.Queue(0).RX.Pool()
	r0 := pool.Reposted
	port.Release(0, h)
	port.Free(0, rxRound(t, port, dev, r, 10, 8))
	if pool.Reposted != r0 {
		t.Fatal("stride given back with an owner left")
	}
	port.Release(0, h)
	port.Free(0, rxRound(t, port, dev, r, 20, 8))
	if pool.Reposted == r0 {
		t.Fatal("stride not given back after its last owner released it")
	}
}

// TestHoldRefuses: a packet of another pool, or whose data leaves no room
// for the record before the stride end, is not held.
func TestHoldRefuses(t *testing.T) {
	port, dev, _ := heldRig(t)
	r := rand.New(rand.NewPCG(5, 5))
	b := rxRound(t, port, dev, r, 0, 1)
	pk := b.Pkts[0]
	other := pk
	other.Pool = 9
	if _, ok := port.Hold(0, &other); ok {
		t.Fatal("held a packet of another pool")
	}
	long := pk
	long.Len = uint16(len(long.Buf)) - long.Off
	if _, ok := port.Hold(0, &long); ok {
		t.Fatal("held a packet with no room for its record")
	}
	bad := pk
	bad.Handle = 1 << 40
	if _, ok := port.Hold(0, &bad); ok {
		t.Fatal("held a handle naming no buffer")
	}
	if _, ok := port.Resume(0, dp.Held(1<<45), new(fwd.Packet)); ok {
		t.Fatal("resumed a Held naming no buffer")
	}
	port.Free(0, b)
}

// TestHoldResumeZeroAllocs: parking and resuming allocate nothing.
func TestHoldResumeZeroAllocs(t *testing.T) {
	port, dev, _ := heldRig(t)
	r := rand.New(rand.NewPCG(6, 6))
	frames := make([][]byte, 8)
	for i := range frames {
		frames[i] = frame(300, uint32(i), r)
	}
	b := fwd.NewBatch(8)
	var held [8]dp.Held
	n := testing.AllocsPerRun(100, func() {
		dev.RX[0].InjectBatch(frames)
		b.Reset()
		port.Rx(0, b)
		for i := range b.Pkts {
			held[i], _ = port.Hold(0, &b.Pkts[i])
		}
		for i := range b.Pkts {
			port.Resume(0, held[i], &b.Pkts[i])
		}
		port.Free(0, b)
	})
	if n != 0 {
		t.Fatalf("%v allocs per held burst", n)
	}
}

// TestHoldBatchResumeBatch: the batch calls park and rebuild every packet
// of a burst as the single calls do.
func TestHoldBatchResumeBatch(t *testing.T) {
	port, dev, got := heldRig(t)
	r := rand.New(rand.NewPCG(7, 7))
	b := rxRound(t, port, dev, r, 0, 8)
	want := make([][]byte, 8)
	for i := range b.Pkts {
		b.Pkts[i].Peer = uint32(i + 1)
		want[i] = bytes.Clone(b.Pkts[i].Data())
	}
	held := make([]dp.Held, 8)
	port.HoldBatch(0, b.Pkts, held)
	b.Reset()
	port.Free(0, rxRound(t, port, dev, r, 50, 8))
	b.Pkts = b.Pkts[:8]
	if n := port.ResumeBatch(0, held, b.Pkts); n != 8 {
		t.Fatalf("resumed %d of 8", n)
	}
	for i := range b.Pkts {
		if b.Pkts[i].Peer != uint32(i+1) || !bytes.Equal(b.Pkts[i].Data(), want[i]) {
			t.Fatalf("packet %d resumed wrong", i)
		}
	}
	*got = nil
	port.Tx(0, b)
	dev.Process()
	if len(*got) != 8 {
		t.Fatalf("sent %d of 8", len(*got))
	}
}
