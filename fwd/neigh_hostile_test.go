package fwd_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

// resolveB sends A's packet to B, answers the ARP request from B and
// checks the packet left for B.
func resolveB(t *testing.T, r *rig) {
	t.Helper()
	r.inject(0, udp4AtoB(64))
	r.poll()
	r.drainOne(1) // broadcast request
	r.inject(1, eth(macR1, macB, 0x0806, arp(2, macB, bV4, macR1, r1v4.Addr())))
	r.poll()
	if f := parseEth(t, r.drainOne(1)); !bytes.Equal(f.dst, macB) {
		t.Fatalf("held packet to %v", f.dst)
	}
	r.e.Service()
}

func macN(i int) net.HardwareAddr { return net.HardwareAddr{0x02, 0xee, 0, 0, byte(i >> 8), byte(i)} }

// sendsTo routes one packet A→B and returns the destination MAC it left
// with (nil: it was held).
func sendsTo(t *testing.T, r *rig) net.HardwareAddr {
	t.Helper()
	r.inject(0, udp4AtoB(64))
	r.poll()
	var dst net.HardwareAddr
	for _, f := range r.drain(1) {
		if p := parseEth(t, f); p.etype == 0x0800 {
			dst = p.dst
		}
	}
	return dst
}

// A storm of gratuitous ARP (requests and replies, for B's address, from
// 200 rotating MACs) moves nothing: B's confirmed entry keeps B's MAC,
// traffic keeps going to B, no move is reported to the control plane
// (which would mirror it into the kernel), and B answering the probes the
// storm provokes keeps its entry.
func TestGratuitousARPStormMovesNothing(t *testing.T) {
	r := newRig(t, rigOpt{})
	resolveB(t, r)
	r.e.Events(nil)
	for i := range 200 {
		op := uint16(1 + i%2)
		r.inject(1, eth(bcast, macN(i), 0x0806, arp(op, macN(i), bV4, bcast, bV4)))
		if i%20 == 19 {
			r.poll()
			r.e.Service()
			r.advance(10 * time.Millisecond)
			if dst := sendsTo(t, r); !bytes.Equal(dst, macB) {
				t.Fatalf("after %d gratuitous ARPs traffic for B goes to %v", i+1, dst)
			}
		}
	}
	r.poll()
	r.e.Service()
	for _, ev := range r.e.Events(nil) {
		t.Errorf("storm made an event: %+v", ev)
	}
	if s := r.e.Stats(); s.NeighRefused < 200 {
		t.Errorf("neighbour_refused %d, want ≥ 200", s.NeighRefused)
	}
	// B's entry lives its normal life: traffic in its last seconds sends
	// B a unicast probe, B answers, and the entry goes on.
	r.advance(26 * time.Second)
	r.inject(0, udp4AtoB(64))
	r.poll()
	var probed bool
	for _, f := range r.drain(1) {
		if p := parseEth(t, f); p.etype == 0x0806 && bytes.Equal(p.dst, macB) {
			probed = true
		}
	}
	if !probed {
		t.Fatal("no unicast refresh probe to B")
	}
	r.inject(1, eth(macR1, macB, 0x0806, arp(2, macB, bV4, macR1, r1v4.Addr())))
	r.poll()
	r.e.Service()
	r.advance(20 * time.Second)
	r.e.Service()
	if dst := sendsTo(t, r); !bytes.Equal(dst, macB) {
		t.Fatalf("B's entry lapsed though B answered: traffic to %v", dst)
	}
	r.checkNoLeak()
}

