package fwd_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/porttest"
)

// A reply heard by another worker reaches the holding worker through the
// control plane: learn ring → Service → published table → release.
func TestNeighbourLearnedOnOtherQueue(t *testing.T) {
	pool := porttest.NewPool(1, 256, 0)
	p0 := porttest.New("p0", macR0, 1500, 2, pool)
	p1 := porttest.New("p1", macR1, 1500, 2, pool)
	now := int64(time.Hour)
	e, err := fwd.New(fwd.Config{Now: func() int64 { return now }}, []fwd.Port{p0, p1})
	must(t, err)
	must(t, e.AddAddress(0, r0v4))
	must(t, e.AddAddress(1, r1v4))
	ws := e.Workers()
	if len(ws) != 2 {
		t.Fatalf("%d workers for 2 queues", len(ws))
	}
	p0.Inject(0, udp4AtoB(64))
	ws[0].Poll()
	if n := len(p1.Drain(0)); n != 1 {
		t.Fatalf("%d ARP requests", n)
	}
	p1.Inject(1, eth(macR1, macB, 0x0806, arp(2, macB, bV4, macR1, r1v4.Addr())))
	ws[1].Poll()
	ws[0].Poll()
	if n := len(p1.Drain(0)); n != 0 {
		t.Fatal("released before the control plane published the neighbour")
	}
	e.Service()
	ws[0].Poll()
	out := p1.Drain(0)
	if len(out) != 1 || !bytes.Equal(out[0][:6], macB) {
		t.Fatalf("held packet not released after Service: %d frames", len(out))
	}
	for _, p := range []*porttest.Port{p0, p1} {
		p.Drain(0)
		p.Drain(1)
	}
	if pool.InUse() != 0 {
		t.Fatalf("%d buffers leaked", pool.InUse())
	}
}

// A neighbour in use is refreshed by a unicast probe before it expires,
// and the answer keeps it alive.
func TestNeighbourRefreshProbe(t *testing.T) {
	r := newRig(t, rigOpt{})
	r.inject(0, udp4AtoB(64))
	r.poll()
	r.drainOne(1) // broadcast request
	r.inject(1, eth(macR1, macB, 0x0806, arp(2, macB, bV4, macR1, r1v4.Addr())))
	r.poll()
	r.drainOne(1)
	r.e.Service()
	r.advance(26 * time.Second) // within NeighProbeBefore (5 s) of the 30 s expiry
	r.inject(0, udp4AtoB(64))
	r.inject(0, udp4AtoB(64))
	r.poll()
	out := r.drain(1)
	if len(out) != 3 {
		t.Fatalf("%d frames, want one unicast probe and two packets", len(out))
	}
	probe := parseEth(t, out[0])
	if probe.etype != 0x0806 || !bytes.Equal(probe.dst, macB) {
		t.Fatalf("probe to %v etype %#x, want unicast ARP to B", probe.dst, probe.etype)
	}
	r.inject(1, eth(macR1, macB, 0x0806, arp(2, macB, bV4, macR1, r1v4.Addr())))
	r.poll()
	r.advance(10 * time.Second) // past the first expiry
	r.e.Service()
	r.inject(0, udp4AtoB(64))
	r.poll()
	if p := parseEth(t, r.drainOne(1)); p.etype != 0x0800 {
		t.Fatal("entry was not kept alive by the probe's answer")
	}
	if ev := r.e.Events(nil); len(ev) != 1 || ev[0].Kind != fwd.EventNeighbourLearned {
		t.Fatalf("events %+v", ev)
	}
	r.checkNoLeak()
}

func TestPuntAndStats(t *testing.T) {
	r := newRig(t, rigOpt{})
	// UDP to our own address (not the tunnel): punted to the control plane.
	f := eth(macR0, macA, 0x0800, ipv4(aV4, r0v4.Addr(), 17, 64, false, udp(5, 22, []byte("ssh?"))))
	r.inject(0, f)
	r.poll()
	var got [][]byte
	n := r.e.Punts(func(port int, frame []byte) {
		if port != 0 {
			t.Errorf("punt from port %d", port)
		}
		got = append(got, append([]byte(nil), frame...))
	})
	if n != 1 || !bytes.Equal(got[0], f) {
		t.Fatalf("punted %d frames", n)
	}
	s := r.e.Stats()
	if s.Punts != 1 || s.Ports[0].RxPackets != 1 || s.Ports[0].RxBytes != uint64(len(f)) {
		t.Fatalf("stats %+v", s)
	}
	// The ring is bounded: overflow is counted, never blocks.
	for range fwd.PuntRingSlots + 6 {
		r.inject(0, f)
		r.poll()
	}
	if s := r.e.Stats(); s.Drops[fwd.DropPuntFull] != 6 {
		t.Fatalf("punt_full %d, want 6", s.Drops[fwd.DropPuntFull])
	}
	r.checkNoLeak()
}

