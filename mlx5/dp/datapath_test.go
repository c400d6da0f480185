package dp_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/model/dpsim"
)

// frame builds an Ethernet/IPv4/UDP frame of n bytes whose payload encodes
// seq, so order and content can be checked at the sink.
func frame(n int, seq uint32, r *rand.Rand) []byte {
	f := make([]byte, n)
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 0xbb})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 0xaa})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(n-14))
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], []byte{198, 18, 0, 1})
	copy(ip[16:20], []byte{198, 19, 0, 1})
	var s uint32
	for i := 0; i < 20; i += 2 {
		s += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(s))
	binary.BigEndian.PutUint16(f[34:], 4000)
	binary.BigEndian.PutUint16(f[36:], 5000)
	binary.BigEndian.PutUint16(f[38:], uint16(n-34))
	for i := 42; i < n; i++ {
		f[i] = byte(r.Uint32())
	}
	if n >= 46 {
		binary.BigEndian.PutUint32(f[42:], seq)
	}
	return f
}

type loopCfg struct {
	compress, pad, fragCheck bool
	enhanced                 bool
	miniFmt                  uint8
	minInline                int
	logStrides, logWQEs      uint8
	logSQ                    uint8
	seed                     uint64
	rounds                   int
	deferred                 bool
	maxBurst                 int
}

type loopResult struct {
	sent   [][]byte // what the sink got, in order
	rxLens []uint16
	rx     dp.RxStats
	tx     dp.TxStats
	model  dpsim.TxStats
}

