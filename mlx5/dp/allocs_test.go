package dp_test

import (
	"math/rand/v2"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/model/dpsim"
)

// TestZeroAllocs pins 0 allocations per burst on the RX path, the TX path
// and the whole RX → MAC swap → TX loop, with prefetch, compression and both
// TX policies.
func TestZeroAllocs(t *testing.T) {
	for _, compress := range []bool{false, true} {
		for _, pad := range []bool{false, true} {
			port, dev, err := dpsim.NewPort(dpsim.Config{PoolID: 2, Compress: compress, DeferredTx: true,
				Rx: dp.RxOptions{PrefetchDistance: 4}, Tx: dp.TxOptions{PadToEdge: pad}})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			frames := make([][]byte, 64)
			for i := range frames {
				frames[i] = frame(64+i*20, uint32(i), r)
			}
			b := fwd.NewBatch(fwd.MaxBatch)
			rx := testing.AllocsPerRun(200, func() {
				dev.RX[0].InjectBatch(frames)
				b.Reset()
				port.Rx(0, b)
				port.Free(0, b)
			})
			tx := testing.AllocsPerRun(200, func() {
				dev.RX[0].InjectBatch(frames)
				b.Reset()
				port.Rx(0, b)
				for i := range b.Pkts {
					d := b.Pkts[i].Data()
					var m [6]byte
					copy(m[:], d[0:6])
					copy(d[0:6], d[6:12])
					copy(d[6:12], m[:])
				}
				port.Tx(0, b)
				dev.Process()
			})
			if rx != 0 || tx != 0 {
				t.Errorf("compress=%v pad=%v: %v allocs per RX burst, %v per RX+TX burst", compress, pad, rx, tx)
			}
			if got := port.Queue(0).TX.Stats.Packets; got < 200*64 {
				t.Errorf("only %d packets sent", got)
			}
			port.Close()
		}
	}
}
