package fwd_test

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/lpm"
)

// hotRig is a two-port rig where port 0 receives frames endlessly (copies
// of templates) and port 1 frees whatever it sends.
func hotRig(t testing.TB, mode fwd.Mode, frames [][]byte, cfg fwd.Config) *rig {
	r := newRig(t, rigOpt{mode: mode, cfg: cfg, poolBufs: 4096})
	if mode == fwd.ModeRouter {
		must(t, r.e.SetNeighbour(1, bV4, macB))
		must(t, r.e.SetNeighbour(1, bV6, macB))
		must(t, r.e.SetNeighbour(0, aV4, macA))
		must(t, r.e.SetNeighbour(0, aV6, macA))
	}
	r.ports[0].SetRxTemplate(0, frames)
	r.ports[0].SetSink(0, true)
	r.ports[1].SetSink(0, true)
	if mode == fwd.ModeBridge { // teach the bridge both ends
		r.ports[1].Inject(0, l2(macA, macB))
		r.poll()
	}
	r.poll()
	return r
}

var hotCases = []struct {
	name   string
	mode   fwd.Mode
	frames func() [][]byte
}{
	{"RouteIPv4", fwd.ModeRouter, func() [][]byte { return [][]byte{udp4AtoB(64)} }},
	{"RouteIPv6", fwd.ModeRouter, func() [][]byte { return [][]byte{udp6AtoB(64)} }},
	{"RouteIPv4MSSClamp", fwd.ModeRouter, func() [][]byte {
		return [][]byte{eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 6, 64, true, tcpSYN(1, 2, 1460, 0)))}
	}},
	{"Bridge", fwd.ModeBridge, func() [][]byte { return [][]byte{l2(macB, macA)} }},
	{"ParseDropNotForUs", fwd.ModeRouter, func() [][]byte {
		return [][]byte{eth(macC, macA, 0x0800, ipv4(aV4, bV4, 6, 64, true, tcpSYN(1, 2, 1460, 0)))}
	}},
	{"FragmentIPv4", fwd.ModeRouter, func() [][]byte {
		return [][]byte{eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 17, 64, false, udp(1, 2, make([]byte, 1800))))}
	}},
	// Full-size TCP with a finished checksum (the check for an unfinished
	// one costs a pseudo-header sum), and with an unfinished one, which
	// the router completes (a pass over the segment).
	{"RouteIPv4TCP", fwd.ModeRouter, func() [][]byte {
		return [][]byte{eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 6, 64, true, tcpSeg(1, 2, make([]byte, 1400))))}
	}},
	{"RouteIPv4TCPCsumPartial", fwd.ModeRouter, func() [][]byte {
		return [][]byte{eth(macR0, macA, 0x0800, partial(ipv4(aV4, bV4, 6, 64, true, tcpSeg(1, 2, make([]byte, 1400)))))}
	}},
	{"TTLExceededICMP", fwd.ModeRouter, func() [][]byte { return [][]byte{udp4AtoB(1), udp6AtoB(1)} }},
	{"EchoReply", fwd.ModeRouter, func() [][]byte {
		return [][]byte{eth(macR0, macA, 0x0800, ipv4(aV4, r0v4.Addr(), 1, 5, false, icmpEcho(8, 1, 1, nil)))}
	}},
}