// runLoop injects random-sized bursts, receives them with the driver,
// forwards every packet back out of the same port and records what the
// model transmitted.
func runLoop(t *testing.T, c loopCfg) (loopResult, [][]byte) {
	t.Helper()
	var res loopResult
	port, dev, err := dpsim.NewPort(dpsim.Config{
		Name: "sim0", PoolID: 7, Compress: c.compress, Enhanced: c.enhanced, MiniFormat: c.miniFmt, MinInline: c.minInline,
		LogStrides: c.logStrides, LogWQEs: c.logWQEs, LogSQ: c.logSQ, Spare: 16,
		FragmentCheck: c.fragCheck, DeferredTx: c.deferred,
		Tx: dp.TxOptions{PadToEdge: c.pad, CompletionEvery: 8},
		Rx: dp.RxOptions{PrefetchDistance: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	dev.TX[0].Sink = func(f []byte) { res.sent = append(res.sent, bytes.Clone(f)) }
	if c.compress && !c.enhanced {
		dev.RX[0].PoisonHoles = true
	}
	r := rand.New(rand.NewPCG(c.seed, 1))
	var injected [][]byte
	b := fwd.NewBatch(fwd.MaxBatch)
	seq := uint32(0)
	for round := 0; round < c.rounds; round++ {
		ls, lw := c.logStrides, c.logWQEs
		if ls == 0 {
			ls = 6
		}
		if lw == 0 {
			lw = 4
		}
		// Up to one burst is held until its TX completion is reaped, and
		// partly used WQEs waste strides: stay below what never drops.
		capacity := 1<<(ls+lw) - 2<<ls
		mb := c.maxBurst
		if mb == 0 {
			mb = 100
		}
		burst := 1 + r.IntN(min(mb, capacity/2))
		frames := make([][]byte, burst)
		size := 60 + r.IntN(1455)
		for i := range frames {
			if r.IntN(3) == 0 { // runs of equal sizes, then random ones
				size = 60 + r.IntN(1455)
			}
			frames[i] = frame(size, seq, r)
			seq++
		}
		injected = append(injected, frames...)
		dev.RX[0].InjectBatch(frames)
		for {
			b.Reset()
			n := port.Rx(0, b)
			if n == 0 {
				break
			}
			for i := range b.Pkts {
				res.rxLens = append(res.rxLens, b.Pkts[i].Len)
			}
			port.Tx(0, b)
			if c.deferred {
				dev.Process()
			}
		}
		if err := dev.Err(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	// Drain completions so every buffer comes back.
	for i := 0; i < 4; i++ {
		b.Reset()
		port.Tx(0, b)
		dev.Process()
	}
	q := port.Queue(0)
	res.rx, res.tx, res.model = q.RX.Stats, q.TX.Stats, dev.TX[0].Stats
	return res, injected
}

func checkDelivered(t *testing.T, res loopResult, injected [][]byte, dropsAllowed bool) {
	t.Helper()
	if !dropsAllowed && len(res.sent) != len(injected) {
		t.Fatalf("sent %d frames, injected %d (rx %+v tx %+v)", len(res.sent), len(injected), res.rx, res.tx)
	}
	for i := range res.sent {
		if !bytes.Equal(res.sent[i], injected[i]) {
			t.Fatalf("frame %d differs: got %d bytes, want %d", i, len(res.sent[i]), len(injected[i]))
		}
	}
}

func TestLoopPropertyManyWraps(t *testing.T) {
	for _, c := range []loopCfg{
		{seed: 1, rounds: 400},
		{seed: 2, rounds: 400, compress: true},
		{seed: 3, rounds: 400, pad: true},
		{seed: 4, rounds: 300, minInline: 18},
		{seed: 5, rounds: 400, logStrides: 3, logWQEs: 3, logSQ: 6, compress: true},
		{seed: 6, rounds: 400, logStrides: 4, logWQEs: 5, deferred: true},
		{seed: 7, rounds: 400, compress: true, enhanced: true},
		{seed: 8, rounds: 600, logStrides: 3, logWQEs: 3, logSQ: 6, compress: true, enhanced: true},
		{seed: 9, rounds: 300, compress: true, miniFmt: dp.MiniFmtCSUM},
		{seed: 10, rounds: 300, compress: true, enhanced: true, miniFmt: dp.MiniFmtCSUM},
	} {
		c.fragCheck = true
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			res, inj := runLoop(t, c)
			checkDelivered(t, res, inj, false)
			wraps := res.tx.WQEBBs / uint64(1<<max(c.logSQ, 10)>>0)
			if c.logSQ != 0 {
				wraps = res.tx.WQEBBs >> c.logSQ
			}
			if wraps < 3 {
				t.Errorf("SQ wrapped only %d times", wraps)
			}
			if c.compress && res.rx.CompSessions == 0 {
				t.Error("no compressed session was exercised")
			}
			if res.rx.PrefetchExact == 0 {
				t.Error("prefetch never aimed")
			}
			if !c.pad && c.minInline == 0 && (res.tx.NOPs != 0 || res.model.NOPs != 0) {
				t.Errorf("edge reuse posted %d NOPs (model saw %d)", res.tx.NOPs, res.model.NOPs)
			}
			if c.pad && res.tx.NOPs == 0 {
				t.Error("padding policy never padded")
			}
			if c.minInline > 0 && res.tx.SendWQEs == 0 {
				t.Error("no SEND WQE with inline headers")
			}
			if res.tx.Packets != uint64(len(inj)) || res.model.Packets != uint64(len(inj)) {
				t.Errorf("packets: driver %d, model %d, want %d", res.tx.Packets, res.model.Packets, len(inj))
			}
			t.Logf("rx %+v", res.rx)
			t.Logf("tx %+v", res.tx)
		})
	}
}

// TestCompressedEqualsUncompressed: the same traffic through a compressing
// and a non-compressing CQ gives the driver the same packets, byte for byte.
func TestCompressedEqualsUncompressed(t *testing.T) {
	a, injA := runLoop(t, loopCfg{seed: 11, rounds: 300})
	b, injB := runLoop(t, loopCfg{seed: 11, rounds: 300, compress: true})
	e, injE := runLoop(t, loopCfg{seed: 11, rounds: 300, compress: true, enhanced: true})
	checkDelivered(t, e, injE, false)
	if e.rx.CompSessions == 0 || len(e.rxLens) != len(a.rxLens) {
		t.Fatalf("enhanced: %d blocks, %d packets vs %d", e.rx.CompSessions, len(e.rxLens), len(a.rxLens))
	}
	for i := range a.rxLens {
		if a.rxLens[i] != e.rxLens[i] {
			t.Fatalf("enhanced packet %d: length %d vs %d", i, e.rxLens[i], a.rxLens[i])
		}
	}
	checkDelivered(t, a, injA, false)
	checkDelivered(t, b, injB, false)
	if b.rx.CompSessions == 0 || b.rx.CompPackets < uint64(len(injB))/2 {
		t.Fatalf("compression barely exercised: %d sessions, %d packets", b.rx.CompSessions, b.rx.CompPackets)
	}
	if b.rx.CQEs >= a.rx.CQEs && false {
		t.Fatal("unreachable")
	}
	if len(a.rxLens) != len(b.rxLens) {
		t.Fatalf("driver saw %d vs %d packets", len(a.rxLens), len(b.rxLens))
	}
	for i := range a.rxLens {
		if a.rxLens[i] != b.rxLens[i] {
			t.Fatalf("packet %d: length %d vs %d", i, a.rxLens[i], b.rxLens[i])
		}
	}
	for i := range a.sent {
		if !bytes.Equal(a.sent[i], b.sent[i]) {
			t.Fatalf("frame %d differs between compressed and uncompressed runs", i)
		}
	}
}

// TestSQCounterWrap runs more than 65536 WQEBBs through a small SQ (16-bit
// wqe_index and doorbell-record wrap) with one-WQEBB SEND WQEs.
func TestSQCounterWrap(t *testing.T) {
	res, inj := runLoop(t, loopCfg{seed: 12, rounds: 1500, minInline: 18, logSQ: 7, fragCheck: true, maxBurst: 90})
	checkDelivered(t, res, inj, false)
	if res.tx.WQEBBs <= 1<<16 {
		t.Fatalf("only %d WQEBBs posted", res.tx.WQEBBs)
	}
}

// TestOversizeAndFiller: frames longer than the driver's frame limit (the
// port lets them through) are dropped and counted; when one does not fit the
// rest of a WQE the device closes the WQE with a filler CQE; the good frames
// around them still arrive in order, byte-exact.
func TestOversizeAndFiller(t *testing.T) {
	port, dev, err := dpsim.NewPort(dpsim.Config{PoolID: 1, Spare: 8, FragmentCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	dev.RX[0].MaxFrame = 4000 // the port accepts more than the driver's 1522
	var got [][]byte
	dev.TX[0].Sink = func(f []byte) { got = append(got, bytes.Clone(f)) }
	r := rand.New(rand.NewPCG(13, 1))
	var want [][]byte
	b := fwd.NewBatch(fwd.MaxBatch)
	for round := 0; round < 200; round++ {
		var frames [][]byte
		for i := 0; i < 1+r.IntN(20); i++ {
			if r.IntN(4) == 0 {
				frames = append(frames, frame(2100+r.IntN(1800), 0, r)) // 2 strides
				continue
			}
			f := frame(60+r.IntN(1400), uint32(len(want)), r)
			want = append(want, f)
			frames = append(frames, f)
		}
		dev.RX[0].InjectBatch(frames)
		b.Reset()
		port.Rx(0, b)
		port.Tx(0, b)
	}
	st := port.Queue(0).RX.Stats
	if st.Oversize == 0 || st.FillerCQEs == 0 {
		t.Fatalf("oversize %d, filler %d: not exercised", st.Oversize, st.FillerCQEs)
	}
	if dev.RX[0].Stats.OutOfBuffer != 0 {
		t.Fatalf("model ran out of buffers: %+v", dev.RX[0].Stats)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
}

// TestPortAllocFree: spare buffers are lent, sent and come back; freed RX
// buffers let the RQ repost its WQEs.
func TestPortAllocFree(t *testing.T) {
	port, dev, err := dpsim.NewPort(dpsim.Config{PoolID: 3, Spare: 4, LogWQEs: 2, LogStrides: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	var got [][]byte
	dev.TX[0].Sink = func(f []byte) { got = append(got, bytes.Clone(f)) }
	b := fwd.NewBatch(8)
	if n := port.Alloc(0, b, 8); n != 4 {
		t.Fatalf("Alloc lent %d of 4 spares", n)
	}
	r := rand.New(rand.NewPCG(1, 1))
	f := frame(100, 1, r)
	for i := range b.Pkts {
		p := &b.Pkts[i]
		if p.Off != fwd.Headroom || p.Len != 0 || p.Pool != 3 {
			t.Fatalf("lent packet %+v", p)
		}
		copy(p.Buf[p.Off:], f)
		p.Len = uint16(len(f))
	}
	port.Tx(0, b)
	if len(got) != 4 || !bytes.Equal(got[3], f) {
		t.Fatalf("sent %d frames", len(got))
	}
	port.Tx(0, b) // reaps the completion
	if n := port.Alloc(0, b, 8); n != 4 {
		t.Fatalf("after completion Alloc lent %d, want 4", n)
	}
	port.Free(0, b)
	// 4 WQEs × 8 strides: receive and free 3 rounds of 32 frames; without
	// reposting the fourth round would find no WQE.
	for round := 0; round < 4; round++ {
		frames := make([][]byte, 32)
		for i := range frames {
			frames[i] = f
		}
		dev.RX[0].InjectBatch(frames)
		b2 := fwd.NewBatch(64)
		if n := port.Rx(0, b2); n != 32 {
			t.Fatalf("round %d: received %d of 32 (model %+v)", round, n, dev.RX[0].Stats)
		}
		port.Free(0, b2)
	}
}

// TestPrefetchTailGuess: with more completions queued than fit one batch,
// the last N packets of a batch prefetch guessed strides of the next ones,
// never past the WQE end; delivery stays exact.
func TestPrefetchTailGuess(t *testing.T) {
	port, dev, err := dpsim.NewPort(dpsim.Config{PoolID: 4, Rx: dp.RxOptions{PrefetchDistance: 4, FixedPrefetch: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	var got [][]byte
	dev.TX[0].Sink = func(f []byte) { got = append(got, bytes.Clone(f)) }
	r := rand.New(rand.NewPCG(5, 5))
	var want [][]byte
	b := fwd.NewBatch(24) // 24 does not divide 64 strides: some guesses leave the WQE
	for round := 0; round < 50; round++ {
		frames := make([][]byte, 200)
		for i := range frames {
			frames[i] = frame(200, uint32(len(want)), r)
			want = append(want, frames[i])
		}
		dev.RX[0].InjectBatch(frames)
		for {
			b.Reset()
			if port.Rx(0, b) == 0 {
				break
			}
			port.Tx(0, b)
		}
	}
	st := port.Queue(0).RX.Stats
	if st.PrefetchGuess == 0 || st.PrefetchSkippedWQEnd == 0 || st.PrefetchExact == 0 {
		t.Fatalf("prefetch paths not all taken: %+v", st)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
}

// forwardOneBurst receives burst random frames through a model port with
// prefetch distance dist (and the Lab variants given), sends them back out,
// checks every frame left unchanged and returns the RX counters.
func forwardOneBurst(t *testing.T, dist, burst int, lab dp.Lab, seed uint64) dp.RxStats {
	t.Helper()
	port, dev, err := dpsim.NewPort(dpsim.Config{PoolID: 4, Rx: dp.RxOptions{PrefetchDistance: dist, FixedPrefetch: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	if err := port.Queue(0).RX.SetLab(lab); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	dev.TX[0].Sink = func(f []byte) { got = append(got, bytes.Clone(f)) }
	r := rand.New(rand.NewPCG(seed, uint64(dist)))
	frames := make([][]byte, burst)
	for i := range frames {
		frames[i] = frame(60+i, uint32(i), r)
	}
	dev.RX[0].InjectBatch(frames)
	b := fwd.NewBatch(burst)
	if n := port.Rx(0, b); n != burst {
		t.Fatalf("dist %d burst %d: received %d", dist, burst, n)
	}
	port.Tx(0, b)
	if len(got) != burst {
		t.Fatalf("dist %d burst %d: sent %d frames", dist, burst, len(got))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("dist %d burst %d: frame %d differs", dist, burst, i)
		}
	}
	return port.Queue(0).RX.Stats
}

// TestPrefetchShinfoEarly: inside a burst, the shinfo lines of the group
// after the one whose headers are prefetched are asked for (for write) a
// group early — every packet from N+8 on, none with prefetch off — and
// delivery stays exact.
func TestPrefetchShinfoEarly(t *testing.T) {
	for _, c := range []struct{ dist, burst, want int }{
		{4, 64, 64 - 4 - 8},
		{8, 64, 64 - 8 - 8},
		{4, 10, 0}, // the group after N … N+7 lies past the burst
		{0, 64, 0},
	} {
		if st := forwardOneBurst(t, c.dist, c.burst, dp.Lab{}, 7); st.PrefetchShinfoEarly != uint64(c.want) {
			t.Errorf("%+v: %d shinfo lines prefetched early, want %d", c, st.PrefetchShinfoEarly, c.want)
		}
	}
}

// TestPrefetchL2: with prefetch on, every packet of a burst past the first
// N is prefetched into L2 as its CQE is decoded (none with prefetch off),
// and delivery stays exact.
func TestPrefetchL2(t *testing.T) {
	for _, c := range []struct{ dist, burst, want int }{
		{4, 64, 64 - 4},
		{8, 64, 64 - 8},
		{4, 21, 21 - 4}, // a partial last group
		{4, 3, 0},       // the whole burst is the head
		{0, 64, 0},
	} {
		if st := forwardOneBurst(t, c.dist, c.burst, dp.Lab{}, 9); st.PrefetchL2 != uint64(c.want) {
			t.Errorf("%+v: %d packets prefetched into L2, want %d", c, st.PrefetchL2, c.want)
		}
	}
}