// A host that really moved (new MAC, the old one silent) is taken once
// the cached entry lapses: the claim alone moves nothing.
func TestNeighbourMoveAfterProbeCycle(t *testing.T) {
	r := newRig(t, rigOpt{})
	resolveB(t, r)
	r.e.Events(nil)
	r.inject(1, eth(bcast, macC, 0x0806, arp(1, macC, bV4, bcast, bV4)))
	r.poll()
	r.e.Service()
	if ev := r.e.Events(nil); len(ev) != 0 {
		t.Fatalf("a gratuitous ARP moved a confirmed entry: %+v", ev)
	}
	r.advance(31 * time.Second) // past NeighReachable, B silent
	r.e.Service()
	if ev := r.e.Events(nil); len(ev) != 1 || ev[0].Kind != fwd.EventNeighbourExpired {
		t.Fatalf("events %+v, want B's entry expired", ev)
	}
	r.inject(0, udp4AtoB(64))
	r.poll()
	r.drainOne(1) // broadcast request
	r.inject(1, eth(macR1, macC, 0x0806, arp(2, macC, bV4, macR1, r1v4.Addr())))
	r.poll()
	if f := parseEth(t, r.drainOne(1)); !bytes.Equal(f.dst, macC) {
		t.Fatalf("after the move traffic goes to %v, want C", f.dst)
	}
	r.e.Service()
	if ev := r.e.Events(nil); len(ev) != 1 || !bytes.Equal(ev[0].MAC[:], macC) {
		t.Fatalf("events %+v, want C learned", ev)
	}
	r.checkNoLeak()
}

// ndNA is an advertisement for target with flags (0x80 router, 0x40
// solicited, 0x20 override) and a target link-layer option.
func ndNA(target netip.Addr, flags byte, ll net.HardwareAddr) []byte {
	b := nd(136, target, ll)
	b[4] = flags
	return b
}

// RFC 4861 §7.2.5: an advert without the override flag does not replace a
// cached address, and unsolicited adverts for addresses nobody asked
// about make no entry (an NA storm with random targets cannot fill the table).
func TestNDAdvertRules(t *testing.T) {
	r := newRig(t, rigOpt{})
	base := bV6.As16()
	for i := range 1000 {
		tgt := base
		binary.BigEndian.PutUint32(tgt[12:], uint32(0x10000+i))
		a := netip.AddrFrom16(tgt)
		r.inject(1, eth(macR1, macN(i), 0x86dd, ipv6(a, netip.MustParseAddr("ff02::1"), 58, 255, ndNA(a, 0x20, macN(i)))))
		if i%32 == 31 {
			r.poll()
		}
	}
	r.poll()
	r.e.Service()
	if n := len(r.e.Neighbours()); n != 0 {
		t.Fatalf("1000 unsolicited adverts made %d entries", n)
	}
	if s := r.e.Stats(); s.NeighUnsolicited != 1000 {
		t.Errorf("neighbour_unsolicited %d, want 1000", s.NeighUnsolicited)
	}
	// Resolve B over ND; then an O=0 advert with another MAC is ignored
	// and an O=1 unsolicited one does not move the confirmed entry either.
	r.inject(0, udp6AtoB(64))
	r.poll()
	r.drainOne(1)
	r.inject(1, eth(macR1, macB, 0x86dd, ipv6(bV6, r1v6.Addr(), 58, 255, ndNA(bV6, 0x60, macB))))
	r.poll()
	r.drainOne(1)
	r.e.Service()
	r.e.Events(nil)
	for _, fl := range []byte{0x00, 0x40, 0x20} {
		r.inject(1, eth(macR1, macC, 0x86dd, ipv6(bV6, netip.MustParseAddr("ff02::1"), 58, 255, ndNA(bV6, fl, macC))))
		r.poll()
	}
	r.e.Service()
	if ev := r.e.Events(nil); len(ev) != 0 {
		t.Fatalf("adverts moved a confirmed entry: %+v", ev)
	}
	r.inject(0, udp6AtoB(64))
	r.poll()
	var toB bool
	for _, f := range r.drain(1) {
		p := parseEth(t, f)
		if !bytes.Equal(p.dst, macB) {
			t.Fatalf("frame for %v after the adverts", p.dst)
		}
		toB = toB || p.l3[6] == 17
	}
	if !toB {
		t.Fatal("traffic for B not sent")
	}
	r.checkNoLeak()
}

