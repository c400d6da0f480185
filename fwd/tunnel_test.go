package fwd_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// fakeTunnel: the UDP payload is the inner IP packet ("CTRL…" is a control
// packet it consumes). Encap wraps in IPv4/UDP from server to the peer.
type fakeTunnel struct {
	server      netip.Addr
	peers       map[uint32]netip.Addr
	decapCalls  []int
	encapCalls  []int
	consumed    int
	peerOfOuter map[netip.Addr]uint32
}

func (f *fakeTunnel) Decap(q int, b *fwd.Batch) {
	f.decapCalls = append(f.decapCalls, b.Len())
	for i := range b.Pkts {
		p := &b.Pkts[i]
		d := p.Data()
		ip := d[p.L3Off:]
		src := netip.AddrFrom4([4]byte(ip[12:16]))
		inner := int(p.L4Off) + 8
		if bytes.HasPrefix(d[inner:], []byte("CTRL")) {
			f.consumed++
			p.Verdict = fwd.VerdictConsumed
			continue
		}
		peer, ok := f.peerOfOuter[src]
		if !ok {
			p.Verdict, p.Reason = fwd.VerdictDrop, fwd.DropTunnel
			continue
		}
		p.Pull(inner)
		p.Flags = fwd.FlagL3Only | fwd.FlagIPv4
		p.Peer = peer
		p.Verdict = fwd.VerdictForward
	}
}

func (f *fakeTunnel) Encap(q int, b *fwd.Batch) {
	f.encapCalls = append(f.encapCalls, b.Len())
	for i := range b.Pkts {
		p := &b.Pkts[i]
		dst, ok := f.peers[p.Peer]
		if !ok {
			p.Verdict = fwd.VerdictDrop
			continue
		}
		n := int(p.Len)
		h := p.Push(28)
		copy(h, ipv4(f.server, dst, 17, 64, false, udp(1194, 5000, make([]byte, n)))[:28])
		u := p.Data()[20:]
		binary.BigEndian.PutUint16(u[6:], 0)
		s, d := f.server.As4(), dst.As4()
		binary.BigEndian.PutUint16(u[6:], csum(u, pseudo(s[:], d[:], 17, len(u))))
		p.Flags = fwd.FlagL3Only | fwd.FlagIPv4
	}
}

func TestTunnelRoundTrip(t *testing.T) {
	r := newRig(t, rigOpt{})
	client := netip.MustParseAddr("198.19.0.5")
	ft := &fakeTunnel{server: r0v4.Addr(), peers: map[uint32]netip.Addr{7: aV4},
		peerOfOuter: map[netip.Addr]uint32{aV4: 7}}
	r.e.SetTunnel(ft, 1194)
	must(t, r.e.AddRoute(netip.MustParsePrefix("198.19.0.0/24"), fwd.NextHop{Tunnel: true, Peer: 7}))
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(1, bV4, macB))

	inner := ipv4(client, bV4, 17, 64, false, udp(3333, 53, []byte("inner query")))
	outer := func(payload []byte) []byte {
		return eth(macR0, macA, 0x0800, ipv4(aV4, r0v4.Addr(), 17, 64, false, udp(5000, 1194, payload)))
	}
	r.inject(0, outer(inner))
	r.inject(0, outer(inner))
	r.inject(0, outer([]byte("CTRL hello")))
	r.poll()
	if len(ft.decapCalls) != 1 || ft.decapCalls[0] != 3 || ft.consumed != 1 {
		t.Fatalf("decap calls %v consumed %d: want one call with 3", ft.decapCalls, ft.consumed)
	}
	out := r.drain(1)
	if len(out) != 2 {
		t.Fatalf("%d inner packets out of port 1", len(out))
	}
	p := parseEth(t, out[0])
	hdr, l4 := checkIPv4(t, p.l3)
	if !bytes.Equal(p.dst, macB) || hdr[8] != 63 || netip.AddrFrom4([4]byte(hdr[12:16])) != client ||
		!bytes.HasSuffix(l4, []byte("inner query")) {
		t.Fatalf("bad inner packet % x", p.l3)
	}
	// B answers the client: into the tunnel, out as an outer datagram to A.
	r.inject(1, eth(macR1, macB, 0x0800, ipv4(bV4, client, 17, 64, false, udp(53, 3333, []byte("inner answer")))))
	r.poll()
	if len(ft.encapCalls) != 1 || ft.encapCalls[0] != 1 {
		t.Fatalf("encap calls %v", ft.encapCalls)
	}
	p = parseEth(t, r.drainOne(0))
	hdr, l4 = checkIPv4(t, p.l3)
	if !bytes.Equal(p.dst, macA) || netip.AddrFrom4([4]byte(hdr[16:20])) != aV4 || binary.BigEndian.Uint16(l4[2:]) != 5000 {
		t.Fatalf("bad outer packet % x", p.l3)
	}
	ihdr, il4 := checkIPv4(t, l4[8:])
	if ihdr[8] != 63 || netip.AddrFrom4([4]byte(ihdr[16:20])) != client || !bytes.HasSuffix(il4, []byte("inner answer")) {
		t.Fatalf("bad inner packet in tunnel % x", l4[8:])
	}
	// Unknown outer source: the tunnel drops it, counted.
	r.inject(1, eth(macR1, macB, 0x0800, ipv4(bV4, r1v4.Addr(), 17, 64, false, udp(5000, 1194, inner))))
	r.poll()
	if r.drops(fwd.DropTunnel) != 1 {
		t.Fatal("tunnel drop not counted")
	}
	r.checkNoLeak()
}

