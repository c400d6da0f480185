package fwd_test

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkPollACL: the same packets (UDP over IPv4 and IPv6, allowed by
// the last rule of their list) routed plainly and through an ACL of
// 1,000 rules, side by side in one run (natPair's alternating slices):
// in 50 lists of 20 (the port's list is one of them) and in one list of
// 1,000; two flows (every packet after the first two found in the
// worker's decision cache) and, Spread, 8,192 (a packet's key is never
// in the cache: the search's cost with the cache's on top). acl/route is the ratio of the thread CPU times per packet over
// the slices no context switch touched, acl-extra-ns/pkt their
// difference.
func BenchmarkPollACL(b *testing.B) {
	for _, c := range []struct {
		name       string
		lists, per int
		frames     func() [][]byte
	}{{"50x20", 50, 20, aclFrames}, {"1x1000", 1, 1000, aclFrames},
		{"50x20Spread", 50, 20, aclSpreadFrames}, {"1x1000Spread", 1, 1000, aclSpreadFrames}} {
		b.Run(c.name, func(b *testing.B) {
			p := &natPair{route: aclHotRig(b, c.frames(), nil), nat: aclHotRig(b, c.frames(), benchRules(c.lists, c.per))}
			runtime.GC()
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
			b.ReportMetric(per(p.cpuAll[1], p.pollsAll[1])/per(p.cpuAll[0], p.pollsAll[0]), "acl/route-all")
			if p.clean == 0 {
				return
			}
			b.ReportMetric(per(p.cpu[0], p.polls[0]), "route-cpu-ns/pkt")
			b.ReportMetric(per(p.cpu[1], p.polls[1]), "acl-cpu-ns/pkt")
			b.ReportMetric(per(p.cpu[1], p.polls[1])/per(p.cpu[0], p.polls[0]), "acl/route")
			b.ReportMetric(per(p.cpu[1], p.polls[1])-per(p.cpu[0], p.polls[0]), "acl-extra-ns/pkt")
		})
	}
}

// BenchmarkPollACLInstructions polls one side alone (route, or the
// 50x20 ACL) in aclPollLoop: under callgrind with
// --toggle-collect='*aclPollLoop*' it counts each side's instructions
// (docs/acl.md, Measurements).
func BenchmarkPollACLInstructions(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "route", true: "acl"}[on]
		b.Run(name, func(b *testing.B) {
			rules := benchRules(50, 20)
			if !on {
				rules = nil
			}
			r := aclHotRig(b, aclFrames(), rules)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			aclPollLoop(r, b.N)
		})
	}
}

//go:noinline
func aclPollLoop(r *rig, n int) {
	for range n {
		r.poll()
	}
}

// aclSpreadFrames are 8,192 UDP flows, half IPv4, half IPv6: eight times
// the decision cache, each seen once in 8,192 packets.
func aclSpreadFrames() [][]byte {
	var out [][]byte
	for i := range 4096 {
		out = append(out, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 17, 64, true, udp(uint16(10000+i), 2000, []byte("spread")))),
			eth(macR0, macA, 0x86dd, ipv6(aV6, bV6, 17, 64, udp(uint16(10000+i), 2000, []byte("spread")))))
	}
	return out
}
