package fullsim

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/dp"
)

// BenchmarkFullStackForward: wire → model (vport filter, flow table, RSS,
// RX engine) → NewFwdPort's Rx → L2 MAC swap → Tx → model (doorbell, SQ
// engine, sink), in bursts of 64 over 2 queues; one op is one packet, so
// ns/op is ns per packet including the model. Prefetch off (D=0) vs on
// (D=4); DMA with (flushed) and without cache eviction.
//
//	go test -run '^$' -bench FullStackForward -benchmem -benchtime=65536x ./mlx5/model/fullsim/
func BenchmarkFullStackForward(b *testing.B) {
	for _, flush := range []bool{false, true} {
		for _, size := range []int{64, 512} {
			for _, d := range []int{0, 4} {
				name := fmt.Sprintf("flush=%v/size=%d/D=%d", flush, size, d)
				b.Run(name, func(b *testing.B) { benchForward(b, flush, size, d) })
			}
		}
	}
}

func benchForward(b *testing.B, flush bool, size, dist int) {
	dev, err := Open(Config{Flush: flush})
	if err != nil {
		b.Fatal(err)
	}
	p, err := dev.OpenPort(mlx5.FwdPortConfig{Queues: 2, PoolID: 1, LogWQEs: 5, Rx: dp.RxOptions{PrefetchDistance: dist}})
	if err != nil {
		b.Fatal(err)
	}
	var out int
	dev.SetSink(0, func([]byte) { out++ })
	dev.SetSink(1, func([]byte) { out++ })
	r := rand.New(rand.NewPCG(1, uint64(size)))
	frames := make([][]byte, 64)
	for i := range frames {
		frames[i] = udpFrame(r, size, uint32(i))
	}
	batch := fwd.NewBatch(fwd.MaxBatch)
	burst := func() int {
		dev.InjectBatch(frames)
		n := 0
		for q := 0; q < 2; q++ {
			n += p.Rx(q, batch)
			for i := range batch.Pkts {
				d := batch.Pkts[i].Data()
				var tmp [6]byte
				copy(tmp[:], d[0:6])
				copy(d[0:6], d[6:12])
				copy(d[6:12], tmp[:])
			}
			p.Tx(q, batch)
		}
		return n
	}
	for i := 0; i < 64; i++ {
		burst()
	}
	out = 0
	b.ReportAllocs()
	b.ResetTimer()
	pkts := 0
	for pkts < b.N {
		n := burst()
		if n == 0 {
			b.Fatalf("forwarding stalled after %d of %d packets: %v", pkts, b.N, dev.Err())
		}
		pkts += n
	}
	b.StopTimer()
	if out != pkts {
		b.Fatalf("delivered %d of %d", out, pkts)
	}
	if err := dev.Err(); err != nil {
		b.Fatal(err)
	}
	p.Close()
	if err := dev.Close(); err != nil {
		b.Fatal(err)
	}
}
