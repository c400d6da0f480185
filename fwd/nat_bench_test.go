package fwd_test

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
// alternating slices of polls on one locked thread. Both sides see the
// same machine: its memory speed drifts over seconds on a shared VM, and
// another thread run on this CPU mid-slice evicts caches that the
// slice then refills (NAT, with the larger working set, more). A pair of
// slices counts only when the thread ran both without a context switch
// (the steady state of a worker with a CPU to itself); the rest are
// counted as such, and nat/route-all includes them.
type natPair struct {
	route, nat *rig
	// Per side (0: route, 1: NAT), over the clean pairs: thread CPU
	// time, wall time and polls; and the CPU time over all pairs.
	cpu, wall, cpuAll [2]time.Duration
	polls, pollsAll   [2]int
	pairs, clean      int
}

func newNATPair(t testing.TB) *natPair {
	frames := natFrames()
	p := &natPair{route: natHotRig(t, frames, false), nat: natHotRig(t, frames, true)}
	runtime.GC() // the first rig's garbage, before anything is timed
	return p
}

// natSlice is the polls of one timed slice: about 1.5 ms, long against
// the clock reads around it (~2 µs), short against the drift and the
// scheduler's time slice.
const natSlice = 256

// threadClock is the calling thread's CPU time (clock_gettime, exact, where
// getrusage's lags by up to a scheduler tick) and its context switches.
func threadClock() (time.Duration, int64) {
	var ts unix.Timespec
	var ru unix.Rusage
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ts.Nano()), ru.Nvcsw + ru.Nivcsw
}

// round polls each side n times, in the order ABBA over two rounds so
// that a trend within a pair of slices favours neither.
func (p *natPair) round(k, n int) {
	var cpu, wall [2]time.Duration
	switched := false
	for j := range 2 {
		i, r := j^(k&1), p.route
		if i == 1 {
			r = p.nat
		}
		c0, s0 := threadClock()
		w0 := time.Now()
		for range n {
			r.poll()
		}
		wall[i] = time.Since(w0)
		c1, s1 := threadClock()
		cpu[i] = c1 - c0
		switched = switched || s1 != s0
	}
	p.pairs++
	for i := range 2 {
		p.cpuAll[i] += cpu[i]
		p.pollsAll[i] += n
	}
	if switched {
		return
	}
	p.clean++
	for i := range 2 {
		p.cpu[i] += cpu[i]
		p.wall[i] += wall[i]
		p.polls[i] += n
	}
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
// run (natPair): an op is a poll (64 packets) of each. route- and
// nat-cpu-ns/pkt are the thread's CPU time per packet and route- and
// nat-ns/pkt the wall time, over the slice pairs no context switch
// touched; nat/route is the ratio of the CPU times and nat-extra-ns/pkt
// their difference (what NAT adds: unlike the ratio, it does not move
// with the routing path's own cost, which the binary's code layout alone
// can shift by a fifth), clean-% the share of pairs that count,
// nat/route-all the ratio over every pair.
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
	per := func(d time.Duration, polls int) float64 { return float64(d.Nanoseconds()) / float64(polls*64) }
	b.ReportMetric(100*float64(p.clean)/float64(p.pairs), "clean-%")
	b.ReportMetric(per(p.cpuAll[1], p.pollsAll[1])/per(p.cpuAll[0], p.pollsAll[0]), "nat/route-all")
	if p.clean == 0 {
		return // no pair ran undisturbed: the clean figures would be 0/0
	}
	b.ReportMetric(per(p.cpu[0], p.polls[0]), "route-cpu-ns/pkt")
	b.ReportMetric(per(p.cpu[1], p.polls[1]), "nat-cpu-ns/pkt")
	b.ReportMetric(per(p.wall[0], p.polls[0]), "route-ns/pkt")
	b.ReportMetric(per(p.wall[1], p.polls[1]), "nat-ns/pkt")
	b.ReportMetric(per(p.cpu[1], p.polls[1])/per(p.cpu[0], p.polls[0]), "nat/route")
	b.ReportMetric(per(p.cpu[1], p.polls[1])-per(p.cpu[0], p.polls[0]), "nat-extra-ns/pkt")
}

// BenchmarkPollNATInstructions polls one side alone, route or NAT, over
// the first 1,024 of natFrames (the tables in cache), in natPollLoop: run
// under callgrind with --toggle-collect='*natPollLoop*' it counts the
// instructions a packet costs on each side, which, unlike time, do not
// move with the machine's load (docs/nat.md, Measurements).
func BenchmarkPollNATInstructions(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "route", true: "nat"}[on]
		b.Run(name, func(b *testing.B) {
			r := natHotRig(b, natFrames()[:1024], on)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			natPollLoop(r, b.N)
		})
	}
}

//go:noinline
func natPollLoop(r *rig, n int) {
	for range n {
		r.poll()
	}
}
