package vpnload

import (
	"bytes"
	"encoding/binary"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/vpn"
)

// TestFrameHeader checks the raw generator's frame header field by field
// and that its IPv4 checksum verifies.
func TestFrameHeader(t *testing.T) {
	dstMAC, _ := net.ParseMAC("02:00:00:00:00:01")
	srcMAC, _ := net.ParseMAC("02:00:00:00:00:02")
	src := netip.MustParseAddrPort("198.18.80.2:40001")
	dst := netip.MustParseAddrPort("198.18.80.1:1194")
	h := frameHeader(dstMAC, srcMAC, src, dst, 116)
	if !bytes.Equal(h[0:6], dstMAC) || !bytes.Equal(h[6:12], srcMAC) || binary.BigEndian.Uint16(h[12:]) != 0x0800 {
		t.Fatalf("Ethernet header % x", h[:14])
	}
	ip := h[ethHdrLen:]
	if netns.Checksum(ip[:ipv4HdrLen]) != 0xffff {
		t.Errorf("IPv4 header checksum does not verify: % x", ip[:ipv4HdrLen])
	}
	if ip[0] != 0x45 || ip[9] != 17 || binary.BigEndian.Uint16(ip[2:]) != 20+8+116 {
		t.Errorf("IPv4 header % x", ip[:ipv4HdrLen])
	}
	if netip.AddrFrom4([4]byte(ip[12:16])) != src.Addr() || netip.AddrFrom4([4]byte(ip[16:20])) != dst.Addr() {
		t.Errorf("IPv4 addresses % x", ip[12:20])
	}
	udp := ip[ipv4HdrLen:]
	if binary.BigEndian.Uint16(udp[0:]) != 40001 || binary.BigEndian.Uint16(udp[2:]) != 1194 ||
		binary.BigEndian.Uint16(udp[4:]) != 8+116 || binary.BigEndian.Uint16(udp[6:]) != 0 {
		t.Errorf("UDP header % x", udp[:udpHdrLen])
	}
}

// TestRawGenerator offers paced traffic through ovfwd with the raw
// generator (two threads, so both own clients; half the packets sealed
// ahead, half on the fly): most of it must reach
// the sink, every client's peer must have received it at the address its
// socket handshook from (no float), and the tunnels must still carry an
// echo afterwards through the clients' own sockets.
func TestRawGenerator(t *testing.T) {
	const clients, pps = 6, 1000
	l := newLab(t, clients, Options{})
	srv := l.startOvfwd()
	cs := l.dial(l.cfgs)
	// Resolve the sink's neighbour entry through one client first.
	if !echoSink(cs[0], 1, 6*time.Second) {
		t.Fatal("no echo through the tunnel before the raw traffic")
	}
	g, err := newRawGen(l.topo, cs, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	if len(g.workers) != 2 {
		t.Fatalf("%d workers, want 2", len(g.workers))
	}
	before, err := status.Fetch(srv.status, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sink0, err := l.topo.sinkPackets()
	if err != nil {
		t.Fatal(err)
	}
	// About half the window's packets are sealed ahead, the rest on the
	// fly: both must arrive, and no id may repeat.
	frame := frameHdrLen + vpn.DataHeaderLen + 28 + 64
	g.preseal(clients * pps / 2 * frame)
	presealed := 0
	for _, w := range g.workers {
		presealed += w.preN
	}
	if presealed < clients*pps/4 {
		t.Fatalf("%d packets sealed ahead, want about %d", presealed, clients*pps/2)
	}
	sent, refused, failed, err := g.offer(pps, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	sink1, err := l.topo.sinkPackets()
	if err != nil {
		t.Fatal(err)
	}
	delivered := sink1 - sink0
	t.Logf("sent %d refused %d failed %d delivered %d", sent, refused, failed, delivered)
	if sent < clients*pps/2 || failed != 0 {
		t.Fatalf("generator sent %d (want about %d), %d not sealed", sent, clients*pps, failed)
	}
	if delivered < sent*3/4 {
		t.Fatalf("sink received %d of %d raw packets", delivered, sent)
	}
	after, err := status.Fetch(srv.status, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rx := func(st *status.Snapshot) map[string]uint64 {
		m := map[string]uint64{}
		for _, p := range st.VPN.Peers {
			m[p.Real] = p.Rx.Packets
		}
		return m
	}
	for reason, n := range after.VPN.Drops {
		if n != before.VPN.Drops[reason] {
			t.Errorf("server dropped %d data packets: %s", n-before.VPN.Drops[reason], reason)
		}
	}
	rx0, rx1 := rx(before), rx(after)
	for i, c := range cs {
		real := c.LocalAddr().String()
		if got := rx1[real] - rx0[real]; got < pps/2 {
			t.Errorf("client %d (%s): server counted %d packets from it, want about %d (peers now %v)", i, real, got, pps, rx1)
		}
	}
	for i, c := range cs {
		if !echoSink(c, uint16(10+i), 6*time.Second) {
			t.Errorf("client %d: no echo after the raw traffic", i)
		}
	}
	w := g.workers[0]
	if a := testing.AllocsPerRun(20, func() { w.sendBatch(rawBatch) }); a != 0 || w.err != nil {
		t.Errorf("sendBatch: %v allocations per batch (want 0), err %v", a, w.err)
	}
}
