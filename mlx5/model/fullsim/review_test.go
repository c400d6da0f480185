package fullsim

import (
	"math/rand/v2"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/model/dpsim"
	"github.com/ovfwd/ovfwd/mlx5/model/sim"
)

// sendBurst receives n small frames on queue 0 and sends them back out.
func sendBurst(t *testing.T, dev *Device, p *Port, n int) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = udpFrame(r, 64, uint32(i))
	}
	dev.InjectBatch(frames)
	b := fwd.NewBatch(fwd.MaxBatch)
	if got := drain(t, p, 0, b); len(got) != n {
		t.Fatalf("received %d of %d", len(got), n)
	}
	if s := p.Tx(0, b); s != n {
		t.Fatalf("sent %d of %d", s, n)
	}
}

// A device whose max_wqe_sz_sq is below the kernel's 15-WQEBB MPWQE gets
// sessions no longer than it allows; the model fails a longer WQE.
func TestMPWQECappedByMaxWQESize(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.MaxWQESzSQ = 512 // 8 WQEBBs
	p, dev, err := NewPortConfig(Config{Sim: cfg}, nil, mlx5.FwdPortConfig{Name: "cap", PoolID: 9})
	if err != nil {
		t.Fatal(err)
	}
	sendBurst(t, dev, p, 64)
	if err := dev.Err(); err != nil {
		t.Fatal(err)
	}
	if s := dev.TxStats(0); s.MPWQEs == 0 || s.WQEBBs > 8*s.WQEs {
		t.Fatalf("TX %+v", s)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// The port's own broadcasts do not come back to it: the driver turns the
// vport's local loopback off (it is on by default in the model, as in
// firmware).
func TestOwnBroadcastNotReflected(t *testing.T) {
	p, dev, err := NewPortConfig(Config{}, nil, mlx5.FwdPortConfig{Name: "lb", PoolID: 9, Promiscuous: true})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	f := udpFrame(r, 64, 1)
	dev.Inject(f)
	b := fwd.NewBatch(8)
	if got := drain(t, p, 0, b); len(got) != 1 {
		t.Fatalf("received %d", len(got))
	}
	copy(b.Pkts[0].Data()[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	if p.Tx(0, b) != 1 {
		t.Fatal("Tx")
	}
	b.Reset()
	if got := drain(t, p, 0, b); len(got) != 0 || dev.Stats.Reflected != 0 {
		t.Fatalf("own broadcast came back: %d frames, %d reflected", len(got), dev.Stats.Reflected)
	}
	p.Free(0, b)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// The driver port over the command path (mlx5.NewFwdPort, what vfio runs)
// and over the data-path model alone (dpsim.NewPort, what the data path's
// own tests and benchmarks use) take the same defaults and queue
// constructor: a zero configuration gives the same port.
func TestOneConstructorGeometry(t *testing.T) {
	full, _, err := NewPortConfig(Config{}, nil, mlx5.FwdPortConfig{Name: "x", PoolID: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	model, _, err := dpsim.NewPort(dpsim.Config{Name: "x", PoolID: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	a, b := full.Info(), model.Info()
	if a.MTU != b.MTU || a.BufSize != b.BufSize || a.Queues != b.Queues || a.Pool != b.Pool {
		t.Fatalf("command-path port %+v, model port %+v", a, b)
	}
	ba, bb := fwd.NewBatch(fwd.MaxBatch), fwd.NewBatch(fwd.MaxBatch)
	na, nb := full.Alloc(0, ba, fwd.MaxBatch), model.Alloc(0, bb, fwd.MaxBatch)
	if na != nb {
		t.Fatalf("spare buffers: %d vs %d", na, nb)
	}
	full.Free(0, ba)
	model.Free(0, bb)
}
