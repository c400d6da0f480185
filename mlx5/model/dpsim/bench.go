package dpsim

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5/dp"
)

// BenchOptions configure Bench. Zero values take the defaults.
type BenchOptions struct {
	Packets int   // packets per run; default 65536
	Runs    int   // alternated runs per variant, medians reported; default 7
	Burst   int   // frames per injection and per Rx call; default 64
	Sizes   []int // frame sizes; default 64 and 512
	// Work adds a dependent multiply chain of this many steps per packet
	// (the "rest of the stack"); default 0: a bare L2 forwarder.
	Work int
}

func (o *BenchOptions) defaults() {
	if o.Packets == 0 {
		o.Packets = 1 << 16
	}
	if o.Runs == 0 {
		o.Runs = 7
	}
	if o.Burst == 0 {
		o.Burst = 64
	}
	if len(o.Sizes) == 0 {
		o.Sizes = []int{64, 512}
	}
}

// variant is one configuration of the forwarding loop.
type variant struct {
	layout   Layout
	size     int
	dist     int
	pad      bool
	compress bool
	enhanced bool
	warm     bool // no flush: the DDIO-like control
	hold     holdMode
	adapt    bool   // adaptive prefetch (the product's default); otherwise dist in every burst
	lab      dp.Lab // receive-path variants, only in a build with -tags mlx5lab
}

// holdMode makes every packet outlive its burst: held after the MAC swap
// and sent with the next burst.
type holdMode uint8

const (
	holdNone   holdMode = iota
	holdRecord          // parked in its stride (dp.Port.Hold), rebuilt from the record (Resume)
	holdValue           // kept as a fwd.Packet value, as fwd's hold table does
)

// rig is a model port and its driver port running RX → MAC swap → TX.
type rig struct {
	v      variant
	port   *dp.Port
	dev    *Device
	frames [][]byte
	b      *fwd.Batch
	work   int
	sink   uint64
	// Per-burst ns/packet of the last run: the VM shares 2 cores with other
	// jobs, so a burst preempted midway is an outlier the median ignores.
	drvBurst, totBurst, txBurst []float64
	// held packets of the previous burst (hold variants), by mode.
	held      [fwd.MaxBatch]dp.Held
	heldVal   [fwd.MaxBatch]fwd.Packet
	heldN     int
	holdFails uint64
}

type result struct {
	// stalled: a burst moved no packet before n were forwarded.
	stalled       error
	total, driver time.Duration
	// Medians over the run's bursts of ns/packet.
	burstTotal, burstDriver float64
	// burstModelTx: the model's TX processing (Device.Process: WQE
	// parsing, segment checks, CQE writes), the same code and the same
	// L1-resident data for every variant and driver version, so it shows
	// the machine's phase: on this VM a whole run goes about 1.6× slower
	// (driver and model alike) while something outside the guest shares
	// the core (docs/mlx5.md, "the phase").
	burstModelTx float64
	packets      uint64
	nops, wqebbs uint64
	mpwqes, mpw  uint64
}

func newRig(v variant, burst, work int) (*rig, error) {
	port, dev, err := NewPort(Config{Name: "bench", PoolID: 1, Layout: v.layout, Seed: 42, Flush: !v.warm,
		DeferredTx: true, Compress: v.compress, Enhanced: v.enhanced, LogWQEs: 5, LogStrides: 6, LogSQ: 11,
		Rx: dp.RxOptions{PrefetchDistance: v.dist, FixedPrefetch: !v.adapt}, Tx: dp.TxOptions{PadToEdge: v.pad}})
	if err != nil {
		return nil, err
	}
	if err := port.Queue(0).RX.SetLab(v.lab); err != nil {
		port.Close()
		return nil, err
	}
	r := &rig{v: v, port: port, dev: dev, b: fwd.NewBatch(fwd.MaxBatch), work: work,
		drvBurst: make([]float64, 0, 1<<16), totBurst: make([]float64, 0, 1<<16), txBurst: make([]float64, 0, 1<<16)}
	r.frames = make([][]byte, burst)
	for i := range r.frames {
		r.frames[i] = benchFrame(v.size, uint16(i))
	}
	return r, nil
}

// benchFrame is an Ethernet/IPv4/UDP frame of n bytes (FCS excluded).
func benchFrame(n int, id uint16) []byte {
	f := make([]byte, n)
	copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0})
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(n-14))
	binary.BigEndian.PutUint16(ip[4:], id)
	copy(ip[12:], []byte{198, 18, 0, 1, 198, 19, 0, 1})
	var s uint32
	for i := 0; i < 20; i += 2 {
		s += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	s = s&0xFFFF + s>>16
	s = s&0xFFFF + s>>16
	binary.BigEndian.PutUint16(ip[10:], ^uint16(s))
	binary.BigEndian.PutUint16(f[34:], 4000)
	binary.BigEndian.PutUint16(f[36:], 4001)
	binary.BigEndian.PutUint16(f[38:], uint16(n-34))
	return f
}

