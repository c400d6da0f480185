package nat

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

func TestTCPRoundTrip(t *testing.T) {
	tb := newTestTable(t, testConfig())
	p := ipPacket(inA, remote, protoTCP, tcp(40000, 80, tcpSYN, "hello"))
	mustOut(t, tb, p)
	if src(p) != out1 || sport(p) < 1024 || sport(p) > 2047 {
		t.Fatalf("translated to %v:%d", src(p), sport(p))
	}
	op := sport(p)
	r := ipPacket(remote, out1, protoTCP, tcp(80, op, tcpSYN|0x10, "world"))
	mustIn(t, tb, r)
	if dst(r) != inA || dport(r) != 40000 {
		t.Fatalf("untranslated to %v:%d", dst(r), dport(r))
	}
	st := tb.sess[0].state
	if st&(stSynOut|stSynIn) != stSynOut|stSynIn {
		t.Fatalf("state %b", st)
	}
}

func TestUDPZeroChecksumStaysZero(t *testing.T) {
	tb := newTestTable(t, testConfig())
	p := ipPacket(inA, remote, protoUDP, udp(5000, 53, "q"))
	p[26], p[27] = 0, 0
	mustOut(t, tb, p)
	if p[26] != 0 || p[27] != 0 {
		t.Fatal("a zero UDP checksum (none) was changed")
	}
}

func TestEchoIdentifierIsThePort(t *testing.T) {
	tb := newTestTable(t, testConfig())
	p := ipPacket(inA, remote, protoICMP, echo(icmpEchoRequest, 7, 1))
	mustOut(t, tb, p)
	id := echoID(p)
	if id < 1024 || id > 2047 {
		t.Fatalf("echo id %d outside the range", id)
	}
	r := ipPacket(remote, out1, protoICMP, echo(icmpEchoReply, id, 1))
	mustIn(t, tb, r)
	if dst(r) != inA || echoID(r) != 7 {
		t.Fatalf("reply to %v id %d", dst(r), echoID(r))
	}
	// An echo request to the outside address is the appliance's own.
	q := ipPacket(remote, out1, protoICMP, echo(icmpEchoRequest, id, 1))
	if v, _ := tb.In(q, 20); v != Pass {
		t.Fatalf("echo request to the outside address: %v", v)
	}
}