// The neighbour table is bounded: requests from many addresses (each may
// make an unconfirmed entry) fill it to NeighTable and no further; an
// address we ask about still gets in, evicting unconfirmed entries first.
func TestNeighbourTableBound(t *testing.T) {
	r := newRig(t, rigOpt{cfg: fwd.Config{NeighTable: 64}})
	resolveB(t, r)
	base := bV4.As4()
	for i := range 500 {
		src := base
		src[3] = byte(100 + i%150)
		src[2] = 1
		if i >= 150 {
			src[3] = byte(i % 150)
		}
		r.inject(1, eth(bcast, macN(i), 0x0806, arp(1, macN(i), netip.AddrFrom4(src), bcast, r1v4.Addr())))
		r.drain(1)
		if i%32 == 31 {
			r.poll()
			r.drain(1)
			r.e.Service()
		}
	}
	r.poll()
	r.drain(1)
	r.e.Service()
	s := r.e.Stats()
	if n := len(r.e.Neighbours()); n > 64 {
		t.Fatalf("%d entries, bound 64", n)
	}
	if s.NeighEvicted == 0 {
		t.Error("no eviction counted")
	}
	if dst := sendsTo(t, r); !bytes.Equal(dst, macB) {
		t.Fatalf("the confirmed entry was evicted before unconfirmed ones: traffic to %v", dst)
	}
	r.checkNoLeak()
}

// During a glean flood (one LAN host sending to random addresses of a
// connected /64, nobody answering), a new host still resolves within 1 s.
func TestGleanFloodNewHostResolves(t *testing.T) {
	r := newRig(t, rigOpt{})
	flooder := netip.MustParseAddr("2001:db8::66")
	base := bV6.As16()
	i := 0
	flood := func(n int) {
		for range n {
			dst := base
			binary.BigEndian.PutUint64(dst[8:], uint64(0x5000000+i))
			i++
			r.inject(0, eth(macR0, macA, 0x86dd, ipv6(flooder, netip.AddrFrom16(dst), 17, 64, udp(1, 2, []byte("x")))))
		}
		r.poll()
		r.drain(1)
	}
	// 2 s of flood at 64 packets a millisecond... scaled: 64 per 1 ms poll.
	for range 2000 {
		flood(64)
		r.advance(time.Millisecond)
	}
	// The new host's traffic comes from another LAN host.
	start := r.now
	var asked bool
	for step := 0; step < 1000 && !asked; step++ {
		r.inject(0, udp6AtoB(64))
		r.poll()
		for _, f := range r.drain(1) {
			if p := parseEth(t, f); p.etype == 0x86dd && bytes.Equal(p.dst[:3], []byte{0x33, 0x33, 0xff}) && bytes.Equal(p.l3[24+13:24+16], bV6.AsSlice()[13:]) {
				if _, l4 := checkIPv6(t, p.l3); l4[0] == 135 && bytes.Equal(l4[8:24], bV6.AsSlice()) {
					asked = true
				}
			}
		}
		flood(64)
		r.advance(time.Millisecond)
	}
	if !asked {
		t.Fatalf("no solicitation for the new host in %v of flood; drops %v", time.Duration(r.now-start), r.e.Stats().Drops)
	}
	r.inject(1, eth(macR1, macB, 0x86dd, ipv6(bV6, r1v6.Addr(), 58, 255, ndNA(bV6, 0x60, macB))))
	r.poll()
	r.drain(1)
	r.e.Service()
	if took := time.Duration(r.now - start); took >= time.Second {
		t.Fatalf("resolution took %v", took)
	}
	var found bool
	for _, n := range r.e.Neighbours() {
		found = found || n.Addr == bV6 && bytes.Equal(n.MAC[:], macB)
	}
	if !found {
		t.Fatalf("new host not in the table after its answer; %d entries", len(r.e.Neighbours()))
	}
	if d := r.drops(fwd.DropGleanLimited); d == 0 {
		t.Error("the flood was not rate-limited")
	}
	t.Logf("new host asked for after %v; drops %v", time.Duration(r.now-start), r.e.Stats().Drops)
	for range 10 { // let the flood's held packets (and the errors they cause) time out
		r.advance(time.Second)
		r.poll()
	}
	r.checkNoLeak()
}