// The forwarding paths allocate nothing per packet (one Poll = 64 packets).
func TestPollDoesNotAllocate(t *testing.T) {
	for _, c := range hotCases {
		t.Run(c.name, func(t *testing.T) {
			r := hotRig(t, c.mode, c.frames(), fwd.Config{MSSClamp: 1300, ICMPRate: 1 << 30, ICMPBurst: 1 << 20})
			before := r.e.Stats()
			allocs := testing.AllocsPerRun(50, func() {
				r.advance(time.Millisecond)
				r.poll()
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per poll", allocs)
			}
			after := r.e.Stats()
			if after.Ports[0].RxPackets-before.Ports[0].RxPackets < 50*64 {
				t.Fatalf("polls received only %d packets", after.Ports[0].RxPackets-before.Ports[0].RxPackets)
			}
			sent := after.Ports[0].TxPackets + after.Ports[1].TxPackets - before.Ports[0].TxPackets - before.Ports[1].TxPackets
			if c.name == "ParseDropNotForUs" {
				if sent != 0 || after.Drops[fwd.DropNotForUs] == 0 {
					t.Fatal("not-for-us frames were sent")
				}
			} else if sent < 50*64 {
				t.Fatalf("only %d packets sent", sent)
			}
		})
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	frames := parseFrames()
	var p fwd.Packet
	buf := make([]byte, 2048)
	allocs := testing.AllocsPerRun(100, func() {
		for _, f := range frames {
			p = fwd.Packet{Buf: buf, Off: 128, Len: uint16(copy(buf[128:], f))}
			if fwd.Parse(&p) != fwd.DropNone {
				panic("parse failed")
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("Parse allocates %v", allocs)
	}
}

func parseFrames() [][]byte {
	return [][]byte{
		udp4AtoB(64), udp6AtoB(64),
		eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 6, 64, true, tcpSYN(1, 2, 1460, 0))),
		ethVLAN(macR0, macA, 5, 0x86dd, ipv6(aV6, bV6, 58, 64, icmpEcho(128, 1, 1, nil))),
	}
}

// threadCPU is the CPU time the calling OS thread has used. The machine
// is shared, so wall-clock ns/op includes time spent waiting for a core;
// the per-thread CPU time (cpu-ns/pkt) does not.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if syscall.Getrusage(rusageThread, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the CPU time of the whole process (GC included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pollLoop runs the benchmark loop on a locked thread and reports
// wall-clock and thread-CPU nanoseconds per packet (perPoll packets/op).
func pollLoop(b *testing.B, r *rig, perPoll int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := threadCPU()
	for b.Loop() {
		r.poll()
	}
	cpu := threadCPU() - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(perPoll), "ns/pkt")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(perPoll), "cpu-ns/pkt")
}

func BenchmarkPoll(b *testing.B) {
	for _, c := range hotCases {
		b.Run(c.name, func(b *testing.B) {
			r := hotRig(b, c.mode, c.frames(), fwd.Config{MSSClamp: 1300, ICMPRate: 1 << 30, ICMPBurst: 1 << 20})
			pollLoop(b, r, 64)
		})
	}
}

// BenchmarkPollRouteIPv4Spread is BenchmarkPoll/RouteIPv4 with every
// packet of a batch to a different host (64 hosts of the connected /24,
// each its own neighbour): no packet repeats the previous one's route or
// neighbour lookup, so this is the figure for traffic of many flows.
func BenchmarkPollRouteIPv4Spread(b *testing.B) {
	var frames [][]byte
	dsts := make([]netip.Addr, 64)
	for i := range dsts {
		dsts[i] = netip.AddrFrom4([4]byte{198, 18, 1, byte(100 + i)})
		frames = append(frames, eth(macR0, macA, 0x0800, ipv4(aV4, dsts[i], 17, 64, true, udp(1000, 2000, []byte("hello, router")))))
	}
	r := hotRig(b, fwd.ModeRouter, frames, fwd.Config{ICMPRate: 1 << 30, ICMPBurst: 1 << 20})
	for _, d := range dsts {
		must(b, r.e.SetNeighbour(1, d, macB))
	}
	r.poll()
	pollLoop(b, r, 64)
}

func BenchmarkParse(b *testing.B) {
	frames := parseFrames()
	var pk [4]fwd.Packet
	for i, f := range frames {
		buf := make([]byte, 2048)
		pk[i] = fwd.Packet{Buf: buf, Off: 128, Len: uint16(copy(buf[128:], f))}
	}
	b.ReportAllocs()
	for b.Loop() {
		for i := range pk {
			fwd.Parse(&pk[i])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4, "ns/pkt")
}

// BenchmarkLPMMillionRoutes reports the lpm package's figures for a FIB of
// 1,000,000 random IPv4 prefixes (/8–/32): build time and lookup cost.
func BenchmarkLPMMillionRoutes(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var bld lpm.V4Builder
	start := time.Now()
	for i := range 1_000_000 {
		a := rng.Uint32()
		bits := 8 + rng.IntN(25)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), bits).Masked()
		bld.Add(p, uint32(i))
	}
	tab := bld.Build()
	build := time.Since(start)
	addrs := make([][4]byte, 1<<16)
	for i := range addrs {
		a := rng.Uint32()
		addrs[i] = [4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var sink uint32
	i := 0
	for b.Loop() {
		v, _ := tab.Lookup(addrs[i&(len(addrs)-1)])
		sink += v
		i++
	}
	b.ReportMetric(build.Seconds(), "build-s")
	b.ReportMetric(float64(tab.Len()), "routes")
	_ = sink
}

// millionRoutes returns 1,000,000 distinct random IPv4 prefixes (/8–/32)
// outside 198.18.0.0/15 via B, plus 198.18.1.0/24 stays connected.
func millionRoutes() []fwd.Route {
	rng := rand.New(rand.NewPCG(5, 6))
	seen := make(map[netip.Prefix]bool, 1_000_000)
	routes := make([]fwd.Route, 0, 1_000_000)
	for len(routes) < 1_000_000 {
		a := rng.Uint32()
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), 8+rng.IntN(25)).Masked()
		if seen[p] || p.Overlaps(netip.MustParsePrefix("198.18.0.0/15")) {
			continue
		}
		seen[p] = true
		routes = append(routes, fwd.Route{Prefix: p, NextHop: fwd.NextHop{Port: 1, Via: bV4}})
	}
	return routes
}

// BenchmarkPollRouteIPv4MillionRoutes forwards through a FIB of 1 M routes
// loaded with AddRoutes (its load time is reported as load-s), to random
// destinations.
func BenchmarkPollRouteIPv4MillionRoutes(b *testing.B) {
	routes := millionRoutes()
	rng := rand.New(rand.NewPCG(7, 8))
	var frames [][]byte
	for range 256 {
		a := rng.Uint32()
		dst := netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
		if netip.MustParsePrefix("198.18.0.0/15").Contains(dst) {
			continue
		}
		frames = append(frames, eth(macR0, macA, 0x0800, ipv4(aV4, dst, 17, 64, false, udp(1, 2, nil))))
	}
	r := hotRig(b, fwd.ModeRouter, frames, fwd.Config{ICMPRate: 1 << 30, ICMPBurst: 1 << 20})
	start, cpu0 := time.Now(), processCPU()
	must(b, r.e.AddRoutes(routes))
	load, loadCPU := time.Since(start), processCPU()-cpu0
	r.poll()
	pollLoop(b, r, 64)
	b.ReportMetric(load.Seconds(), "load-s") // after pollLoop: ResetTimer clears metrics
	b.ReportMetric(loadCPU.Seconds(), "load-cpu-s")
}
