package fullsim

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/dp"
)

// twoFunctions opens ports a and b on two modelled functions, in one
// IOMMU domain when c is set, with their pools shared (dp.SharePorts).
func twoFunctions(t *testing.T, c *Container) (a, b *mlx5.FwdPort, da, db *Device) {
	t.Helper()
	open := func(name string, mac byte) (*mlx5.FwdPort, *Device) {
		d, err := Open(Config{Container: c})
		if err != nil {
			t.Fatal(err)
		}
		p, err := d.OpenPort(mlx5.FwdPortConfig{Name: name, Queues: 1, PoolID: uint16(mac), Promiscuous: true})
		if err != nil {
			t.Fatal(err)
		}
		return p, d
	}
	a, da = open("a", 0xa)
	b, db = open("b", 0xb)
	if err := dp.SharePorts(9, a.Port, b.Port); err != nil {
		t.Fatal(err)
	}
	return a, b, da, db
}

func closeAll(t *testing.T, ps []*mlx5.FwdPort, ds []*Device) {
	t.Helper()
	for _, p := range ps {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}
	for _, d := range ds {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}
}

// Two functions in one IOMMU domain with shared pools: the engine bridges
// frames received on a's RQ out of b's SQ without a copy (fwd's Copies
// stays 0), b's device reads a's receive buffers with b's own memory key,
// every frame leaves byte-exact, and b's TX completions give the strides
// back to a's RQ: 6000 frames through an RQ of 1024 strides.
func TestSharedContainerForwardsWithoutCopy(t *testing.T) {
	c := NewContainer()
	a, b, da, db := twoFunctions(t, c)
	if a.Info().Pool != 9 || b.Info().Pool != 9 {
		t.Fatalf("pools %d, %d: want 9 for both", a.Info().Pool, b.Info().Pool)
	}
	var out capture
	db.SetSink(0, out.sink)
	e, err := fwd.New(fwd.Config{Mode: fwd.ModeBridge}, []fwd.Port{a, b})
	if err != nil {
		t.Fatal(err)
	}
	w := e.Workers()[0]
	r := rand.New(rand.NewPCG(1, 2))
	// Teach the bridge where the destination lives: one frame from it on b.
	dst := net.HardwareAddr{0x02, 0, 0, 0, 0, 0xbb}
	learn := udpFrame(r, 100, 0)
	copy(learn[6:12], dst)
	db.Inject(learn)
	w.Poll()
	e.Service()
	var sent [][]byte
	for burst := 0; burst < 6000/50; burst++ {
		fs := make([][]byte, 50)
		for i := range fs {
			f := udpFrame(r, 60+r.IntN(1400), uint32(len(sent)))
			copy(f[0:6], dst)
			fs[i] = f
			sent = append(sent, f)
		}
		da.InjectBatch(fs)
		for k := 0; k < 4; k++ {
			w.Poll()
		}
	}
	for k := 0; k < 8; k++ {
		w.Poll()
	}
	if err := errorsOf(da, db); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	if st.Copies != 0 {
		t.Errorf("engine copied %d frames between ports sharing pools, want 0", st.Copies)
	}
	got := out.frames
	if len(got) != len(sent) {
		t.Fatalf("b sent %d frames of %d (drops %v)", len(got), len(sent), st.Drops)
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("frame %d differs after crossing", i)
		}
	}
	closeAll(t, []*mlx5.FwdPort{a, b}, []*Device{da, db})
}

// The same shared pools on functions in separate IOMMU domains: b's device
// cannot reach a's buffers. Each domain starts its IOVAs at the same place,
// so b reads whatever b has at a's buffer's IOVA (or faults): never a's
// frame. That is why SharePorts needs the functions in one container.
func TestSharedPoolsNeedOneContainer(t *testing.T) {
	a, b, da, db := twoFunctions(t, nil)
	var out capture
	db.SetSink(0, out.sink)
	bt := fwd.NewBatch(8)
	f := udpFrame(rand.New(rand.NewPCG(3, 4)), 200, 1)
	da.Inject(f)
	if a.Rx(0, bt) != 1 {
		t.Fatal("a received nothing")
	}
	b.Tx(0, bt)
	err := errorsOf(da, db)
	if err == nil && (len(out.frames) != 1 || bytes.Equal(out.frames[0], f)) {
		t.Fatalf("b sent a's frame from another IOMMU domain (%d frames)", len(out.frames))
	}
	for _, p := range []*mlx5.FwdPort{a, b} {
		p.Close()
	}
	da.Close()
	db.Close()
}