func TestRemoveAddressAndBlackhole(t *testing.T) {
	r := newRig(t, rigOpt{})
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.RemoveAddress(1, r1v4))
	r.inject(0, udp4AtoB(64))
	r.poll()
	if r.drops(fwd.DropNoRoute) != 1 {
		t.Fatal("connected route survived RemoveAddress")
	}
	r.drain(0) // the unreachable
	must(t, r.e.AddRoute(netip.MustParsePrefix("198.18.1.0/24"), fwd.NextHop{Blackhole: true}))
	r.inject(0, udp4AtoB(64))
	r.poll()
	r.expectNone(0)
	r.expectNone(1)
	if r.drops(fwd.DropNoRoute) != 2 {
		t.Fatal("blackhole did not drop")
	}
	if err := r.e.AddRoute(netip.MustParsePrefix("198.18.1.1/24"), fwd.NextHop{Port: 1}); err == nil {
		t.Fatal("unmasked prefix accepted")
	}
	r.checkNoLeak()
}

// Control-plane calls from other goroutines while a worker runs: the race
// detector (make test runs ./fwd/... with -race) checks the publication.
func TestControlPlaneConcurrentWithWorker(t *testing.T) {
	r := newRig(t, rigOpt{poolBufs: 2048})
	r.now = 0
	must(t, r.e.SetNeighbour(1, bV4, macB))
	r.ports[0].SetRxTemplate(0, [][]byte{udp4AtoB(64), udp6AtoB(64)})
	r.ports[1].SetSink(0, true)
	r.ports[0].SetSink(0, true)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				r.w.Poll()
			}
		}
	}()
	pfx := netip.MustParsePrefix("198.19.0.0/16")
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 200 || r.e.Stats().Ports[1].TxPackets == 0 && time.Now().Before(deadline); i++ {
		must(t, r.e.AddRoute(pfx, fwd.NextHop{Port: 1, Via: bV4}))
		must(t, r.e.DeleteRoute(pfx))
		if i%20 == 0 {
			must(t, r.e.SetNeighbour(1, bV6, macB))
			r.e.Service()
			r.e.Events(nil)
			r.e.Punts(func(int, []byte) {})
			_ = r.e.Stats()
		}
	}
	close(stop)
	<-done
	if s := r.e.Stats(); s.Ports[1].TxPackets == 0 {
		t.Fatal("worker forwarded nothing")
	}
}

// l3Port is a port without a link layer: it delivers bare IP packets.
type l3Port struct{ *porttest.Port }

func (p l3Port) Rx(q int, b *fwd.Batch) int {
	n0 := b.Len()
	n := p.Port.Rx(q, b)
	for i := n0; i < b.Len(); i++ {
		b.Pkts[i].Flags |= fwd.FlagL3Only
	}
	return n
}

func TestL3OnlyIngressPort(t *testing.T) {
	pool := porttest.NewPool(1, 64, 0)
	in := porttest.New("tun", macR0, 1500, 1, pool)
	out := porttest.New("p1", macR1, 1500, 1, pool)
	e, err := fwd.New(fwd.Config{}, []fwd.Port{l3Port{in}, out})
	must(t, err)
	must(t, e.AddAddress(1, r1v4))
	must(t, e.SetNeighbour(1, bV4, macB))
	in.Inject(0, ipv4(aV4, bV4, 17, 64, false, udp(1, 2, []byte("bare"))))
	e.Workers()[0].Poll()
	f := out.Drain(0)
	if len(f) != 1 {
		t.Fatalf("%d frames", len(f))
	}
	p := parseEth(t, f[0])
	if hdr, _ := checkIPv4(t, p.l3); !bytes.Equal(p.dst, macB) || hdr[8] != 63 {
		t.Fatal("bare IP packet not routed with a new Ethernet header")
	}
}

// Linux answers a unicast NS with a solicited NA that carries no target
// link-layer option (RFC 4861 §7.2.4 allows it); that answer must confirm the
// cached entry, or IPv6 neighbours lapse every NeighReachable under traffic.
func TestNeighbourRefreshProbeIPv6NoOption(t *testing.T) {
	r := newRig(t, rigOpt{})
	r.inject(0, udp6AtoB(64))
	r.poll()
	r.drainOne(1) // multicast NS
	r.inject(1, eth(macR1, macB, 0x86dd, ipv6(bV6, r1v6.Addr(), 58, 255, nd(136, bV6, macB))))
	r.poll()
	r.drainOne(1)
	r.e.Service()
	r.advance(26 * time.Second) // inside the probe window before the 30 s expiry
	r.inject(0, udp6AtoB(64))
	r.poll()
	out := r.drain(1)
	if len(out) != 2 {
		t.Fatalf("%d frames, want one unicast NS and the packet", len(out))
	}
	if probe := parseEth(t, out[0]); probe.etype != 0x86dd || !bytes.Equal(probe.dst, macB) {
		t.Fatalf("probe to %v etype %#x, want a unicast NS to B", probe.dst, probe.etype)
	}
	na := nd(136, bV6, macB)[:24] // solicited + override, no option
	r.inject(1, eth(macR1, macB, 0x86dd, ipv6(bV6, r1v6.Addr(), 58, 255, na)))
	r.poll()
	r.advance(10 * time.Second) // past the first expiry
	r.e.Service()
	r.inject(0, udp6AtoB(64))
	r.poll()
	if p := parseEth(t, r.drainOne(1)); p.etype != 0x86dd || !bytes.Equal(p.dst, macB) {
		t.Fatal("entry lapsed although the probe was answered")
	}
	r.checkNoLeak()
}
