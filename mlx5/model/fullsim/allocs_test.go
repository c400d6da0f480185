package fullsim

import (
	"math/rand/v2"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
)

// TestZeroAllocsThroughFullStack: once warm, receiving and sending through
// the port built by mlx5.NewFwdPort allocates nothing — neither the data
// path nor the joined model (steering cache, RSS, both engines, doorbell).
func TestZeroAllocsThroughFullStack(t *testing.T) {
	for _, mode := range []struct{ comp, strip bool }{{false, false}, {true, false}, {true, true}} {
		comp := mode.comp
		dev, err := Open(Config{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := mlx5.FwdPortConfig{Queues: 2, PoolID: 1}
		cfg.RXCompression.Enabled = comp
		cfg.StripVLAN = mode.strip
		p, err := dev.OpenPort(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var delivered [2]int
		dev.SetSink(0, func([]byte) { delivered[0]++ })
		dev.SetSink(1, func([]byte) { delivered[1]++ })
		r := rand.New(rand.NewPCG(9, 9))
		frames := make([][]byte, 32)
		for i := range frames {
			frames[i] = udpFrame(r, 64+r.IntN(1400), uint32(i))
			if i%2 == 1 {
				frames[i] = tagged(frames[i], uint16(i)) // the tag path: ethertype read, re-insertion when stripped
			}
		}
		b := fwd.NewBatch(fwd.MaxBatch)
		var rxd, txd int
		step := func() {
			dev.InjectBatch(frames)
			for q := 0; q < 2; q++ {
				rxd += p.Rx(q, b)
				txd += p.Tx(q, b)
			}
		}
		for i := 0; i < 100; i++ { // warm: routes, bindings, batch slices
			step()
		}
		if a := testing.AllocsPerRun(500, step); a != 0 {
			t.Fatalf("compression %v: %v allocations per burst of 32", comp, a)
		}
		// AllocsPerRun calls step once more than asked, to warm up.
		if rxd != 601*32 || txd != rxd || delivered[0]+delivered[1] != txd || delivered[0] == 0 || delivered[1] == 0 {
			t.Fatalf("compression %v: rx %d tx %d delivered %v, want %d each", comp, rxd, txd, delivered, 601*32)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := dev.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