// A request for our address claiming B (a spoofed sender) makes an entry
// the kernel mirror may use but forwarding does not trust: traffic for B
// is held and B asked about; a gratuitous ARP for B while we wait is no
// answer; B's reply is, and the held packet goes to B.
func TestSpoofedRequestAndGARPDoNotSteer(t *testing.T) {
	r := newRig(t, rigOpt{})
	r.inject(1, eth(bcast, macC, 0x0806, arp(1, macC, bV4, bcast, r1v4.Addr())))
	r.poll()
	r.drain(1) // our reply to C
	r.e.Service()
	if ev := r.e.Events(nil); len(ev) != 1 || !bytes.Equal(ev[0].MAC[:], macC) {
		t.Fatalf("events %+v, want the unconfirmed entry reported to the mirror", ev)
	}
	r.inject(0, udp4AtoB(64))
	r.poll()
	if f := parseEth(t, r.drainOne(1)); f.etype != 0x0806 || !bytes.Equal(f.dst, bcast) {
		t.Fatalf("traffic for B left to %v (etype %#x); want it held and B asked about", f.dst, f.etype)
	}
	for i := range 50 {
		r.inject(1, eth(bcast, macN(i), 0x0806, arp(uint16(1+i%2), macN(i), bV4, bcast, bV4)))
	}
	r.poll()
	r.expectNone(1)
	r.inject(1, eth(macR1, macB, 0x0806, arp(2, macB, bV4, macR1, r1v4.Addr())))
	r.poll()
	if f := parseEth(t, r.drainOne(1)); !bytes.Equal(f.dst, macB) {
		t.Fatalf("held packet to %v, want B", f.dst)
	}
	r.e.Service()
	if dst := sendsTo(t, r); !bytes.Equal(dst, macB) {
		t.Fatalf("traffic for B goes to %v", dst)
	}
	r.checkNoLeak()
}

// A move the worker applied but could not tell the control plane about
// (its learn ring full) still reaches the events, so the kernel mirror
// does not keep the old MAC.
func TestLostLearnMessageResynced(t *testing.T) {
	r := newRig(t, rigOpt{poolBufs: 4096})
	r.inject(1, eth(macR1, macC, 0x0806, arp(1, macC, bV4, bcast, r1v4.Addr())))
	r.poll()
	r.drain(1)
	r.e.Service()
	r.e.Events(nil)
	base := bV4.As4()
	for i := range 1100 { // requests from other addresses fill the learn ring
		src := base
		src[3] = byte(30 + i%200)
		if i >= 200 {
			src[2] = 1
		}
		r.inject(1, eth(macR1, macN(i), 0x0806, arp(1, macN(i), netip.AddrFrom4(src), bcast, r1v4.Addr())))
		if i%32 == 31 {
			r.poll()
			r.drain(1)
		}
	}
	r.inject(1, eth(macR1, macB, 0x0806, arp(1, macB, bV4, bcast, r1v4.Addr()))) // the unconfirmed entry moves to B
	r.poll()
	r.drain(1)
	if r.e.Stats().LearnDropped == 0 {
		t.Fatal("test bug: the learn ring never filled")
	}
	r.e.Service()
	var got bool
	for _, ev := range r.e.Events(nil) {
		got = got || ev.Addr == bV4 && bytes.Equal(ev.MAC[:], macB)
	}
	if !got {
		t.Fatal("the move to B never reached the events")
	}
}

