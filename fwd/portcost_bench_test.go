package fwd_test

import (
	"runtime"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// BenchmarkPortOnly is the in-memory port's own cost inside BenchmarkPoll:
// the same template Rx on port 0 (a buffer from the pool and the frame
// copied in) and Tx to port 1's sink (the buffer back to the pool), 64 a
// batch, with no engine in between. BenchmarkPoll's ns/pkt minus this is
// the engine's.
func BenchmarkPortOnly(b *testing.B) {
	for _, c := range hotCases[:4] {
		b.Run(c.name, func(b *testing.B) {
			r := hotRig(b, c.mode, c.frames(), fwd.Config{})
			rx, tx := r.ports[0], r.ports[1]
			batch := fwd.NewBatch(64)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := threadCPU()
			for b.Loop() {
				batch.Reset()
				rx.Rx(0, batch)
				tx.Tx(0, batch)
			}
			cpu := threadCPU() - cpu0
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/pkt")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/64, "cpu-ns/pkt")
		})
	}
}
