package fwd_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// ipv4Frag cuts an IPv4 datagram into the fragment of n data bytes at
// byte offset off (a multiple of 8).
func ipv4Frag(dgram []byte, off, n int, more bool) []byte {
	f := append(append([]byte{}, dgram[:20]...), dgram[20+off:20+off+n]...)
	binary.BigEndian.PutUint16(f[2:], uint16(20+n))
	fo := uint16(off / 8)
	if more {
		fo |= 0x2000
	}
	binary.BigEndian.PutUint16(f[6:], fo)
	f[10], f[11] = 0, 0
	binary.BigEndian.PutUint16(f[10:], csum(f[:20], 0))
	return f
}

// A fragmented datagram to our VPN port (an OpenVPN client's full-size
// P_DATA_V2 at tun-mtu 1500) is not malformed: both fragments go to the
// host stack, which reassembles them, and are counted as host fragments.
// Before, the first fragment's UDP length (the whole datagram's) failed
// the parser and it was dropped as malformed.
func TestFragmentsForUsGoToTheHost(t *testing.T) {
	r := newRig(t, rigOpt{})
	ft := &fakeTunnel{server: r0v4.Addr(), peers: map[uint32]netip.Addr{}, peerOfOuter: map[netip.Addr]uint32{}}
	r.e.SetTunnel(ft, 1194)
	dgram := ipv4(aV4, r0v4.Addr(), 17, 64, false, udp(5000, 1194, make([]byte, 1544)))
	r.inject(0, eth(macR0, macA, 0x0800, ipv4Frag(dgram, 0, 1480, true)))
	r.inject(0, eth(macR0, macA, 0x0800, ipv4Frag(dgram, 1480, len(dgram)-20-1480, false)))
	r.poll()
	s := r.e.Stats()
	if s.Drops[fwd.DropMalformed] != 0 || s.HostFragments != 2 || s.Punts != 2 || len(ft.decapCalls) != 0 {
		t.Fatalf("malformed %d, host fragments %d, punts %d, decap calls %v: want 0, 2, 2, none",
			s.Drops[fwd.DropMalformed], s.HostFragments, s.Punts, ft.decapCalls)
	}
	n := r.e.Punts(func(port int, frame []byte) {
		if port != 0 || len(frame) < 34 || binary.BigEndian.Uint16(frame[20:])&0x3fff == 0 {
			t.Errorf("punted frame on port %d is not a fragment: % x", port, frame[:min(len(frame), 34)])
		}
	})
	if n != 2 {
		t.Fatalf("%d frames punted, want 2", n)
	}
	r.checkNoLeak()
}

// What the host reassembled comes back through InjectReceived and is
// decapsulated like a datagram that arrived whole; the same packet through
// InjectIP (an uplink's inner traffic) may not be.
func TestInjectReceivedDecapsulates(t *testing.T) {
	r := newRig(t, rigOpt{})
	client := netip.MustParseAddr("198.19.0.5")
	ft := &fakeTunnel{server: r0v4.Addr(), peers: map[uint32]netip.Addr{7: aV4}, peerOfOuter: map[netip.Addr]uint32{aV4: 7}}
	r.e.SetTunnel(ft, 1194)
	must(t, r.e.SetNeighbour(1, bV4, macB))
	inner := ipv4(client, bV4, 17, 64, false, udp(3333, 53, bytes.Repeat([]byte{0xa5}, 1472)))
	outer := ipv4(aV4, r0v4.Addr(), 17, 64, false, udp(5000, 1194, inner))
	must(t, r.e.InjectReceived(outer))
	r.poll()
	if len(ft.decapCalls) != 1 {
		t.Fatalf("decap calls %v, want one", ft.decapCalls)
	}
	p := parseEth(t, r.drainOne(1))
	if hdr, l4 := checkIPv4(t, p.l3); netip.AddrFrom4([4]byte(hdr[12:16])) != client || len(l4) != 8+1472 {
		t.Fatalf("bad inner packet % x", p.l3[:28])
	}
	must(t, r.e.InjectIP(outer))
	r.poll()
	if len(ft.decapCalls) != 1 {
		t.Fatalf("InjectIP's packet was decapsulated: decap calls %v", ft.decapCalls)
	}
	r.drain(0)
	r.checkNoLeak()
}

// fakeTunnel6 wraps inner packets in IPv6/UDP to the peer's address.
type fakeTunnel6 struct {
	server netip.Addr
	peer   netip.Addr
}

func (f *fakeTunnel6) Decap(q int, b *fwd.Batch) {
	for i := range b.Pkts {
		b.Pkts[i].Verdict, b.Pkts[i].Reason = fwd.VerdictDrop, fwd.DropTunnel
	}
}