// forward is the driver-side work for one burst: receive, swap MACs in
// place (header line only; the payload stays in the stride), transmit.
func (r *rig) forward() int {
	b := r.b
	b.Reset()
	n := r.port.Rx(0, b)
	acc := r.sink
	for i := range b.Pkts {
		d := b.Pkts[i].Data()
		swapMACs((*[12]byte)(d[:12]))
		x := acc + uint64(d[23])
		for k := 0; k < r.work; k++ {
			x = x*0x9E3779B97F4A7C15 ^ x>>29
		}
		acc = x
	}
	r.sink = acc
	if r.v.hold != holdNone {
		r.holdBurst(b)
	}
	r.port.Tx(0, b)
	return n
}

// holdBurst parks the burst's packets and puts the previous burst's back
// in b, so each packet leaves its batch and is resumed one burst later.
func (r *rig) holdBurst(b *fwd.Batch) {
	prev := r.heldN
	if r.v.hold == holdValue {
		var keep [fwd.MaxBatch]fwd.Packet
		n := copy(keep[:], b.Pkts)
		b.Pkts = append(b.Pkts[:0], r.heldVal[:prev]...)
		copy(r.heldVal[:], keep[:n])
		r.heldN = n
		return
	}
	var keep [fwd.MaxBatch]dp.Held
	n := len(b.Pkts)
	r.port.HoldBatch(0, b.Pkts, keep[:n])
	b.Pkts = b.Pkts[:prev]
	r.holdFails += uint64(prev - r.port.ResumeBatch(0, r.held[:prev], b.Pkts))
	copy(r.held[:], keep[:n])
	r.heldN = n
}

// swapMACs exchanges destination and source MAC with one 8-byte and one
// 4-byte load and store each (what a forwarder's MAC swap compiles to;
// DPDK's macswap does it with a vector shuffle).
func swapMACs(h *[12]byte) {
	a := binary.LittleEndian.Uint64(h[0:8])  // dst[0:6], src[0:2]
	c := binary.LittleEndian.Uint32(h[8:12]) // src[2:6]
	binary.LittleEndian.PutUint64(h[0:8], (a>>48|uint64(c)<<16)&(1<<48-1)|a<<48)
	binary.LittleEndian.PutUint32(h[8:12], uint32(a>>16))
}

// run moves n packets through the loop and times the driver part alone
// (Rx + swap + Tx) besides the total; model time = total − driver.
func (r *rig) run(n int) result {
	q := r.port.Queue(0)
	tx0 := q.TX.Stats
	var res result
	r.drvBurst, r.totBurst, r.txBurst = r.drvBurst[:0], r.totBurst[:0], r.txBurst[:0]
	start := time.Now()
	for res.packets < uint64(n) {
		t0 := time.Now()
		r.dev.RX[0].InjectBatch(r.frames)
		t1 := time.Now()
		got := r.forward()
		t2 := time.Now()
		r.dev.Process()
		t3 := time.Now()
		if got == 0 {
			q := r.port.Queue(0)
			res.stalled = fmt.Errorf("dpsim bench: forwarding stalled after %d of %d packets (driver RX %+v, TX %+v; model RX %+v, TX %+v)",
				res.packets, n, q.RX.Stats, q.TX.Stats, r.dev.RX[0].Stats, r.dev.TX[0].Stats)
			break
		}
		res.driver += t2.Sub(t1)
		res.packets += uint64(got)
		r.drvBurst = append(r.drvBurst, float64(t2.Sub(t1).Nanoseconds())/float64(got))
		r.totBurst = append(r.totBurst, float64(t3.Sub(t0).Nanoseconds())/float64(got))
		r.txBurst = append(r.txBurst, float64(t3.Sub(t2).Nanoseconds())/float64(got))
	}
	res.total = time.Since(start)
	if len(r.drvBurst) > 0 {
		res.burstDriver = medianInPlace(r.drvBurst)
		res.burstTotal = medianInPlace(r.totBurst)
		res.burstModelTx = medianInPlace(r.txBurst)
	}
	tx := q.TX.Stats
	res.nops = tx.NOPs - tx0.NOPs
	res.wqebbs = tx.WQEBBs - tx0.WQEBBs
	res.mpwqes = tx.MPWQEs - tx0.MPWQEs
	res.mpw = tx.MPWPackets - tx0.MPWPackets
	return res
}

