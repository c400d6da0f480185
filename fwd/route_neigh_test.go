package fwd_test

import (
	"bytes"
	"testing"
)

// A replaced or removed neighbour takes effect on the next packet, after
// packets to the same next hop one after another.
func TestRouteSeesNeighbourChangeBetweenPackets(t *testing.T) {
	r := newRig(t, rigOpt{})
	must(t, r.e.SetNeighbour(1, bV4, macB))
	for range 3 { // the same next hop, packet after packet
		r.inject(0, udp4AtoB(64))
	}
	r.poll()
	for _, f := range r.drain(1) {
		if p := parseEth(t, f); !bytes.Equal(p.dst, macB) {
			t.Fatalf("sent to %v, want %v", p.dst, macB)
		}
	}
	must(t, r.e.SetNeighbour(1, bV4, macC)) // the neighbour moved
	r.inject(0, udp4AtoB(64))
	r.poll()
	if p := parseEth(t, r.drainOne(1)); !bytes.Equal(p.dst, macC) {
		t.Fatalf("after the move, sent to %v, want %v", p.dst, macC)
	}
	must(t, r.e.SetNeighbour(1, bV4, nil)) // and went away: ARP for it, hold the packet
	r.inject(0, udp4AtoB(64))
	r.poll()
	if p := parseEth(t, r.drainOne(1)); p.etype != 0x0806 || !bytes.Equal(p.dst, bcast) {
		t.Fatalf("after the removal, sent %+v, want a broadcast ARP request", p)
	}
}
