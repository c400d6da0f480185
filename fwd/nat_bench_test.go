package fwd_test

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

// natFrames are 100,000 distinct UDP flows: 100 inside hosts × 10 source
// ports × 100 remote hosts (198.19.0.0/16, routed via B).
func natFrames() [][]byte {
	var frames [][]byte
	for h := range 100 {
		src := netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + h)})
		for sp := range 10 {
			for d := range 100 {
				dst := netip.AddrFrom4([4]byte{198, 19, 0, byte(1 + d)})
				frames = append(frames, udpFrame(macA, macR0, src, dst, uint16(5000+sp), 53, "0123456789abcdef0123"))
			}
		}
	}
	return frames
}

// natHotRig forwards natFrames endlessly, with NAT on or off; with NAT on,
// every flow has its session before it returns.
func natHotRig(t testing.TB, frames [][]byte, on bool) *rig {
	r := hotRig(t, fwd.ModeRouter, frames, fwd.Config{ICMPRate: 1 << 30, ICMPBurst: 1 << 20})
	must(t, r.e.AddRoute(netip.MustParsePrefix("198.19.0.0/16"), fwd.NextHop{Port: 1, Via: bV4}))
	if on {
		setNAT(t, r.e, natConfig(false))
	}
	for range len(frames)/64 + 2 {
		r.poll()
	}
	if on {
		if s := r.e.NATStats(); s.Sessions[0]+s.Sessions[1]+s.Sessions[2] != uint64(len(frames)) {
			t.Fatalf("%d sessions, want %d (nat %+v)", s.Sessions[1], len(frames), s)
		}
	}
	// The earlier runs' rigs are garbage now: collect them here, not
	// during this run's measurement (-count runs every Route before NAT).
	runtime.GC()
	return r
}

// natPair is the same 100,000 flows on two engines, one routing them
// plainly and one through NAT with a live session each, timed in
// alternating slices of polls on one thread: the machine's memory speed
// drifts over seconds on a shared VM, and slices a few milliseconds long
// let both sides see the same drift, so their ratio is steady where two
// separate one-second runs are not.
type natPair struct {
	route, nat *rig
	// CPU and wall time and polls per side (0: route, 1: NAT).
	cpu, wall [2]time.Duration
	polls     [2]int
}

func newNATPair(t testing.TB) *natPair {
	frames := natFrames()
	p := &natPair{route: natHotRig(t, frames, false), nat: natHotRig(t, frames, true)}
	runtime.GC() // the first rig's garbage, before anything is timed
	return p
}

// natSlice is the polls of one timed slice: about 3 ms, long against the
// two clock reads around it, short against the drift.
const natSlice = 512

// run polls side i n times and adds the time it took.
func (p *natPair) run(i, n int) {
	r := p.route
	if i == 1 {
		r = p.nat
	}
	c0, w0 := threadCPU(), time.Now()
	for range n {
		r.poll()
	}
	p.wall[i] += time.Since(w0)
	p.cpu[i] += threadCPU() - c0
	p.polls[i] += n
}

// round runs one slice of each side, in the order ABBA over two rounds
// so that a trend within a pair of slices favours neither.
func (p *natPair) round(k, n int) {
	first := k & 1
	p.run(first, n)
	p.run(1-first, n)
}

func TestNATPollDoesNotAllocate(t *testing.T) {
	p := newNATPair(t)
	before := p.nat.e.NATStats().Translated
	allocs := testing.AllocsPerRun(200, func() {
		p.nat.advance(time.Millisecond)
		p.nat.poll()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per NAT poll", allocs)
	}
	if n := p.nat.e.NATStats().Translated - before; n < 200*64 {
		t.Fatalf("only %d packets translated", n)
	}
	// The benchmark's own loop: timing included, both sides.
	k, sent := 0, p.route.e.Stats().Ports[1].TxPackets
	if allocs := testing.AllocsPerRun(20, func() { p.round(k, 4); k++ }); allocs != 0 {
		t.Fatalf("%v allocations per alternating round", allocs)
	}
	if s, n := p.route.e.NATStats(), p.route.e.Stats().Ports[1].TxPackets-sent; s.Translated != 0 || n < 20*4*64 {
		t.Fatalf("route side: %d translated, %d sent", s.Translated, n)
	}
}

// BenchmarkPollNAT100kSessions: the same 100,000 flows routed plainly and
// through NAT with a live session for every flow, side by side in one
// run: an op is a poll (64 packets) of each, the two timed in
// alternating slices of natSlice polls on one locked thread. route- and
// nat-cpu-ns/pkt are the thread's CPU time per packet (the steadier figure
// on a shared machine), route- and nat-ns/pkt wall time, and nat/route
// the ratio of the CPU times.
func BenchmarkPollNAT100kSessions(b *testing.B) {
	p := newNATPair(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	for k, done := 0, 0; done < b.N; k++ {
		n := min(natSlice, b.N-done)
		p.round(k, n)
		done += n
	}
	b.StopTimer()
	per := func(d time.Duration, i int) float64 { return float64(d.Nanoseconds()) / float64(p.polls[i]*64) }
	b.ReportMetric(per(p.cpu[0], 0), "route-cpu-ns/pkt")
	b.ReportMetric(per(p.cpu[1], 1), "nat-cpu-ns/pkt")
	b.ReportMetric(per(p.wall[0], 0), "route-ns/pkt")
	b.ReportMetric(per(p.wall[1], 1), "nat-ns/pkt")
	if p.cpu[0] > 0 {
		b.ReportMetric(per(p.cpu[1], 1)/per(p.cpu[0], 0), "nat/route")
	}
}