// RFC 4787 REQ-1: one inside endpoint keeps its mapping for every remote;
// two clients with the same source port get distinct mappings.
func TestMappings(t *testing.T) {
	tb := newTestTable(t, testConfig())
	a1 := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
	a2 := ipPacket(inA, remote2, protoUDP, udp(5000, 53, "x"))
	b1 := ipPacket(inB, remote, protoUDP, udp(5000, 53, "x"))
	mustOut(t, tb, a1)
	mustOut(t, tb, a2)
	mustOut(t, tb, b1)
	if sport(a1) != sport(a2) {
		t.Fatalf("mapping not endpoint-independent: %d, %d", sport(a1), sport(a2))
	}
	if sport(a1) == sport(b1) {
		t.Fatalf("two clients share outside port %d", sport(a1))
	}
	if s := tb.Stats(); s.Sessions[SessionsUDP] != 0 {
		t.Fatal("stats published before Refresh")
	}
	tb.Refresh(tb.k, 1001e9)
	tb.Publish()
	if s := tb.Stats(); s.Sessions[SessionsUDP] != 3 || s.Mappings != 2 || s.Clients != 2 || s.Blocks != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// Endpoint-dependent filtering by default; endpoint-independent as a choice.
func TestFiltering(t *testing.T) {
	for _, eif := range []bool{false, true} {
		c := testConfig()
		c.EndpointIndependentFiltering = eif
		tb := newTestTable(t, c)
		p := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
		mustOut(t, tb, p)
		r := ipPacket(remote2, out1, protoUDP, udp(53, sport(p), "y"))
		v, _ := tb.In(r, 20)
		if want := map[bool]Verdict{false: DropNoSession, true: Done}[eif]; v != want {
			t.Fatalf("eif=%v: stranger got %v, want %v", eif, v, want)
		}
		if eif {
			verify(t, r)
		}
	}
}

func TestInboundWithoutMapping(t *testing.T) {
	tb := newTestTable(t, testConfig())
	r := ipPacket(remote, out1, protoUDP, udp(53, 1500, "y"))
	if v, _ := tb.In(r, 20); v != DropNoSession {
		t.Fatalf("got %v", v)
	}
	// Outside the port range and the excluded port: the appliance's own.
	r = ipPacket(remote, out1, protoUDP, udp(53, 1194, "y"))
	if v, _ := tb.In(r, 20); v != Pass {
		t.Fatalf("port 1194: %v", v)
	}
	tb.Refresh(tb.k, 1000e9)
	tb.Publish()
	if tb.Stats().Drops[DropNoSession] != 1 {
		t.Fatal("no_session not counted")
	}
}

func TestExpiry(t *testing.T) {
	tb := newTestTable(t, testConfig())
	p := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
	mustOut(t, tb, p)
	op := sport(p)
	// Idle less than the UDP timeout (20 s): still there.
	tb.Refresh(tb.k, 1015e9)
	tb.Publish()
	mustIn(t, tb, ipPacket(remote, out1, protoUDP, udp(53, op, "y")))
	// Idle longer: gone, from In's check and from the sweep.
	tb.Refresh(tb.k, 1036e9)
	tb.Publish()
	if v, _ := tb.In(ipPacket(remote, out1, protoUDP, udp(53, op, "y")), 20); v != DropNoSession {
		t.Fatalf("after the timeout: %v", v)
	}
	for i := range 12 { // one sweep period and a bit, in steps
		tb.Refresh(tb.k, 1036e9+int64(i)*5e8)
	}
	if s := tb.Stats(); s.Sessions[SessionsUDP] != 0 || s.Mappings != 0 || s.Blocks != 0 || s.Clients != 0 || s.BlocksReleased != 1 {
		t.Fatalf("after sweeping: %+v", s)
	}
	var evs []Event
	tb.Events(func(e Event) { evs = append(evs, e) })
	if len(evs) != 2 || !evs[0].Alloc || evs[1].Alloc || evs[0].Inside != inA || evs[0].Outside != out1 ||
		evs[0].PortHi-evs[0].PortLo != 63 || evs[1].Time < 1036 {
		t.Fatalf("events %+v", evs)
	}
}

// RFC 5382: established TCP lasts the long timeout, a half-open or closed
// one the transitory one.
func TestTCPTimeouts(t *testing.T) {
	tb := newTestTable(t, testConfig())
	syn := ipPacket(inA, remote, protoTCP, tcp(40000, 80, tcpSYN, ""))
	mustOut(t, tb, syn)
	op := sport(syn)
	mustIn(t, tb, ipPacket(remote, out1, protoTCP, tcp(80, op, tcpSYN|0x10, "")))
	tb.Refresh(tb.k, 1050e9) // past transitory (10 s), within established (100 s)
	mustIn(t, tb, ipPacket(remote, out1, protoTCP, tcp(80, op, 0x10, "data")))
	mustOut(t, tb, ipPacket(inA, remote, protoTCP, tcp(40000, 80, tcpFIN|0x10, "")))
	mustIn(t, tb, ipPacket(remote, out1, protoTCP, tcp(80, op, tcpFIN|0x10, "")))
	tb.Refresh(tb.k, 1061e9) // both FINs: transitory again
	if v, _ := tb.In(ipPacket(remote, out1, protoTCP, tcp(80, op, 0x10, "")), 20); v != DropNoSession {
		t.Fatalf("closed session after the transitory timeout: %v", v)
	}
	// A SYN nobody answered expires after the transitory timeout.
	syn = ipPacket(inB, remote, protoTCP, tcp(40000, 80, tcpSYN, ""))
	mustOut(t, tb, syn)
	tb.Refresh(tb.k, 1072e9)
	tb.Publish()
	if v, _ := tb.In(ipPacket(remote, out1, protoTCP, tcp(80, sport(syn), tcpSYN|0x10, "")), 20); v != DropNoSession {
		t.Fatalf("unanswered SYN after the transitory timeout: %v", v)
	}
}

// Port exhaustion is refused and counted; existing sessions keep working.
func TestPortExhaustion(t *testing.T) {
	c := testConfig()
	c.BlockSize, c.MaxBlocks = 4, 1
	tb := newTestTable(t, c)
	var ports []uint16
	for i := range 4 {
		p := ipPacket(inA, remote, protoUDP, udp(uint16(5000+i), 53, "x"))
		mustOut(t, tb, p)
		ports = append(ports, sport(p))
	}
	p := ipPacket(inA, remote, protoUDP, udp(6000, 53, "x"))
	if v, _ := tb.Out(p, 20, 1); v != DropNoPort {
		t.Fatalf("fifth mapping of a 4-port block: %v", v)
	}
	for i, op := range ports {
		r := ipPacket(remote, out1, protoUDP, udp(53, op, "y"))
		mustIn(t, tb, r)
		if dport(r) != uint16(5000+i) {
			t.Fatal("existing session disturbed")
		}
	}
	// Another protocol has its own ports in the same block.
	mustOut(t, tb, ipPacket(inA, remote, protoTCP, tcp(6000, 80, tcpSYN, "")))
	tb.Refresh(tb.k, 1000e9)
	tb.Publish()
	if tb.Stats().Drops[DropNoPort] != 1 {
		t.Fatal("no_port not counted")
	}
}

func TestTableFull(t *testing.T) {
	c := testConfig()
	c.MaxSessions = 3
	tb := newTestTable(t, c)
	for i := range 3 {
		mustOut(t, tb, ipPacket(inA, remote, protoUDP, udp(uint16(5000+i), 53, "x")))
	}
	if v, _ := tb.Out(ipPacket(inA, remote, protoUDP, udp(6000, 53, "x")), 20, 1); v != DropTableFull {
		t.Fatalf("got %v", v)
	}
	if tb.cnt[cMappings] != 3 {
		t.Fatalf("a refused session leaked its mapping: %d mappings", tb.cnt[cMappings])
	}
}

// RFC 5508: an ICMP error about a translated packet reaches the inside
// host with the quoted header translated back, every checksum right.
func TestICMPErrorIn(t *testing.T) {
	for _, proto := range []uint8{protoUDP, protoTCP, protoICMP} {
		tb := newTestTable(t, testConfig())
		var p []byte
		switch proto {
		case protoUDP:
			p = ipPacket(inA, remote, protoUDP, udp(5000, 33434, "probe"))
		case protoTCP:
			p = ipPacket(inA, remote, protoTCP, tcp(5000, 80, tcpSYN, ""))
		default:
			p = ipPacket(inA, remote, protoICMP, echo(icmpEchoRequest, 5000, 1))
		}
		p[8] = 1
		p[10], p[11] = 0, 0
		copy(p[10:], []byte{byte(csum.Checksum(p[:20]) >> 8), byte(csum.Checksum(p[:20]))})
		mustOut(t, tb, p)
		router := netip.MustParseAddr("198.18.2.1")
		e := icmpError(router, out1, icmpTimeExceeded, 0, p)
		mustIn(t, tb, e)
		q := e[28:]
		if dst(e) != inA || src(q) != inA || dst(q) != remote {
			t.Fatalf("proto %d: outer to %v, quoted %v -> %v", proto, dst(e), src(q), dst(q))
		}
		if proto == protoICMP {
			if echoID(q) != 5000 {
				t.Fatalf("quoted echo id %d", echoID(q))
			}
		} else if sport(q) != 5000 {
			t.Fatalf("proto %d: quoted source port %d", proto, sport(q))
		}
		if c := csum.Checksum(q[:20]); c != 0 {
			t.Fatalf("proto %d: quoted IP header checksum wrong", proto)
		}
	}
}

func TestICMPErrorOut(t *testing.T) {
	c := testConfig()
	c.EndpointIndependentFiltering = true
	tb := newTestTable(t, c)
	p := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
	mustOut(t, tb, p)
	r := ipPacket(remote, out1, protoUDP, udp(53, sport(p), "answer"))
	mustIn(t, tb, r)
	// The inside host says port unreachable about the delivered packet.
	e := icmpError(inA, remote, icmpUnreachable, 3, r)
	mustOut(t, tb, e)
	q := e[28:]
	if src(e) != out1 || dst(q) != out1 || dport(q) != sport(p) {
		t.Fatalf("outer from %v, quoted to %v:%d", src(e), dst(q), dport(q))
	}
}

func TestFragments(t *testing.T) {
	tb := newTestTable(t, testConfig())
	p := ipPacket(inA, remote, protoUDP, udp(5000, 53, "0123456789abcdef"))
	p[6] = 0x20 // MF: a first fragment
	p[10], p[11] = 0, 0
	c := csum.Checksum(p[:20])
	p[10], p[11] = byte(c>>8), byte(c)
	if v, _ := tb.Out(p, 20, 1); v != Done {
		t.Fatal(v)
	}
	later := ipPacket(inA, remote, 200, []byte("more data"))
	later[9] = protoUDP
	later[6], later[7] = 0, 3 // offset 24
	later[10], later[11] = 0, 0
	c = csum.Checksum(later[:20])
	later[10], later[11] = byte(c>>8), byte(c)
	if v, _ := tb.Out(later, 0, 1); v != Done || src(later) != out1 {
		t.Fatalf("later fragment: %v from %v", v, src(later))
	}
	verify(t, later)
	other := append([]byte(nil), later...)
	copy(other[12:], inB.AsSlice())
	other[10], other[11] = 0, 0
	c = csum.Checksum(other[:20])
	other[10], other[11] = byte(c>>8), byte(c)
	if v, _ := tb.Out(other, 0, 1); v != DropFragNoState {
		t.Fatalf("unknown later fragment: %v", v)
	}
}

func TestHandoffOwners(t *testing.T) {
	k, err := Compile(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	w := []*Table{NewTable(0, 2), NewTable(1, 2)}
	for _, tb := range w {
		tb.Refresh(k, 1000e9)
		tb.Publish()
	}
	p := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
	v, own := w[0].Out(append([]byte(nil), p...), 20, 1)
	if v == Handoff {
		if v, own = w[own].Out(p, 20, 1); v != Done {
			t.Fatal(v)
		}
	} else {
		if v != Done {
			t.Fatal(v)
		}
		copy(p, ipPacket(inA, remote, protoUDP, udp(5000, 53, "x")))
		w[0].Out(p, 20, 1)
	}
	owner := w[0].ownerIn(a4(inA))
	if v, o := w[1-owner].Out(ipPacket(inA, remote, protoUDP, udp(5000, 53, "x")), 20, 1); v != Handoff || o != owner {
		t.Fatalf("non-owner: %v to %d, owner %d", v, o, owner)
	}
	// The returning packet belongs to the worker whose block holds the port,
	// which is the client's owner.
	r := ipPacket(remote, out1, protoUDP, udp(53, sport(p), "y"))
	for i := range w {
		v, o := w[i].In(append([]byte(nil), r...), 20)
		if i == owner && v != Done || i != owner && (v != Handoff || o != owner) {
			t.Fatalf("worker %d: %v to %d (owner %d)", i, v, o, owner)
		}
	}
}

func TestReloadKeepsUnchangedRules(t *testing.T) {
	c := testConfig()
	c.Rules = append(c.Rules, Rule{Name: "lan", Sources: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24")}, Port: 1,
		Outside: []netip.Addr{netip.MustParseAddr("198.18.1.2")}, PortLo: 1024, PortHi: 2047})
	tb := newTestTable(t, c)
	lan := netip.MustParseAddr("10.9.0.5")
	pv := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
	pl := ipPacket(lan, remote, protoUDP, udp(5000, 53, "x"))
	mustOut(t, tb, pv)
	mustOut(t, tb, pl)
	// Reload: the vpn rule moves to second place unchanged, the lan rule
	// changes its range.
	c2 := c
	c2.Rules = []Rule{c.Rules[1], c.Rules[0]}
	c2.Rules[0].PortHi = 3000
	k2, err := Compile(c2)
	if err != nil {
		t.Fatal(err)
	}
	tb.Refresh(k2, 1001e9)
	tb.Publish()
	mustIn(t, tb, ipPacket(remote, out1, protoUDP, udp(53, sport(pv), "y")))
	if v, _ := tb.In(ipPacket(remote, netip.MustParseAddr("198.18.1.2"), protoUDP, udp(53, sport(pl), "y")), 20); v != DropNoSession {
		t.Fatalf("session of a changed rule survived: %v", v)
	}
	// The kept client still gets ports from its block.
	p := ipPacket(inA, remote, protoUDP, udp(5001, 53, "x"))
	mustOut(t, tb, p)
	tb.Refresh(nil, 1002e9)
	tb.Publish()
	if v, _ := tb.Out(ipPacket(inA, remote, protoUDP, udp(5000, 53, "x")), 20, 1); v != Pass {
		t.Fatalf("NAT off: %v", v)
	}
}

func TestConfigErrors(t *testing.T) {
	good := testConfig()
	for name, mut := range map[string]func(*Config){
		"no sources":  func(c *Config) { c.Rules[0].Sources = nil },
		"no outside":  func(c *Config) { c.Rules[0].Outside = nil },
		"bad range":   func(c *Config) { c.Rules[0].PortLo, c.Rules[0].PortHi = 3000, 2000 },
		"v6 source":   func(c *Config) { c.Rules[0].Sources = []netip.Prefix{netip.MustParsePrefix("2001:db8::/64")} },
		"block size":  func(c *Config) { c.BlockSize = -1 },
		"max blocks":  func(c *Config) { c.MaxBlocks = 100 },
		"timeout":     func(c *Config) { c.Timeouts.UDP = time.Millisecond },
		"dup outside": func(c *Config) { c.Rules = append(c.Rules, c.Rules[0]) },
	} {
		c := good
		c.Rules = append([]Rule(nil), good.Rules...)
		mut(&c)
		if _, err := Compile(c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Every mapping of a busy table is found again after many frees (the
// backward-shift deletion keeps clusters intact).
func TestIndexChurn(t *testing.T) {
	c := testConfig()
	c.BlockSize, c.MaxBlocks, c.MaxSessions = 256, 4, 4096
	c.Rules[0].PortHi = 65535
	tb := newTestTable(t, c)
	live := map[uint16]uint16{} // inside port -> outside port
	for i := range 20000 {
		ip := uint16(1000 + (i*7919)%900)
		if op, ok := live[ip]; ok && i%3 == 0 {
			sid, found := tb.findSession(skey{a4(inA), a4(remote), ip, 53, protoUDP})
			if !found {
				t.Fatalf("step %d: session of port %d lost", i, ip)
			}
			if tb.maps[tb.sess[sid].m-1].ok.port != op {
				t.Fatal("mapping changed")
			}
			tb.freeSession(sid)
			delete(live, ip)
			continue
		}
		p := ipPacket(inA, remote, protoUDP, udp(ip, 53, "x"))
		mustOut(t, tb, p)
		if op, ok := live[ip]; ok && op != sport(p) {
			t.Fatalf("step %d: port %d remapped %d -> %d", i, ip, op, sport(p))
		}
		live[ip] = sport(p)
	}
}

// With two workers, the later fragments of an inbound datagram that
// arrive where its first fragment arrived follow it to the owner.
func TestFragmentsFollowTheFirst(t *testing.T) {
	k, err := Compile(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	w := []*Table{NewTable(0, 2), NewTable(1, 2)}
	for _, tb := range w {
		tb.Refresh(k, 1000e9)
	}
	owner := w[0].ownerIn(a4(inA))
	p := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
	if v, _ := w[owner].Out(p, 20, 1); v != Done {
		t.Fatal(v)
	}
	first := ipPacket(remote, out1, protoUDP, udp(53, sport(p), "0123456789abcdef"))
	first[6] = 0x20 // MF
	first[10], first[11] = 0, 0
	c := csum.Checksum(first[:20])
	first[10], first[11] = byte(c>>8), byte(c)
	other := 1 - owner
	if v, o := w[other].In(append([]byte(nil), first...), 20); v != Handoff || o != owner {
		t.Fatalf("first fragment on the other worker: %v to %d", v, o)
	}
	if v, _ := w[owner].In(first, 20); v != Done {
		t.Fatalf("first fragment on its owner: %v", v)
	}
	later := ipPacket(remote, out1, protoUDP, []byte("more data"))
	later[6], later[7] = 0, 3
	later[10], later[11] = 0, 0
	c = csum.Checksum(later[:20])
	later[10], later[11] = byte(c>>8), byte(c)
	if v, o := w[other].In(append([]byte(nil), later...), 0); v != Handoff || o != owner {
		t.Fatalf("later fragment where the first arrived: %v to %d", v, o)
	}
	if v, _ := w[owner].In(later, 0); v != Done || dst(later) != inA {
		t.Fatalf("later fragment on the owner: %v to %v", v, dst(later))
	}
	verify(t, later)
}

// One block may span the whole port space (block_size 65536).
func TestWholeRangeBlock(t *testing.T) {
	c := testConfig()
	c.BlockSize, c.MaxBlocks = 65536, 1
	c.Rules[0].PortLo, c.Rules[0].PortHi = 1, 65535
	tb := newTestTable(t, c)
	p := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
	mustOut(t, tb, p)
	mustIn(t, tb, ipPacket(remote, out1, protoUDP, udp(53, sport(p), "y")))
	var evs []Event
	tb.Events(func(e Event) { evs = append(evs, e) })
	if len(evs) != 1 || evs[0].PortLo != 1 || evs[0].PortHi != 65535 {
		t.Fatalf("events %+v", evs)
	}
	// Expired and swept (the port freed), and owned by one of two workers.
	for i := range 12 {
		tb.Refresh(tb.k, 1100e9+int64(i)*5e8)
	}
	if tb.cnt[cMappings] != 0 {
		t.Fatal("mapping not freed")
	}
	two := NewTable(1, 2)
	two.Refresh(tb.k, 1000e9)
	if v, o := two.In(ipPacket(remote, out1, protoUDP, udp(53, 40000, "y")), 20); v != Handoff || o != 0 {
		t.Fatalf("worker 1 of 2: %v to %d, want a handoff to worker 0 (the only block)", v, o)
	}
}

// TestOutFastPath: an established flow's packets take outFast (the hint
// from Prefetch and Touch names the session) and leave exactly as Out
// translates them on a twin table, checksums right; a packet the fast
// path must not take (a later rule's port, an expired session, a
// fragment) falls through to the general path.
func TestOutFastPath(t *testing.T) {
	zeroSum := ipPacket(inA, remote, protoUDP, udp(5002, 53, "no checksum"))
	zeroSum[26], zeroSum[27] = 0, 0
	pkts := [][]byte{
		ipPacket(inA, remote, protoUDP, udp(5000, 53, "x")),
		ipPacket(inA, remote, protoUDP, udp(5001, 53, "a longer datagram")),
		zeroSum,
		ipPacket(inA, remote, protoTCP, tcp(40000, 80, tcpSYN, "")),
		ipPacket(inA, remote, protoTCP, tcp(40001, 80, tcpFIN, "data")),
	}
	c := testConfig()
	a, b := newTestTable(t, c), newTestTable(t, c)
	for _, p := range pkts {
		mustOut(t, a, append([]byte(nil), p...))
		mustOut(t, b, append([]byte(nil), p...))
	}
	for i, p := range pkts {
		q, h := append([]byte(nil), p...), append([]byte(nil), p...)
		if v, _ := a.Out(q, 20, 1); v != Done {
			t.Fatalf("packet %d: Out %v", i, v)
		}
		hint := []uint64{b.Prefetch(h, 20)}
		b.Touch(hint)
		if hint[0]&probeSess == 0 || uint32(hint[0]) == 0 {
			t.Fatalf("packet %d: Touch found no session (hint %#x)", i, hint[0])
		}
		buf, x := inFrame(h)
		if !b.outFast(buf, x, 1, hint[0], 0) {
			t.Fatalf("packet %d: the fast path refused an established session", i)
		}
		h = outOfFrame(t, buf, x, len(h))
		if string(h) != string(q) {
			t.Fatalf("packet %d: fast path %x, Out %x", i, h, q)
		}
		verify(t, h)
		if i == 2 && (h[26] != 0 || h[27] != 0) {
			t.Fatalf("a zero UDP checksum became %#x", h[26:28])
		}
	}
	// Not for the fast path: another egress port (no rule), a fragment,
	// an expired session.
	p := ipPacket(inA, remote, protoUDP, udp(5001, 53, "a longer datagram"))
	hint := []uint64{b.Prefetch(p, 20)}
	b.Touch(hint)
	id := hint[0]
	refused := func(why string, p []byte, port int, id uint64) {
		t.Helper()
		buf, x := inFrame(p)
		if b.outFast(buf, x, port, id, 0) {
			t.Fatalf("fast path took %s", why)
		}
		if q := outOfFrame(t, buf, x, len(p)); string(q) != string(p) {
			t.Fatalf("fast path refused %s but changed it: %x", why, q)
		}
	}
	refused("a packet for a port without a rule", p, 2, id)
	frag := append([]byte(nil), p...)
	frag[6] |= ipv4FlagMF >> 8
	refused("a first fragment (its later fragments need the record)", frag, 1, id)
	refused("a hint for no session", p, 1, probeSess|probeDone)
	refused("a hint past the table", p, 1, probeSess|probeDone|uint64(len(b.sess)+1))
	other := []uint64{b.Prefetch(pkts[0], 20)}
	b.Touch(other)
	refused("another session's hint (a stale one)", p, 1, other[0])
	gone := ipPacket(inA, remote, protoUDP, udp(5003, 53, "x"))
	mustOut(t, b, append([]byte(nil), gone...))
	hg := []uint64{b.Prefetch(gone, 20)}
	b.Touch(hg)
	b.freeSession(uint32(hg[0]) - 1)
	refused("a freed session's hint", gone, 1, hg[0])
	// IP options move the transport header: here they are the ports'
	// bytes, so only the header length tells the packet from the session's.
	opts := ipPacket(inA, remote, protoUDP, udp(5001, 53, "a longer datagram"))
	opts = append(append(opts[:20:20], opts[20:24]...), opts[20:]...)
	opts[0] = 0x46
	binary.BigEndian.PutUint16(opts[2:], uint16(len(opts)))
	refused("a header with options", opts, 1, id)
	b.now += uint32(c.Timeouts.UDP/time.Second) + 2 // no Refresh: its sweep would free the session first
	refused("an expired session", p, 1, id)
}

// inFrame puts IP packet p in a buffer as a port's frame holds it: at an
// offset, the bytes around it not the packet's.
func inFrame(p []byte) ([]byte, int) {
	buf := make([]byte, 14+len(p)+fastView) // room past a short datagram for the fast path's view
	for i := range buf {
		buf[i] = 0xa5
	}
	return buf, 14 + copy(buf[14:], p) - len(p)
}

// outOfFrame returns the n-byte packet at buf[x:], and fails t if a byte
// around it changed.
func outOfFrame(t *testing.T, buf []byte, x, n int) []byte {
	t.Helper()
	for i, c := range buf {
		if (i < x || i >= x+n) && c != 0xa5 {
			t.Fatalf("byte %d, outside the packet at %d-%d, written: %#x", i, x, x+n, c)
		}
	}
	return append([]byte(nil), buf[x:x+n]...)
}

// TestRuleMatchesShortcut: a rule's lone port (the fast path's rule test,
// without the rule scan) is one for which match gives that rule for every
// source the rule covers; rules on one port with overlapping sources have
// none (first match wins), and the table copies them.
func TestRuleMatchesShortcut(t *testing.T) {
	c := testConfig()
	r := func(name, pfx string, port int, out string) Rule {
		return Rule{Name: name, Sources: []netip.Prefix{netip.MustParsePrefix(pfx)}, Port: port,
			Outside: []netip.Addr{netip.MustParseAddr(out)}, PortLo: 1024, PortHi: 2047}
	}
	c.Rules = []Rule{r("a", "10.8.0.0/25", 1, "198.18.1.1"), r("b", "10.8.0.0/24", 1, "198.18.1.2"),
		r("c", "10.8.0.0/24", 2, "198.18.1.3"), r("d", "10.8.0.128/25", 2, "198.18.1.4"),
		r("e", "10.9.0.0/24", 1, "198.18.1.5"), r("f", "10.8.0.128/25", 1, "198.18.1.6")}
	k, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{1, -1, 2, -1, 1, -1}
	if string(fmt.Sprint(k.lone[:len(want)])) != fmt.Sprint(want) {
		t.Fatalf("lone %v, want %v", k.lone[:len(want)], want)
	}
	tb := NewTable(0, 1)
	tb.Refresh(k, 1000e9)
	checked := 0
	for _, a := range []string{"10.8.0.2", "10.8.0.200", "10.9.0.7"} {
		src := a4(netip.MustParseAddr(a))
		for ri := range k.rules {
			if tb.lone[ri] != int16(k.lone[ri]) {
				t.Fatalf("rule %d: the table's lone port %d, the configuration's %d", ri, tb.lone[ri], k.lone[ri])
			}
			covers := false
			for _, p := range k.rules[ri].pfx {
				covers = covers || src&p.mask == p.addr
			}
			if !covers || k.lone[ri] < 0 {
				continue
			}
			checked++
			if m := k.match(src, int(k.lone[ri])); m != ri {
				t.Errorf("%s: rule %d's lone port %d, but match gives rule %d", a, ri, k.lone[ri], m)
			}
		}
	}
	if checked < 4 {
		t.Fatalf("only %d cases", checked)
	}
}

// TestOutFastPathKeepsAlive: outbound packets through the fast path alone
// keep a session alive past its idle timeout (the fast path stamps the
// last-seen second when it changes), and a FIN through it is remembered
// in the TCP state.
func TestOutFastPathKeepsAlive(t *testing.T) {
	c := testConfig()
	b := newTestTable(t, c)
	p := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
	mustOut(t, b, append([]byte(nil), p...))
	step := uint32(c.Timeouts.UDP/time.Second) / 2
	for i := range 6 { // 3 timeouts in all, every step within one
		b.now += step // no Refresh: its sweep is not what is tested
		hint := []uint64{b.Prefetch(p, 20)}
		b.Touch(hint)
		if buf, x := inFrame(p); !b.OutFast(buf, x, 1, hint[0]) {
			t.Fatalf("step %d: the fast path refused a session kept alive by its packets", i)
		}
	}
	s := ipPacket(inA, remote, protoTCP, tcp(40000, 80, tcpSYN, ""))
	mustOut(t, b, append([]byte(nil), s...))
	f := ipPacket(inA, remote, protoTCP, tcp(40000, 80, tcpFIN, ""))
	hint := []uint64{b.Prefetch(f, 20)}
	b.Touch(hint)
	if buf, x := inFrame(f); !b.OutFast(buf, x, 1, hint[0]) {
		t.Fatal("the fast path refused an established TCP session")
	}
	if st := b.sess[uint32(hint[0])-1].state; st&stFinOut == 0 || st&stSynOut == 0 {
		t.Fatalf("TCP state %#x after SYN and FIN out", st)
	}
}

// TestOutRoutedTTL: OutRouted translates as Out does and takes one off the
// TTL in the same checksum update; the IP checksum verifies for every TTL
// and every header sum (the folds' carries: one fold fails), and a packet it
// refuses is left as it was, TTL included.
func TestOutRoutedTTL(t *testing.T) {
	c := testConfig()
	a, b := newTestTable(t, c), newTestTable(t, c)
	for _, proto := range []uint8{protoUDP, protoTCP} {
		var p []byte
		if proto == protoUDP {
			p = ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
		} else {
			p = ipPacket(inA, remote, protoTCP, tcp(40000, 80, tcpSYN, ""))
		}
		mustOut(t, a, append([]byte(nil), p...))
		mustOut(t, b, append([]byte(nil), p...))
		for i := range 254 + 1<<16 {
			ttl, id := 2+i, uint16(0) // every TTL, then every header sum (each IP ID) at TTL 64
			if i >= 254 {
				ttl, id = 64, uint16(i-254)
			}
			in := append([]byte(nil), p...)
			in[8] = byte(ttl)
			binary.BigEndian.PutUint16(in[4:], id)
			in[10], in[11] = 0, 0
			binary.BigEndian.PutUint16(in[10:], csum.Checksum(in[:20]))
			q, r := append([]byte(nil), in...), append([]byte(nil), in...)
			if v, _ := a.Out(q, 20, 1); v != Done {
				t.Fatalf("Out %v", v)
			}
			hint := []uint64{b.Prefetch(r, 20)}
			b.Touch(hint)
			buf, x := inFrame(r)
			if !b.OutRouted(buf, x, 1, hint[0]) {
				t.Fatalf("proto %d ttl %d: OutRouted refused an established session", proto, ttl)
			}
			r = outOfFrame(t, buf, x, len(r))
			verify(t, r)
			if r[8] != byte(ttl-1) {
				t.Fatalf("TTL %d became %d", ttl, r[8])
			}
			r[8], r[10], r[11], q[10], q[11] = q[8], 0, 0, 0, 0
			if string(r) != string(q) {
				t.Fatalf("proto %d ttl %d: OutRouted %x, Out %x (IP checksums aside)", proto, ttl, r, q)
			}
		}
		// Another egress port (no rule): refused, nothing changed.
		r := append([]byte(nil), p...)
		hint := []uint64{b.Prefetch(r, 20)}
		b.Touch(hint)
		buf, x := inFrame(r)
		if b.OutRouted(buf, x, 2, hint[0]) || string(outOfFrame(t, buf, x, len(r))) != string(p) {
			t.Fatalf("OutRouted took a packet for another port or changed it: %x", r)
		}
	}
}

// PrefetchIP's first test is the first rule's sources (src0): it must
// follow reloads, match nothing with NAT off, and give what the general
// test gives.
func TestPrefetchFirstSources(t *testing.T) {
	hint := func(tb *Table, src netip.Addr) uint64 {
		p := ipPacket(src, remote, protoUDP, udp(5000, 53, "x"))
		return tb.PrefetchIP((*[PrefetchLen]byte)(p))
	}
	lan := netip.MustParseAddr("10.9.0.5")
	if h := hint(NewTable(0, 1), inA); h != 0 {
		t.Fatalf("no NAT: hint %#x", h)
	}
	c := testConfig()
	tb := newTestTable(t, c)
	if h := hint(tb, inA); h&probeSess == 0 {
		t.Fatalf("inside: hint %#x", h)
	}
	if h := hint(tb, lan); h != 0 {
		t.Fatalf("not inside: hint %#x", h)
	}
	c.Rules = append([]Rule{{Name: "lan", Sources: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24")}, Port: 1,
		Outside: []netip.Addr{netip.MustParseAddr("198.18.1.2")}, PortLo: 1024, PortHi: 2047}}, c.Rules...)
	k, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	tb.Refresh(k, 1001e9)
	tb.Publish()
	for _, a := range []netip.Addr{inA, lan} {
		p := ipPacket(a, remote, protoUDP, udp(5000, 53, "x"))
		want := uint64(tb.hashWire(le.Uint64(p[12:20]), le.Uint32(p[20:24]), protoUDP)) | probeSess
		if h := hint(tb, a); h != want {
			t.Fatalf("%v after reload: hint %#x, want %#x", a, h, want)
		}
	}
	c.Rules = c.Rules[:1] // the first rule's sources gone
	if k, err = Compile(c); err != nil {
		t.Fatal(err)
	}
	tb.Refresh(k, 1002e9)
	tb.Publish()
	if h := hint(tb, inA); h != 0 {
		t.Fatalf("rule removed: hint %#x", h)
	}
	tb.Refresh(nil, 1003e9)
	tb.Publish()
	if h := hint(tb, lan); h != 0 {
		t.Fatalf("NAT off: hint %#x", h)
	}
}