// The glean path under a flood (hold-slot eviction, the senders' budgets,
// solicitations, the remembered questions) allocates nothing: one Poll is
// 64 packets to 64 unresolved addresses, twice the hold table.
func TestGleanFloodDoesNotAllocate(t *testing.T) {
	var frames [][]byte
	base := bV6.As16()
	for i := range 64 {
		dst := base
		binary.BigEndian.PutUint32(dst[12:], uint32(0x7000+i))
		frames = append(frames, eth(macR0, macA, 0x86dd, ipv6(aV6, netip.AddrFrom16(dst), 17, 64, udp(1, 2, []byte("x")))))
	}
	r := hotRig(t, fwd.ModeRouter, frames, fwd.Config{})
	r.poll()
	if a := testing.AllocsPerRun(50, func() { r.poll() }); a != 0 {
		t.Fatalf("%v allocations per poll", a)
	}
	if s := r.e.Stats(); s.Drops[fwd.DropGleanLimited] == 0 || s.Drops[fwd.DropNeighbourFull] == 0 {
		t.Fatalf("the flood was not limited (%d) or evicted nothing (%d)", s.Drops[fwd.DropGleanLimited], s.Drops[fwd.DropNeighbourFull])
	}
}

// Packets ovfwd sends itself (here: echo replies to many new neighbours,
// as tunnel traffic to many peers' real addresses would be) are limited
// per input port, not at one sender's rate.
func TestGleanOwnTrafficNotSenderLimited(t *testing.T) {
	r := newRig(t, rigOpt{})
	base := bV4.As4()
	for i := range 100 {
		src := base
		src[3] = byte(100 + i)
		r.inject(1, eth(macR1, macN(i), 0x0800, ipv4(netip.AddrFrom4(src), r1v4.Addr(), 1, 64, false, icmpEcho(8, 1, uint16(i), []byte("ping")))))
		if i%16 == 15 {
			r.poll()
			r.drain(1)
		}
	}
	r.poll()
	r.drain(1)
	if d := r.drops(fwd.DropGleanLimited); d != 0 {
		t.Fatalf("%d of our own replies to 100 new neighbours were glean-limited (a sender's budget is 64)", d)
	}
	for range 10 {
		r.advance(time.Second)
		r.poll()
	}
	r.checkNoLeak()
}

// The control plane's side of a neighbour storm (new entries, evictions
// from a full table, the events for the kernel mirror) allocates nothing
// per pass: the table changes in place, eviction reuses its scratch, and
// events are values. Before, each pass in the storm allocated the whole
// index again, the eviction list and a MAC per event — a soak's main
// garbage, which grew the daemon's heap to its collection target.
func TestNeighbourStormControlPlaneGarbage(t *testing.T) {
	// The counts are process-wide: other goroutines of the test binary
	// (runtime, earlier tests' timers) can add as much again to one
	// measurement, so the storm runs up to three times and the best run
	// must meet the bound; the old control plane made 8,623 allocations
	// and 1.87 MB in every run.
	var why string
	for range 3 {
		if why = neighbourStormGarbage(t); why == "" {
			return
		}
		t.Log(why)
	}
	t.Error(why)
}

// neighbourStormGarbage runs the storm once and says what was over the
// bound, or "".
func neighbourStormGarbage(t *testing.T) string {
	r := newRig(t, rigOpt{cfg: fwd.Config{NeighTable: 64}})
	// Earlier tests' garbage is collected now, and their rigs' frame rings
	// unmapped by the cleanups a collection queues, not by a collection
	// and cleanups that run inside a measured pass on a loaded machine.
	runtime.GC()
	runtime.GC()
	var frames [][]byte
	base := bV4.As4()
	for i := range 200 { // in the port's /24, round and round: each is new again by its turn
		src := base
		src[3] = byte(30 + i)
		frames = append(frames, eth(bcast, macN(i), 0x0806, arp(1, macN(i), netip.AddrFrom4(src), bcast, r1v4.Addr())))
	}
	var evs []fwd.Event
	var allocs, bytes, passes, made uint64
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	for round := range 100 {
		for i := range 16 {
			r.inject(1, frames[(round*16+i)%len(frames)])
		}
		r.poll()
		r.drain(1)
		r.advance(50 * time.Millisecond)
		metrics.Read(samples)
		o0, b0 := samples[0].Value.Uint64(), samples[1].Value.Uint64()
		r.e.Service()
		evs = r.e.Events(evs[:0])
		metrics.Read(samples)
		if round >= 8 { // past the first fill and the first table rebuilds
			allocs += samples[0].Value.Uint64() - o0
			bytes += samples[1].Value.Uint64() - b0
			passes++
			for _, ev := range evs {
				if ev.Kind == fwd.EventNeighbourLearned {
					made++
				}
			}
		}
	}
	s := r.e.Stats()
	if s.NeighEvicted == 0 || len(r.e.Neighbours()) > 64 {
		t.Fatalf("the storm evicted %d, %d entries (bound 64)", s.NeighEvicted, len(r.e.Neighbours()))
	}
	// What remains is the entries themselves (one object each, which a
	// worker may still hold, so never reused), a rebuild of the index a
	// few dozen deletions apart here, and metrics.Read's own (more under -race).
	t.Logf("%d allocations, %d bytes in %d control passes that made %d entries (%d evicted in all)", allocs, bytes, passes, made, s.NeighEvicted)
	if made < passes || allocs > made+passes || bytes > made*128+passes*256 {
		return fmt.Sprintf("%d allocations (%d bytes) for %d new entries in %d passes", allocs, bytes, made, passes)
	}
	return ""
}

