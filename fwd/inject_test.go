package fwd_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// A frame the control plane injects leaves the port it names, unchanged,
// on worker 0's next poll, and its buffer comes back.
func TestInjectSendsFrameOutOfPort(t *testing.T) {
	r := newRig(t, rigOpt{separate: true})
	frame := eth(macA, macR1, 0x0800, ipv4(bV4, aV4, 6, 64, true, tcpSYN(22, 40000, 1460, 0)))
	must(t, r.e.Inject(1, frame))
	r.expectNone(1) // nothing leaves before a poll
	r.poll()
	if got := r.drainOne(1); !bytes.Equal(got, frame) {
		t.Fatalf("sent % x\nwant % x", got, frame)
	}
	r.expectNone(0)
	if s := r.e.InjectStats(); s.Sent != 1 || s.Refused != 0 || s.NoBuffer != 0 {
		t.Fatalf("stats %+v", s)
	}
	if s := r.e.Stats(); s.Ports[1].TxPackets != 1 {
		t.Fatalf("port 1 tx %d, want 1", s.Ports[1].TxPackets)
	}
	r.checkNoLeak()
}

// The ring is bounded: once full, Inject refuses and counts; what was
// accepted is all sent by the next poll.
func TestInjectFullRingRefusesAndCounts(t *testing.T) {
	r := newRig(t, rigOpt{poolBufs: 4096})
	frame := eth(macA, macR0, 0x0800, ipv4(r0v4.Addr(), aV4, 17, 64, true, udp(53, 5353, []byte("x"))))
	accepted := 0
	var err error
	for range 4000 {
		if err = r.e.Inject(0, frame); err != nil {
			break
		}
		accepted++
	}
	if !errors.Is(err, fwd.ErrInjectFull) || accepted == 0 || accepted >= 4000 {
		t.Fatalf("accepted %d, then %v", accepted, err)
	}
	if s := r.e.InjectStats(); s.Refused != 1 {
		t.Fatalf("refused %d, want 1", s.Refused)
	}
	r.poll()
	if n := len(r.drain(0)); n != accepted {
		t.Fatalf("sent %d of %d accepted", n, accepted)
	}
	must(t, r.e.Inject(0, frame)) // room again
	r.poll()
	r.drainOne(0)
	r.checkNoLeak()
}

func TestInjectRejectsBadFrames(t *testing.T) {
	r := newRig(t, rigOpt{mtu: []int{1500, 1280}})
	for _, c := range []struct {
		port int
		n    int
	}{{2, 60}, {-1, 60}, {0, 13}, {0, 14 + 4 + 1501}, {1, 14 + 4 + 1281}} {
		if err := r.e.Inject(c.port, make([]byte, c.n)); err == nil {
			t.Errorf("port %d, %d bytes: accepted", c.port, c.n)
		}
	}
	must(t, r.e.Inject(1, make([]byte, 14+1280)))
	r.poll()
	r.drainOne(1)
}

// With no buffer to be had, worker 0 drops the injected frame and counts it.
func TestInjectNoBufferCounted(t *testing.T) {
	r := newRig(t, rigOpt{poolBufs: 1})
	// The only buffer: received, then held while B's address resolves.
	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 17, 64, true, udp(1, 2, nil))))
	must(t, r.e.Inject(1, eth(macB, macR1, 0x0800, ipv4(r1v4.Addr(), bV4, 17, 64, true, udp(1, 2, nil)))))
	r.poll()
	if s := r.e.InjectStats(); s.NoBuffer != 1 || s.Sent != 0 {
		t.Fatalf("stats %+v, want the frame dropped for lack of a buffer", s)
	}
	if r.drops(fwd.DropTxFull) != 1 {
		t.Fatalf("tx_full drops %d, want 1", r.drops(fwd.DropTxFull))
	}
}

