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

func TestNATPollDoesNotAllocate(t *testing.T) {
	r := natHotRig(t, natFrames(), true)
	before := r.e.NATStats().Translated
	allocs := testing.AllocsPerRun(200, func() {
		r.advance(time.Millisecond)
		r.poll()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per poll", allocs)
	}
	if n := r.e.NATStats().Translated - before; n < 200*64 {
		t.Fatalf("only %d packets translated", n)
	}
}

// BenchmarkPollNAT100kSessions: the same 100,000 flows routed plainly and
// through NAT with a live session each, in one run (benchstat or the
// ns/pkt columns side by side give the NAT cost).
func BenchmarkPollNAT100kSessions(b *testing.B) {
	frames := natFrames()
	for _, c := range []struct {
		name string
		on   bool
	}{{"Route", false}, {"NAT", true}} {
		b.Run(c.name, func(b *testing.B) {
			r := natHotRig(b, frames, c.on)
			pollLoop(b, r, 64)
		})
	}
}