// The glean limits are configuration (Config, and Limits on a reload): a
// sender's burst and rate of new resolutions follow them, and a port's
// budget bounds all senders together.
func TestGleanLimitsConfigured(t *testing.T) {
	base := bV6.As16()
	i := 0
	// burst sends n packets from src to n new addresses in one poll and
	// returns how many were glean-limited.
	burst := func(r *rig, src netip.Addr, n int) uint64 {
		d0 := r.drops(fwd.DropGleanLimited)
		for range n {
			dst := base
			binary.BigEndian.PutUint64(dst[8:], uint64(0x6000000+i))
			i++
			r.inject(0, eth(macR0, macA, 0x86dd, ipv6(src, netip.AddrFrom16(dst), 17, 64, udp(1, 2, []byte("x")))))
		}
		r.poll()
		r.drain(1)
		return r.drops(fwd.DropGleanLimited) - d0
	}
	a1, a2 := netip.MustParseAddr("2001:db8::66"), netip.MustParseAddr("2001:db8::1234")
	r := newRig(t, rigOpt{cfg: fwd.Config{GleanSourceRate: 10, GleanSourceBurst: 5, GleanPortRate: 1000, GleanPortBurst: 8}})
	if l := burst(r, a1, 20); l != 15 {
		t.Errorf("source burst 5: %d of 20 limited, want 15", l)
	}
	if l := burst(r, a2, 20); l != 17 { // the port's burst of 8 had 3 left
		t.Errorf("port burst 8: %d of another sender's 20 limited, want 17", l)
	}
	r.advance(time.Second) // a1: 10 more tokens, capped at its burst of 5
	if l := burst(r, a1, 20); l != 15 {
		t.Errorf("after 1 s at 10/s: %d of 20 limited, want 15", l)
	}
	// A reload raises them for the next poll.
	l := r.e.Limits()
	l.GleanSourceBurst, l.GleanPortBurst = 50, 100
	must(t, r.e.SetLimits(l))
	r.advance(10 * time.Second)
	if l := burst(r, a1, 40); l != 0 {
		t.Errorf("after raising the bursts: %d of 40 limited", l)
	}
	for range 10 {
		r.advance(time.Second)
		r.poll()
		r.drain(1)
	}
	r.checkNoLeak()
}