// TestTunnelClientToClient: a packet one peer sends to another peer's
// tunnel address is dropped (client_to_client off, the default) and
// counted, and forwarded peer to peer once SetClientToClient(true); the
// check costs no allocation.
func TestTunnelClientToClient(t *testing.T) {
	r := newRig(t, rigOpt{})
	c7, c8 := netip.MustParseAddr("198.19.0.5"), netip.MustParseAddr("198.19.0.6")
	ft := &fakeTunnel{server: r0v4.Addr(), peers: map[uint32]netip.Addr{7: aV4, 8: bV4},
		peerOfOuter: map[netip.Addr]uint32{aV4: 7, bV4: 8}}
	r.e.SetTunnel(ft, 1194)
	must(t, r.e.AddRoute(netip.PrefixFrom(c7, 32), fwd.NextHop{Tunnel: true, Peer: 7}))
	must(t, r.e.AddRoute(netip.PrefixFrom(c8, 32), fwd.NextHop{Tunnel: true, Peer: 8}))
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(1, bV4, macB))
	frame := eth(macR0, macA, 0x0800, ipv4(aV4, r0v4.Addr(), 17, 64, false,
		udp(5000, 1194, ipv4(c7, c8, 17, 64, false, udp(1, 2, []byte("hi peer"))))))

	r.inject(0, frame)
	r.poll()
	if len(ft.encapCalls) != 0 || r.drops(fwd.DropPeerToPeer) != 1 {
		t.Fatalf("client_to_client off: encap calls %v, drops %d", ft.encapCalls, r.drops(fwd.DropPeerToPeer))
	}
	if a := testing.AllocsPerRun(100, func() { r.inject(0, frame); r.poll() }); a != 0 {
		t.Fatalf("%v allocations per dropped packet", a)
	}
	r.e.SetClientToClient(true)
	r.inject(0, frame)
	r.poll()
	if len(ft.encapCalls) != 1 {
		t.Fatalf("client_to_client on: encap calls %v", ft.encapCalls)
	}
	p := parseEth(t, r.drainOne(1))
	hdr, l4 := checkIPv4(t, p.l3)
	if netip.AddrFrom4([4]byte(hdr[16:20])) != bV4 || !bytes.HasSuffix(l4, []byte("hi peer")) {
		t.Fatalf("bad outer packet to peer 8 % x", p.l3)
	}
	r.checkNoLeak()
}

// TestTunnelDemux: the tunnel's datagrams go to Decap on any of our
// addresses (the early demux compares with every port's), a datagram to
// the tunnel's port on an address that is not ours is routed on, and
// with the tunnel removed one to our address goes to the host.
func TestTunnelDemux(t *testing.T) {
	r := newRig(t, rigOpt{})
	client := netip.MustParseAddr("198.19.0.5")
	ft := &fakeTunnel{server: r0v4.Addr(), peers: map[uint32]netip.Addr{7: aV4},
		peerOfOuter: map[netip.Addr]uint32{aV4: 7, bV4: 7}}
	r.e.SetTunnel(ft, 1194)
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(1, bV4, macB))
	inner := ipv4(client, bV4, 17, 64, false, udp(3333, 53, []byte("inner")))

	// To port 1's address, arriving on port 0.
	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, r1v4.Addr(), 17, 64, false, udp(5000, 1194, inner))))
	r.poll()
	if len(ft.decapCalls) != 1 || len(r.drain(1)) != 1 {
		t.Fatalf("to our other address: decap calls %v", ft.decapCalls)
	}
	// To B, through us: forwarded as it is.
	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 17, 64, false, udp(5000, 1194, inner))))
	r.poll()
	p := parseEth(t, r.drainOne(1))
	if hdr, l4 := checkIPv4(t, p.l3); len(ft.decapCalls) != 1 || hdr[8] != 63 || !bytes.HasSuffix(l4, []byte("inner")) {
		t.Fatalf("through us: decap calls %v, packet % x", ft.decapCalls, p.l3)
	}
	// No tunnel: the host's.
	r.e.SetTunnel(nil, 0)
	punts := r.e.Stats().Punts
	r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, r0v4.Addr(), 17, 64, false, udp(5000, 1194, inner))))
	r.poll()
	if len(ft.decapCalls) != 1 || r.e.Stats().Punts != punts+1 {
		t.Fatalf("no tunnel: decap calls %v, punts %d (was %d)", ft.decapCalls, r.e.Stats().Punts, punts)
	}
	r.e.Punts(func(int, []byte) {})
	r.checkNoLeak()
}