func (f *fakeTunnel6) Encap(q int, b *fwd.Batch) {
	for i := range b.Pkts {
		p := &b.Pkts[i]
		n := int(p.Len)
		h := p.Push(48)
		s, d := f.server.As16(), f.peer.As16()
		clear(h)
		h[0], h[6], h[7] = 0x60, 17, 64
		binary.BigEndian.PutUint16(h[4:], uint16(8+n))
		copy(h[8:], s[:])
		copy(h[24:], d[:])
		binary.BigEndian.PutUint16(h[40:], 1194)
		binary.BigEndian.PutUint16(h[42:], 5000)
		binary.BigEndian.PutUint16(h[44:], uint16(8+n))
		u := p.Data()[40:]
		binary.BigEndian.PutUint16(u[6:], csum(u, pseudo(s[:], d[:], 17, len(u))))
		p.Flags = fwd.FlagL3Only | fwd.FlagIPv6
		p.Verdict = fwd.VerdictForward
	}
}

// An outer IPv6 datagram of our own over the egress MTU (a full-size
// inner packet to a client on IPv6 transport) is fragmented (RFC 8200
// §4.5: the source may). Before, it was dropped as too_big, and nobody
// heard of it: no ICMP about our own packets.
func TestOwnIPv6PacketsAreFragmented(t *testing.T) {
	r := newRig(t, rigOpt{separate: true})
	ft := &fakeTunnel6{server: r0v6.Addr(), peer: aV6}
	r.e.SetTunnel(ft, 1194)
	client := netip.MustParseAddr("198.19.0.5")
	must(t, r.e.AddRoute(netip.MustParsePrefix("198.19.0.0/24"), fwd.NextHop{Tunnel: true, Peer: 7}))
	must(t, r.e.SetNeighbour(0, aV6, macA))
	payload := make([]byte, 1472)
	for i := range payload {
		payload[i] = byte(i * 13)
	}
	inner := ipv4(bV4, client, 17, 64, false, udp(53, 3333, payload))
	r.inject(1, eth(macR1, macB, 0x0800, inner))
	r.poll()
	frags := r.drain(0)
	if len(frags) != 2 {
		t.Fatalf("%d packets out, want 2 fragments (drops: too_big %d)", len(frags), r.drops(fwd.DropTooBig))
	}
	var id uint32
	got := make([]byte, 8+len(inner))
	seen := 0
	for i, f := range frags {
		p := parseEth(t, f)
		if !bytes.Equal(p.dst, macA) || len(p.l3) > 1500 || p.l3[6] != 44 {
			t.Fatalf("fragment %d: to %v, %d bytes, next header %d", i, p.dst, len(p.l3), p.l3[6])
		}
		if int(binary.BigEndian.Uint16(p.l3[4:])) != len(p.l3)-40 {
			t.Fatalf("fragment %d: payload length %d for %d bytes", i, binary.BigEndian.Uint16(p.l3[4:]), len(p.l3))
		}
		fh := p.l3[40:48]
		fo := binary.BigEndian.Uint16(fh[2:])
		off, more := int(fo&^7), fo&1 != 0
		if i == 0 {
			id = binary.BigEndian.Uint32(fh[4:])
		}
		if fh[0] != 17 || binary.BigEndian.Uint32(fh[4:]) != id {
			t.Fatalf("fragment %d: next header %d id %#x, want 17 and %#x", i, fh[0], binary.BigEndian.Uint32(fh[4:]), id)
		}
		if last := off+len(p.l3)-48 == len(got); more == last {
			t.Fatalf("fragment %d: M flag %v at offset %d", i, more, off)
		}
		if off != 0 && (len(p.l3)-48)%8 != 0 && more {
			t.Fatalf("fragment %d: %d data bytes, not a multiple of 8", i, len(p.l3)-48)
		}
		copy(got[off:], p.l3[48:])
		seen += len(p.l3) - 48
	}
	if seen != len(got) || binary.BigEndian.Uint16(got[2:]) != 5000 || !innerMatches(got[8:], inner) {
		t.Fatal("fragments do not reassemble to the outer datagram")
	}
	if s := r.e.Stats(); s.Fragmented != 1 || s.Drops[fwd.DropTooBig] != 0 {
		t.Fatalf("fragmented %d, too_big %d", s.Fragmented, s.Drops[fwd.DropTooBig])
	}
	r.checkNoLeak()
}

// innerMatches compares a forwarded inner IPv4 packet with the original
// but for the TTL and header checksum the router changed.
func innerMatches(got, orig []byte) bool {
	if len(got) != len(orig) {
		return false
	}
	return bytes.Equal(got[:8], orig[:8]) && got[8] == orig[8]-1 && bytes.Equal(got[12:], orig[12:])
}

