package dp_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5/model/dpsim"
)

// TestCompressedSessionAcrossSmallBatches: a compressed session longer than
// the caller's batch room (64 minis against a batch of 5, or a worker that
// polls several ports into one batch) is delivered across polls, in order,
// byte-exact; the strides it holds are not reposted before delivery, so the
// traffic after it (which reuses the ring) is intact too.
func TestCompressedSessionAcrossSmallBatches(t *testing.T) {
	for _, enhanced := range []bool{false, true} {
		port, dev, err := dpsim.NewPort(dpsim.Config{Name: "s", PoolID: 1, Compress: true, Enhanced: enhanced,
			LogWQEs: 2, LogStrides: 5})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(4, 4))
		var seq uint32
		for round := 0; round < 40; round++ {
			var frames [][]byte
			for i := 0; i < 48; i++ {
				frames = append(frames, frame(64+r.IntN(200), seq, r))
				seq++
			}
			dev.RX[0].InjectBatch(frames)
			var got [][]byte
			b := fwd.NewBatch(1 + r.IntN(7))
			for guard := 0; guard < 1000 && len(got) < len(frames); guard++ {
				if port.Rx(0, b) == 0 {
					break
				}
				for i := range b.Pkts {
					got = append(got, bytes.Clone(b.Pkts[i].Data()))
				}
				port.Free(0, b)
			}
			if len(got) != len(frames) {
				t.Fatalf("enhanced %v round %d: received %d of %d (%+v)", enhanced, round, len(got), len(frames), port.Queue(0).RX.Stats)
			}
			for i := range got {
				if !bytes.Equal(got[i], frames[i]) {
					t.Fatalf("enhanced %v round %d: frame %d differs", enhanced, round, i)
				}
			}
		}
		if s := dev.RX[0].Stats; s.CompSessions == 0 || s.OutOfBuffer != 0 {
			t.Fatalf("enhanced %v: model %+v", enhanced, s)
		}
		port.Close()
	}
}