// SetHostCopies punts a copy of every ARP/ND packet of the port (the
// engine still answers); without it none are punted.
func TestHostCopiesPuntNeighbourPackets(t *testing.T) {
	for _, on := range []bool{false, true} {
		r := newRig(t, rigOpt{})
		must(t, r.e.SetHostCopies(0, on))
		req := eth(bcast, macA, 0x0806, arp(1, macA, aV4, make([]byte, 6), r0v4.Addr()))
		ns := eth([]byte{0x33, 0x33, 0xff, 0, 0, 1}, macA, 0x86dd,
			ipv6(aV6, solicitedNode(r0v6.Addr()), 58, 255, nd(135, r0v6.Addr(), macA)))
		// An ARP reply to us (the answer to a host's own request).
		rep := eth(macR0, macA, 0x0806, arp(2, macA, aV4, macR0, r0v4.Addr()))
		for _, f := range [][]byte{req, ns, rep} {
			r.inject(0, f)
		}
		r.poll()
		if n := len(r.drain(0)); n != 2 {
			t.Fatalf("hostCopies=%v: engine answered %d, want 2 (ARP reply, NA)", on, n)
		}
		var got [][]byte
		r.e.Punts(func(port int, frame []byte) {
			if port != 0 {
				t.Errorf("punt on port %d", port)
			}
			got = append(got, bytes.Clone(frame))
		})
		if !on {
			if len(got) != 0 {
				t.Fatalf("copies punted while off: %d", len(got))
			}
			continue
		}
		if len(got) != 3 || !bytes.Equal(got[0], req) || !bytes.Equal(got[1], ns) || !bytes.Equal(got[2], rep) {
			t.Fatalf("punted %d frames, want the 3 received unchanged", len(got))
		}
		r.checkNoLeak()
	}
}

// The inject path costs worker 0 no allocation, nor Inject itself.
func TestInjectZeroAllocs(t *testing.T) {
	r := newRig(t, rigOpt{})
	frame := eth(macA, macR0, 0x0800, ipv4(netip.MustParseAddr("198.18.0.1"), aV4, 17, 64, true, udp(1, 2, make([]byte, 100))))
	r.ports[0].SetSink(0, true) // sent buffers go straight back to the pool
	r.poll()
	if a := testing.AllocsPerRun(200, func() {
		if err := r.e.Inject(0, frame); err != nil {
			t.Fatal(err)
		}
		r.w.Poll()
	}); a != 0 {
		t.Fatalf("%v allocs per inject+poll", a)
	}
	if s := r.e.InjectStats(); s.Sent < 200 {
		t.Fatalf("sent %d of 201", s.Sent)
	}
}

// Many packets injected with InjectIP in one poll and routed to a port of
// another pool never share a buffer. Before, the injected packet lived in
// the worker's one-buffer scratch batch, which the cross-pool copy in send
// reused: the copy's buffer was both queued for Tx and freed (the porttest
// pool panics on the double free; on AF_XDP the next datagrams through
// that port left twice while others were lost).
func TestInjectedPacketsOwnTheirBuffers(t *testing.T) {
	r := newRig(t, rigOpt{separate: true, poolBufs: 1024})
	client := netip.MustParseAddr("198.19.0.5")
	must(t, r.e.SetNeighbour(1, bV4, macB))
	const n = 200
	for i := range n {
		must(t, r.e.InjectIP(ipv4(client, bV4, 17, 64, false, udp(3334, 53, bytes.Repeat([]byte{byte(i)}, 1000)))))
	}
	r.poll()
	out := r.drain(1)
	if len(out) != n {
		t.Fatalf("%d packets out of port 1, want %d", len(out), n)
	}
	seen := map[byte]bool{}
	for _, f := range out {
		p := parseEth(t, f)
		_, l4 := checkIPv4(t, p.l3)
		if len(l4) != 8+1000 {
			t.Fatalf("a %d-byte UDP packet out of port 1, want %d", len(l4), 8+1000)
		}
		if seen[l4[8]] || !bytes.Equal(l4[8:], bytes.Repeat(l4[8:9], 1000)) {
			t.Fatalf("packet with byte %d twice or mixed", l4[8])
		}
		seen[l4[8]] = true
	}
	r.checkNoLeak()
}