// Fragmenting our own IPv6 packets allocates nothing (one Poll = 64
// inner packets from port 0, 128 fragments out).
func TestFragment6DoesNotAllocate(t *testing.T) {
	client := netip.MustParseAddr("198.19.0.5")
	inner := eth(macR0, macA, 0x0800, ipv4(aV4, client, 17, 64, false, udp(53, 3333, make([]byte, 1472))))
	r := hotRig(t, fwd.ModeRouter, [][]byte{inner}, fwd.Config{})
	r.e.SetTunnel(&fakeTunnel6{server: r1v6.Addr(), peer: bV6}, 1194)
	must(t, r.e.AddRoute(netip.MustParsePrefix("198.19.0.0/24"), fwd.NextHop{Tunnel: true, Peer: 7}))
	r.poll()
	if a := testing.AllocsPerRun(50, func() { r.poll() }); a != 0 {
		t.Fatalf("%v allocations per poll", a)
	}
	if s := r.e.Stats(); s.Fragmented < 50*64 || s.Drops[fwd.DropTooBig] != 0 {
		t.Fatalf("fragmented %d, too_big %d", s.Fragmented, s.Drops[fwd.DropTooBig])
	}
}

// Fragments in transit are forwarded as they are, the first one too (its
// UDP length is the whole datagram's). Before, the first fragment of
// every fragmented UDP datagram routed through the appliance was dropped
// as malformed.
func TestTransitFragmentsAreForwarded(t *testing.T) {
	r := newRig(t, rigOpt{})
	must(t, r.e.SetNeighbour(1, bV4, macB))
	dgram := ipv4(aV4, bV4, 17, 64, false, udp(5000, 4500, make([]byte, 2000)))
	r.inject(0, eth(macR0, macA, 0x0800, ipv4Frag(dgram, 0, 1480, true)))
	r.inject(0, eth(macR0, macA, 0x0800, ipv4Frag(dgram, 1480, len(dgram)-20-1480, false)))
	r.poll()
	if out := r.drain(1); len(out) != 2 {
		t.Fatalf("%d fragments forwarded, want 2 (malformed drops %d)", len(out), r.drops(fwd.DropMalformed))
	}
	r.checkNoLeak()
}

// A fragment whose offset plus length runs past 65,535 bytes belongs to
// no valid datagram (RFC 791 §3.1: total length is 16 bits). Split to
// fit a smaller MTU, its later pieces' offsets would overflow the 13-bit
// field into the flags (MF, DF): it is dropped as malformed instead.
// One ending exactly at 65,535 is still split, every offset and flag
// right.
func TestRefragmentPast64KiBDropped(t *testing.T) {
	r := newRig(t, rigOpt{mtu: []int{1500, 576}})
	must(t, r.e.SetNeighbour(1, bV4, macB))
	dgram := ipv4(aV4, bV4, 17, 64, false, make([]byte, 65535-20))
	frag := func(off, n int) []byte {
		f := append(append([]byte{}, dgram[:20]...), make([]byte, n)...)
		binary.BigEndian.PutUint16(f[2:], uint16(20+n))
		binary.BigEndian.PutUint16(f[6:], uint16(off/8))
		f[10], f[11] = 0, 0
		binary.BigEndian.PutUint16(f[10:], csum(f[:20], 0))
		return f
	}
	r.inject(0, eth(macR0, macA, 0x0800, frag(8100*8, 1400))) // ends at 66,200
	r.poll()
	if out := r.drain(1); len(out) != 0 {
		for _, f := range out {
			p := parseEth(t, f)
			t.Logf("out: offset %d flags %#x", binary.BigEndian.Uint16(p.l3[6:])&0x1fff, binary.BigEndian.Uint16(p.l3[6:])>>13)
		}
		t.Fatalf("a fragment past 64 KiB was forwarded in %d pieces", len(out))
	}
	if got := r.drops(fwd.DropMalformed); got != 1 {
		t.Fatalf("malformed drops %d, want 1", got)
	}
	last := 65535 - 20 - 1400
	r.inject(0, eth(macR0, macA, 0x0800, frag(last&^7, 65535-20-last&^7))) // ends at 65,535
	r.poll()
	out := r.drain(1)
	if len(out) != 3 {
		t.Fatalf("%d pieces, want 3", len(out))
	}
	end := 0
	for i, f := range out {
		p := parseEth(t, f)
		fo := binary.BigEndian.Uint16(p.l3[6:])
		off, more := int(fo&0x1fff)*8, fo&0x2000 != 0
		if fo&0x4000 != 0 || more != (off+len(p.l3)-20 < 65535-20) {
			t.Fatalf("piece %d: flags %#x at offset %d", i, fo>>13, off)
		}
		end = max(end, off+len(p.l3)-20)
	}
	if end != 65535-20 {
		t.Fatalf("pieces end at %d", end)
	}
}
