package dpsim

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/mlx5/dp"
)

// BenchmarkForward: one op = one packet through RX → MAC swap → TX on the
// model with flushed DMA. ns/op includes the model; driver-ns/pkt excludes it.
// The nofar, nocqe and fresh variants need a lab build (-tags mlx5lab).
func BenchmarkForward(b *testing.B) {
	for _, v := range []struct {
		name string
		v    variant
	}{
		{"warm/contiguous/64/D0", variant{size: 64, warm: true}},
		{"warm/contiguous/64/D4", variant{size: 64, warm: true, dist: 4}},
		{"warm/scattered/64/D0", variant{layout: Scattered, size: 64, warm: true}},
		{"warm/scattered/64/D4", variant{layout: Scattered, size: 64, warm: true, dist: 4}},
		{"warm/scattered/64/D8", variant{layout: Scattered, size: 64, warm: true, dist: 8}},
		{"warm/scattered/64/D4/nofar", variant{layout: Scattered, size: 64, warm: true, dist: 4, lab: dp.Lab{NoFarPrefetch: true}}},
		{"contiguous/64/D0", variant{size: 64}},
		{"contiguous/64/D4", variant{size: 64, dist: 4}},
		{"scattered/64/D0", variant{layout: Scattered, size: 64}},
		{"scattered/64/D4", variant{layout: Scattered, size: 64, dist: 4}},
		{"scattered/64/D8", variant{layout: Scattered, size: 64, dist: 8}},
		{"scattered/64/D16", variant{layout: Scattered, size: 64, dist: 16}},
		{"scattered/64/D64", variant{layout: Scattered, size: 64, dist: 64}},
		{"scattered/64/D4/nocqe", variant{layout: Scattered, size: 64, dist: 4, lab: dp.Lab{NoCQEPrefetch: true}}},
		{"scattered/64/D4/nofar", variant{layout: Scattered, size: 64, dist: 4, lab: dp.Lab{NoFarPrefetch: true}}},
		// 128 and 256 B: the shinfo line leaves the header line's 128-byte
		// pair (at 64 B it is the header line's neighbour).
		{"scattered/128/D4", variant{layout: Scattered, size: 128, dist: 4}},
		{"scattered/256/D4", variant{layout: Scattered, size: 256, dist: 4}},
		{"scattered/512/D0", variant{layout: Scattered, size: 512}},
		{"scattered/512/D4", variant{layout: Scattered, size: 512, dist: 4}},
		{"scattered/512/D8", variant{layout: Scattered, size: 512, dist: 8}},
		{"scattered/512/D16", variant{layout: Scattered, size: 512, dist: 16}},
		{"scattered/512/D64", variant{layout: Scattered, size: 512, dist: 64}},
		{"scattered/512/D4/nocqe", variant{layout: Scattered, size: 512, dist: 4, lab: dp.Lab{NoCQEPrefetch: true}}},
		{"scattered/512/D4/nofar", variant{layout: Scattered, size: 512, dist: 4, lab: dp.Lab{NoFarPrefetch: true}}},
		{"scattered/512/D4/fresh", variant{layout: Scattered, size: 512, dist: 4, lab: dp.Lab{FreshContext: true}}},
		{"contiguous/512/D4/pad", variant{size: 512, dist: 4, pad: true}},
		{"scattered/64/D4/comp", variant{layout: Scattered, size: 64, dist: 4, compress: true}},
		{"scattered/64/D4/ecomp", variant{layout: Scattered, size: 64, dist: 4, compress: true, enhanced: true}},
		{"warm/scattered/64/D4/comp", variant{layout: Scattered, size: 64, dist: 4, compress: true, warm: true}},
		// Adaptive prefetch at D = 4 (A4), and warm 512 B for comparison.
		{"warm/contiguous/64/A4", variant{size: 64, warm: true, dist: 4, adapt: true}},
		{"warm/scattered/64/A4", variant{layout: Scattered, size: 64, warm: true, dist: 4, adapt: true}},
		{"warm/scattered/512/D0", variant{layout: Scattered, size: 512, warm: true}},
		{"warm/scattered/512/D4", variant{layout: Scattered, size: 512, warm: true, dist: 4}},
		{"warm/scattered/512/A4", variant{layout: Scattered, size: 512, warm: true, dist: 4, adapt: true}},
		{"contiguous/64/A4", variant{size: 64, dist: 4, adapt: true}},
		{"scattered/64/A4", variant{layout: Scattered, size: 64, dist: 4, adapt: true}},
		{"scattered/512/A4", variant{layout: Scattered, size: 512, dist: 4, adapt: true}},
		// Every packet held one burst: in its stride (hold) or as a value (holdval).
		{"warm/scattered/64/D4/hold", variant{layout: Scattered, size: 64, dist: 4, warm: true, hold: holdRecord}},
		{"warm/scattered/64/D4/holdval", variant{layout: Scattered, size: 64, dist: 4, warm: true, hold: holdValue}},
		{"scattered/64/D4/hold", variant{layout: Scattered, size: 64, dist: 4, hold: holdRecord}},
		{"scattered/64/D4/holdval", variant{layout: Scattered, size: 64, dist: 4, hold: holdValue}},
		{"scattered/512/D4/hold", variant{layout: Scattered, size: 512, dist: 4, hold: holdRecord}},
		{"scattered/512/D4/holdval", variant{layout: Scattered, size: 512, dist: 4, hold: holdValue}},
		// Without the record (lab): what writing it and its PREFETCHW cost.
		{"warm/scattered/64/D4/norec", variant{layout: Scattered, size: 64, warm: true, dist: 4, lab: dp.Lab{NoRecord: true}}},
		{"scattered/64/D4/norec", variant{layout: Scattered, size: 64, dist: 4, lab: dp.Lab{NoRecord: true}}},
		{"scattered/512/D4/norec", variant{layout: Scattered, size: 512, dist: 4, lab: dp.Lab{NoRecord: true}}},
	} {
		if v.v.lab != (dp.Lab{}) && !dp.LabBuild {
			continue // a receive-path variant: go test -tags mlx5lab
		}
		b.Run(v.name, func(b *testing.B) {
			r, err := newRig(v.v, 64, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer r.port.Close()
			if res := r.run(4096); res.stalled != nil {
				b.Fatal(res.stalled)
			}
			b.ReportAllocs()
			off0 := r.port.Queue(0).RX.Stats.PrefetchOffBursts
			b.ResetTimer()
			res := r.run(b.N)
			if res.stalled != nil {
				// ns/op would be over packets that never moved.
				b.Fatal(res.stalled)
			}
			b.ReportMetric(res.burstDriver, "driver-ns/pkt")
			b.ReportMetric(res.burstModelTx, "model-tx-ns/pkt") // the phase (result.burstModelTx)
			b.ReportMetric(float64(res.nops)/float64(res.packets), "NOPs/pkt")
			if v.v.adapt {
				// Share of bursts the adaptive prefetch ran without prefetching.
				b.ReportMetric(float64(r.port.Queue(0).RX.Stats.PrefetchOffBursts-off0)/float64(len(r.drvBurst)), "pf-off")
			}
			if r.holdFails != 0 {
				b.Fatalf("%d holds or resumes refused", r.holdFails)
			}
		})
	}
}

// TestBenchSmoke runs Bench briefly so its plumbing cannot rot; it asserts
// nothing about speed.
func TestBenchSmoke(t *testing.T) {
	var w io.Writer = io.Discard
	if testing.Verbose() {
		w = os.Stdout
	}
	if err := Bench(w, BenchOptions{Packets: 2048, Runs: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestBenchReport prints the full tables when OVFWD_BENCH_MLX5 is set (the
// value is the number of alternated runs), e.g.
//
//	OVFWD_BENCH_MLX5=9 go test -run TestBenchReport -v ./mlx5/model/dpsim/
func TestBenchReport(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("OVFWD_BENCH_MLX5"))
	if runs == 0 {
		t.Skip("set OVFWD_BENCH_MLX5=<runs> to print the data-path tables")
	}
	work, _ := strconv.Atoi(os.Getenv("OVFWD_BENCH_WORK"))
	if err := Bench(os.Stdout, BenchOptions{Runs: runs, Work: work}); err != nil {
		t.Fatal(err)
	}
}

// TestBenchStallFails: a rig that stops forwarding (here: its RQ never
// reposted, as with a leaked buffer) makes the run report a stall instead of
// a time per packet.
func TestBenchStallFails(t *testing.T) {
	r, err := newRig(variant{size: 64}, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.port.Close()
	r.dev.RX[0].MaxFrame = 10 // the model drops every frame: nothing arrives
	if res := r.run(1024); res.stalled == nil || res.packets != 0 {
		t.Fatalf("stalled rig: %+v", res)
	}
}

// TestSwapMACs pins the benchmark's MAC swap.
func TestSwapMACs(t *testing.T) {
	h := [12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	swapMACs(&h)
	if h != [12]byte{7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6} {
		t.Fatalf("swapped: %v", h)
	}
}

// BenchmarkModelDoorbell times the one piece of the model that runs inside
// the driver's interval of BenchmarkForward: the doorbell write's decode
// (doorbell record and SQ number checks; the WQEs run later, in Process,
// outside the interval). One op = one doorbell = one 64-packet burst.
func BenchmarkModelDoorbell(b *testing.B) {
	r, err := newRig(variant{layout: Scattered, size: 64, dist: 4}, 64, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer r.port.Close()
	r.dev.RX[0].InjectBatch(r.frames)
	if r.forward() == 0 {
		b.Fatal("nothing forwarded")
	}
	off, v := r.dev.lastOff, r.dev.lastCtrl // WQEs posted, not yet processed
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.dev.Write64(off, v)
	}
	b.StopTimer()
	if err := r.dev.Err(); err != nil {
		b.Fatal(err)
	}
}

// TestPhaseReport, with OVFWD_BENCH_PHASE=<runs> (e.g. 60), runs one rig
// (warm, scattered, 64 B, D = 0: the same buffers, rings and heap objects
// throughout) for that many runs of 30,000 packets and prints each run's
// driver and model-TX ns/packet: on this VM both jump together between two
// levels while the addresses stay the same (docs/mlx5.md, "the phase").
func TestPhaseReport(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("OVFWD_BENCH_PHASE"))
	if runs == 0 {
		t.Skip("set OVFWD_BENCH_PHASE=<runs> to print the phase time series")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := newRig(variant{layout: Scattered, size: 64, warm: true}, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.port.Close()
	r.run(4096)
	start := time.Now()
	var tx []float64
	var drv []float64
	for i := 0; i < runs; i++ {
		res := r.run(30000)
		if res.stalled != nil {
			t.Fatal(res.stalled)
		}
		tx, drv = append(tx, res.burstModelTx), append(drv, res.burstDriver)
		fmt.Printf("%6d ms  driver %5.1f  model-tx %5.1f ns/pkt\n", time.Since(start).Milliseconds(), res.burstDriver, res.burstModelTx)
	}
	// Split the runs at 1.3× the fastest model-TX figure.
	lo := slices.Min(tx)
	var fast, slow []float64
	for i := range tx {
		if tx[i] < 1.3*lo {
			fast = append(fast, drv[i])
		} else {
			slow = append(slow, drv[i])
		}
	}
	// Relative to the fastest run seen: a series spent wholly in the slow
	// phase has one group only (here, model-tx ≈ 8 ns/pkt is the fast one).
	for _, g := range []struct {
		name string
		x    []float64
	}{{fmt.Sprintf("model-tx < %.1f", 1.3*lo), fast}, {fmt.Sprintf("model-tx ≥ %.1f", 1.3*lo), slow}} {
		if len(g.x) > 0 {
			fmt.Printf("%s ns/pkt: %d runs, driver median %.1f ns/pkt\n", g.name, len(g.x), median(g.x))
		}
	}
}
