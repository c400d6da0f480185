package nat

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// dropsNamed reads a table's drop counter by its name (so the test reads
// the same on a tree without the reason: zero).
func dropsNamed(tb *Table, name string) uint64 {
	tb.Publish()
	s := tb.Stats()
	for i, n := range DropNames() {
		if n == name {
			return s.Drops[i]
		}
	}
	return 0
}

// udpTo is a UDP datagram from src:sport to dst:dport.
func udpTo(src netip.Addr, sport uint16, dst netip.Addr, dport uint16) []byte {
	return ipPacket(src, dst, protoUDP, udp(sport, dport, "x"))
}

func nthRemote(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
}

// One client opening flows to ever new remotes gets at most the default
// share of sessions (8192); the rest are refused as client_limit, and
// another client's new flows still get through.
func TestSessionsPerClientBounded(t *testing.T) {
	c := testConfig()
	c.MaxSessions = 1 << 16
	tb := newTestTable(t, c)
	done := 0
	for i := range 10000 {
		v, _ := tb.Out(udpTo(inA, uint16(5000+i%10), nthRemote(i/10), 53), 20, 1)
		if v == Done {
			done++
		}
	}
	if done != 8192 {
		t.Fatalf("one client made %d sessions, want its share of 8192", done)
	}
	if got := dropsNamed(tb, "client_limit"); got != 10000-8192 {
		t.Fatalf("client_limit drops %d, want %d", got, 10000-8192)
	}
	for i := range 100 {
		mustOut(t, tb, udpTo(inB, 6000, nthRemote(i), 53))
	}
}

// One inside endpoint gets at most 1024 sessions (remotes), and with
// endpoint-independent filtering outside sources spraying its mapping
// create no more than that either.
func TestSessionsPerMappingBounded(t *testing.T) {
	c := testConfig()
	c.MaxSessions = 1 << 16
	c.EndpointIndependentFiltering = true
	tb := newTestTable(t, c)
	p := udpTo(inA, 5000, remote, 53)
	mustOut(t, tb, p)
	port := binary.BigEndian.Uint16(p[20:])
	in := 0
	for i := range 3000 {
		if v, _ := tb.In(udpTo(nthRemote(i+256), 53, out1, port), 20); v == Done {
			in++
		}
	}
	if in != 1023 {
		t.Fatalf("outside sources made %d sessions on one mapping, want 1023 (1024 with the first)", in)
	}
	if got := dropsNamed(tb, "client_limit"); got != 3000-1023 {
		t.Fatalf("client_limit drops %d", got)
	}
}

// A departing client's sessions and blocks are released at once (block
// release lines logged), another client's are not touched, and the
// address's next holder starts afresh.
func TestReleaseClients(t *testing.T) {
	c := testConfig()
	c.MaxSessions = 1 << 12
	tb := newTestTable(t, c)
	for i := range 100 {
		mustOut(t, tb, udpTo(inA, uint16(5000+i), remote, 53))
	}
	mustOut(t, tb, udpTo(inB, 5000, remote, 53))
	tb.Events(func(Event) {})
	tb.ReleaseClients([]uint32{a4(inA)})
	tb.Publish()
	s := tb.Stats()
	if s.Sessions[SessionsUDP] != 1 || s.SessionsReleased != 100 || s.Clients != 1 {
		t.Fatalf("after the release: %d sessions, %d released, %d clients; want 1, 100, 1", s.Sessions[SessionsUDP], s.SessionsReleased, s.Clients)
	}
	released := 0
	tb.Events(func(e Event) {
		if !e.Alloc && e.Inside == inA {
			released++
		}
	})
	if released != 2 { // 100 ports of blocks of 64
		t.Fatalf("%d block releases logged, want 2", released)
	}
	// The next holder of inA gets fresh state: the old sessions are gone.
	mustOut(t, tb, udpTo(inA, 5000, remote, 53))
	if tb.Publish(); tb.Stats().SessionsCreated != 102 {
		t.Fatalf("created %d", tb.Stats().SessionsCreated)
	}
}
