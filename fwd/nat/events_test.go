package nat

import (
	"net/netip"
	"testing"
)

// A block storm bigger than the event ring, drained slower than it fills:
// every block that moved is logged exactly once, every allocation refused
// for want of room is counted lost, and nothing else is — logged + lost is
// the number of block events the storm asked for.
func TestBlockLogStormAccounted(t *testing.T) {
	c := testConfig()
	c.Rules[0].Sources = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	c.Rules[0].PortLo, c.Rules[0].PortHi = 1024, 65535
	c.BlockSize, c.MaxSessions = 8, 1<<14
	tb := newTestTable(t, c)
	logged := 0
	const clients = 3 * eventSlots / 2
	for i := range clients {
		in := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		tb.Out(udpTo(in, 5000, remote, 53), 20, 1) // the control plane does not drain meanwhile
	}
	tb.Publish()
	allocated := tb.Stats().BlocksAllocated
	if allocated == 0 || allocated >= clients {
		t.Fatalf("%d of %d clients got a block: the storm did not outrun the ring", allocated, clients)
	}
	// Everything expires while the ring is still nearly full: releases wait
	// for room rather than being lost.
	for i := range 400 {
		tb.Refresh(tb.k, 1100e9+int64(i)*5e8)
		if i >= 20 { // the control plane catches up late
			tb.Events(func(Event) { logged++ })
		}
	}
	tb.Publish()
	s := tb.Stats()
	if s.Blocks != 0 || s.BlocksReleased != allocated {
		t.Fatalf("after expiry: %d blocks held, %d of %d released", s.Blocks, s.BlocksReleased, allocated)
	}
	events := uint64(clients) + allocated // one allocation asked per client, one release per block given
	t.Logf("%d block events: %d logged, %d lost", events, logged, s.EventsLost)
	if uint64(logged) != s.BlocksAllocated+s.BlocksReleased {
		t.Errorf("%d lines logged for %d blocks moved", logged, s.BlocksAllocated+s.BlocksReleased)
	}
	if uint64(logged)+s.EventsLost != events {
		t.Errorf("logged %d + lost %d != %d events", logged, s.EventsLost, events)
	}
}