// A table full of confirmed neighbours (they answered our questions) and
// a flood of ARP requests and neighbour solicitations to our addresses
// from made-up on-link sources: the requests' unconfirmed entries do not
// push a confirmed one out (NeighTableFull counts them), every confirmed
// neighbour keeps its MAC, and a claim on one of their addresses in the
// flood moves nothing.
func TestUnsolicitedFloodKeepsConfirmedNeighbours(t *testing.T) {
	const size = 64
	r := newRig(t, rigOpt{poolBufs: 4096, cfg: fwd.Config{NeighTable: size, GleanSourceBurst: 1000, GleanPortBurst: 1000}})
	host := func(i int) netip.Addr { a := bV4.As4(); a[3] = byte(100 + i); return netip.AddrFrom4(a) }
	for i := range size {
		r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, host(i), 17, 64, true, udp(1, 2, nil))))
		r.poll()
		r.drain(1)
		r.inject(1, eth(macR1, macN(i), 0x0806, arp(2, macN(i), host(i), macR1, r1v4.Addr())))
		r.poll()
		if out := r.drain(1); len(out) != 1 {
			t.Fatalf("host %d: %d frames released", i, len(out))
		}
		r.e.Service()
	}
	if n := len(r.e.Neighbours()); n != size {
		t.Fatalf("%d confirmed entries, want %d", n, size)
	}
	r.e.Events(nil)
	r.advance(time.Second)
	for i := range 1000 {
		src := bV4.As4()
		src[3] = byte(i%90 + 1) // 198.18.1.1..90: none of the confirmed hosts
		if i%10 == 9 {
			r.inject(1, eth(macR1, macC, 0x0806, arp(1, macC, host(i%size), bcast, r1v4.Addr()))) // a claim
		}
		if i%2 == 0 {
			r.inject(1, eth(macR1, macN(1000+i), 0x0806, arp(1, macN(1000+i), netip.AddrFrom4(src), bcast, r1v4.Addr())))
		} else {
			s6 := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 14: byte(i >> 8), 15: byte(i)})
			r.inject(1, eth(macR1, macN(1000+i), 0x86dd, ipv6(s6, r1v6.Addr(), 58, 255, nd(135, r1v6.Addr(), macN(1000+i)))))
		}
		if i%32 == 31 {
			r.poll()
			r.drain(1)
			r.e.Service()
		}
	}
	r.poll()
	r.drain(1)
	r.e.Service()
	have := map[netip.Addr][6]byte{}
	for _, n := range r.e.Neighbours() {
		have[n.Addr] = n.MAC
	}
	for i := range size {
		if mac, ok := have[host(i)]; !ok || !bytes.Equal(mac[:], macN(i)) {
			t.Fatalf("confirmed neighbour %v: present %v, MAC %x, want %v (stats %+v)", host(i), ok, mac, macN(i), r.e.Stats())
		}
	}
	if s := r.e.Stats(); s.NeighTableFull == 0 || s.NeighEvicted != 0 {
		t.Fatalf("table full %d, evicted %d: want refusals, no evictions", s.NeighTableFull, s.NeighEvicted)
	}
	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, host(7), 17, 64, true, udp(1, 2, nil))))
	r.poll()
	if out := r.drain(1); len(out) != 1 || !bytes.Equal(parseEth(t, out[0]).dst, macN(7)) {
		t.Fatalf("traffic to a confirmed neighbour after the flood: %d frames", len(out))
	}
}

// An entry made from a request to us is reported unconfirmed (a mirror
// must not make anyone's claim permanent), and its confirmation, when
// the address answers our question with the same MAC, is reported too.
func TestNeighbourConfirmationReported(t *testing.T) {
	r := newRig(t, rigOpt{})
	r.inject(1, eth(macR1, macB, 0x0806, arp(1, macB, bV4, bcast, r1v4.Addr())))
	r.poll()
	r.drain(1)
	r.e.Service()
	ev := r.e.Events(nil)
	if len(ev) != 1 || ev[0].Kind != fwd.EventNeighbourLearned || ev[0].Addr != bV4 || ev[0].Confirmed {
		t.Fatalf("after a request: %+v, want one unconfirmed learn", ev)
	}
	r.inject(0, udp4AtoB(64)) // forwarding asks before it trusts the entry
	r.poll()
	r.drain(1)
	r.inject(1, eth(macR1, macB, 0x0806, arp(2, macB, bV4, macR1, r1v4.Addr())))
	r.poll()
	r.drain(1)
	r.e.Service()
	ev = r.e.Events(nil)
	if len(ev) != 1 || ev[0].Kind != fwd.EventNeighbourLearned || ev[0].Addr != bV4 || !ev[0].Confirmed || !bytes.Equal(ev[0].MAC[:], macB) {
		t.Fatalf("after the answer: %+v, want one confirmed learn", ev)
	}
}