// measure runs every rig o.Runs times, rotating the order each round
// (A B C, B C A, …), after one warm-up run each.
// A stalled run fails the measurement: its ns/packet would describe
// packets that never moved.
func measure(rigs []*rig, o BenchOptions) ([][]result, error) {
	out := make([][]result, len(rigs))
	for _, r := range rigs {
		if res := r.run(o.Packets / 4); res.stalled != nil {
			return nil, res.stalled
		}
	}
	for round := 0; round < o.Runs; round++ {
		for k := range rigs {
			i := (k + round) % len(rigs)
			runtime.Gosched()
			res := rigs[i].run(o.Packets)
			if res.stalled != nil {
				return nil, res.stalled
			}
			out[i] = append(out[i], res)
		}
	}
	return out, nil
}

type summary struct {
	ns, drvNs, modelNs float64
	modelTxNs          float64 // the phase indicator (result.burstModelTx)
	nopsPerSec         float64
	nopsPerKpkt        float64
	wqebbsPerPkt       float64
	pktsPerMPW         float64
	packets            uint64
}

func medianInPlace(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func summarize(rs []result) summary {
	var ns, drv, mdl, mtx, nops, nopk, wq, mpw []float64
	var pk uint64
	for _, r := range rs {
		p := float64(r.packets)
		ns = append(ns, r.burstTotal)
		drv = append(drv, r.burstDriver)
		mdl = append(mdl, r.burstTotal-r.burstDriver)
		mtx = append(mtx, r.burstModelTx)
		nops = append(nops, float64(r.nops)/r.total.Seconds())
		nopk = append(nopk, 1000*float64(r.nops)/p)
		wq = append(wq, float64(r.wqebbs)/p)
		if r.mpwqes > 0 {
			mpw = append(mpw, float64(r.mpw)/float64(r.mpwqes))
		} else {
			mpw = append(mpw, 0)
		}
		pk += r.packets
	}
	return summary{ns: median(ns), drvNs: median(drv), modelNs: median(mdl), modelTxNs: median(mtx), nopsPerSec: median(nops),
		nopsPerKpkt: median(nopk), wqebbsPerPkt: median(wq), pktsPerMPW: median(mpw), packets: pk}
}

func closeRigs(rigs []*rig) {
	for _, r := range rigs {
		r.port.Close()
	}
}

func buildRigs(vs []variant, o BenchOptions) ([]*rig, error) {
	var rigs []*rig
	for _, v := range vs {
		r, err := newRig(v, o.Burst, o.Work)
		if err != nil {
			closeRigs(rigs)
			return nil, err
		}
		rigs = append(rigs, r)
	}
	return rigs, nil
}

func pct(base, x float64) string { return fmt.Sprintf("%+.0f%%", (base/x-1)*100) }

// Bench prints the data-path tables: prefetch off vs on (both layouts),
// per-RQ context vs fresh context (lab build only), NOP padding vs edge reuse, CQE compression
// off vs on — each group measured side by side in alternated runs on the
// model with flushed (no-DDIO) DMA. "total" includes the model's cost
// (writing and flushing packets and CQEs, reading TX WQEs); "driver" is
// Rx + MAC swap + Tx alone.
func Bench(w io.Writer, o BenchOptions) error {
	o.defaults()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fmt.Fprintf(w, "mlx5 data path on the device model: RX → MAC swap → TX, flushed DMA (non-temporal writes + CLFLUSHOPT), burst %d, %d packets/run, median of %d alternated runs, work %d\n",
		o.Burst, o.Packets, o.Runs, o.Work)
	if !canFlush || !havePrefetch() {
		fmt.Fprintln(w, "note: this architecture has no flush/prefetch assembly; figures show no-DDIO effects only on amd64")
	}

	// 1. Prefetch off vs on, both layouts.
	fmt.Fprintln(w, "\n## Stride-ahead prefetch (D = 0 off, D = 4 with shinfo PREFETCHW, A = D 4 adaptive: the product's default)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layout\tDMA\tsize\tD=0 ns/pkt\tD=4 ns/pkt\tgain\tD=0 Mpps\tD=4 Mpps\tD=0 driver ns\tD=4 driver ns\tdriver gain\tA driver ns\tA prefetch-off bursts\tmodel TX ns D=0 / D=4 / A\t")
	for _, warm := range []bool{false, true} {
		for _, layout := range []Layout{Contiguous, Scattered} {
			for _, size := range o.Sizes {
				rigs, err := buildRigs([]variant{{layout: layout, size: size, warm: warm}, {layout: layout, size: size, dist: 4, warm: warm},
					{layout: layout, size: size, dist: 4, warm: warm, adapt: true}}, o)
				if err != nil {
					return err
				}
				res, err := measure(rigs, o)
				st := rigs[2].port.Queue(0).RX.Stats
				closeRigs(rigs)
				if err != nil {
					return err
				}
				a, b, c := summarize(res[0]), summarize(res[1]), summarize(res[2])
				off := float64(st.PrefetchOffBursts) / float64(max(st.Packets, 1)) * float64(o.Burst)
				dma := "flushed"
				if warm {
					dma = "warm"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t%s\t%.2f\t%.2f\t%.1f\t%.1f\t%s\t%.1f\t%.0f%%\t%.0f / %.0f / %.0f\t\n", layout, dma, size, a.ns, b.ns, pct(a.ns, b.ns),
					1e3/a.ns, 1e3/b.ns, a.drvNs, b.drvNs, pct(a.drvNs, b.drvNs), c.drvNs, off*100, a.modelTxNs, b.modelTxNs, c.modelTxNs)
			}
		}
	}
	tw.Flush()

	// 2. Per-RQ context vs a fresh context per CQE: the fresh variant
	// exists only in a lab build (dp.Lab).
	if dp.LabBuild {
		fmt.Fprintln(w, "\n## Packet context: one per RQ reused vs zeroed per CQE (scattered layout)")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "size\tD\treuse driver ns\tfresh driver ns\tfresh cost\treuse total ns\tfresh total ns\t")
		for _, size := range o.Sizes {
			for _, d := range []int{0, 4} {
				rigs, err := buildRigs([]variant{{layout: Scattered, size: size, dist: d},
					{layout: Scattered, size: size, dist: d, lab: dp.Lab{FreshContext: true}}}, o)
				if err != nil {
					return err
				}
				res, err := measure(rigs, o)
				closeRigs(rigs)
				if err != nil {
					return err
				}
				a, b := summarize(res[0]), summarize(res[1])
				fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.1f\t%s\t%.1f\t%.1f\t\n", size, d, a.drvNs, b.drvNs, pct(b.drvNs, a.drvNs), a.ns, b.ns)
			}
		}
		tw.Flush()
	}

	// 3. TX: NOP padding vs fragment-edge reuse.
	fmt.Fprintln(w, "\n## TX eMPWQE: NOP padding to the fragment edge vs a smaller MPWQE in the remaining room (contiguous, D=4)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tpolicy\tNOPs/s\tNOPs/1000 pkts\tWQEBBs/pkt\tpkts/MPWQE\tdriver ns/pkt\ttotal ns/pkt\t")
	for _, size := range o.Sizes {
		rigs, err := buildRigs([]variant{{size: size, dist: 4, pad: true}, {size: size, dist: 4}}, o)
		if err != nil {
			return err
		}
		res, err := measure(rigs, o)
		closeRigs(rigs)
		if err != nil {
			return err
		}
		for i, name := range []string{"pad", "edge-reuse"} {
			s := summarize(res[i])
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.1f\t%.4f\t%.1f\t%.1f\t%.1f\t\n", size, name, s.nopsPerSec, s.nopsPerKpkt, s.wqebbsPerPkt, s.pktsPerMPW, s.drvNs, s.ns)
		}
	}
	tw.Flush()

	// 4. CQE compression.
	fmt.Fprintln(w, "\n## CQE compression (CSUM_STRIDX minis; scattered, D=4)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\toff driver ns\tbasic driver ns\tenhanced driver ns\toff total ns\tbasic total ns\tenhanced total ns\t")
	for _, size := range o.Sizes {
		rigs, err := buildRigs([]variant{{layout: Scattered, size: size, dist: 4},
			{layout: Scattered, size: size, dist: 4, compress: true},
			{layout: Scattered, size: size, dist: 4, compress: true, enhanced: true}}, o)
		if err != nil {
			return err
		}
		res, err := measure(rigs, o)
		closeRigs(rigs)
		if err != nil {
			return err
		}
		a, b, e := summarize(res[0]), summarize(res[1]), summarize(res[2])
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", size, a.drvNs, b.drvNs, e.drvNs, a.ns, b.ns, e.ns)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nEach figure: median over runs of the median over bursts of ns/packet (robust to preemption on this shared VM).")
	fmt.Fprintln(w, "model TX ns: the model's TX processing per packet, the same work in every row; on a shared VM it shows the machine's phase (about 8 ns here when nothing outside the guest shares the core, 13-16 when something does, and then every figure of the row is about 1.6x higher).")
	fmt.Fprintln(w, "total includes the model (packet write + CLFLUSHOPT, CQE writes + flush, TX WQE parsing and segment checks); driver = Rx + MAC swap + Tx alone, i.e. total with the model's cost subtracted.")
	return nil
}
