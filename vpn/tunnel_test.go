package vpn

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/csum"
)

const bufSize = 2048

var (
	srvLocal4  = netip.MustParseAddrPort("198.18.0.1:1194")
	cliRemote4 = netip.MustParseAddrPort("198.18.0.2:40000")
	srvLocal6  = netip.MustParseAddrPort("[2001:db8::1]:1194")
	cliRemote6 = netip.MustParseAddrPort("[2001:db8::2]:40000")
)

// client is the far end of a tunnel: the mirror keys, and a packet-id counter.
type client struct {
	keys map[uint8]*DataKey
	kid  uint8
	pid  uint32
	comp Comp
}

type lab struct {
	t   *testing.T
	tun *Tunnel
	id  uint32
	cli *client
}

func newLab(t *testing.T, c Cipher, local, remote netip.AddrPort, comp Comp) *lab {
	t.Helper()
	tun := NewTunnel(TunnelConfig{Queues: 2, MaxPeers: 16, PuntRing: 4, EventRing: 8})
	const id = 3
	if err := tun.AddPeer(PeerConfig{ID: id, Remote: remote, Local: local, Comp: comp}); err != nil {
		t.Fatal(err)
	}
	l := &lab{t: t, tun: tun, id: id, cli: &client{keys: map[uint8]*DataKey{}, comp: comp}}
	l.installKey(c, 0, Primary)
	return l
}

func (l *lab) installKey(c Cipher, kid uint8, slot Slot) {
	l.t.Helper()
	srv, cli := testKeys(c, kid)
	if err := l.tun.InstallKey(l.id, slot, srv); err != nil {
		l.t.Fatal(err)
	}
	l.cli.keys[kid] = mustKey(l.t, cli)
}

// frameHdr writes Ethernet + outer IP + UDP around a UDP payload into a
// fresh buffer, as a port would hand it to the pipeline.
func outerPacket(from, to netip.AddrPort, payload []byte) fwd.Packet {
	buf := make([]byte, bufSize)
	off := fwd.Headroom
	eth := 14
	ipLen := ipv4HeaderLen
	if from.Addr().Is6() {
		ipLen = ipv6HeaderLen
	}
	d := buf[off:]
	ip := d[eth:]
	udpLen := udpHeaderLen + len(payload)
	if from.Addr().Is4() {
		binary.BigEndian.PutUint16(d[12:], 0x0800)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(ipLen+udpLen))
		ip[8], ip[9] = 64, protoUDP
		s, t := from.Addr().As4(), to.Addr().As4()
		copy(ip[12:], s[:])
		copy(ip[16:], t[:])
	} else {
		binary.BigEndian.PutUint16(d[12:], 0x86dd)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6], ip[7] = protoUDP, 64
		s, t := from.Addr().As16(), to.Addr().As16()
		copy(ip[8:], s[:])
		copy(ip[24:], t[:])
	}
	udp := ip[ipLen:]
	binary.BigEndian.PutUint16(udp[0:], from.Port())
	binary.BigEndian.PutUint16(udp[2:], to.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	copy(udp[udpHeaderLen:], payload)
	fam := fwd.FlagIPv4
	if from.Addr().Is6() {
		fam = fwd.FlagIPv6
	}
	return fwd.Packet{Buf: buf, Off: uint16(off), Len: uint16(eth + ipLen + udpLen),
		Flags: fwd.FlagParsed | fwd.FlagUDP | fam | fwd.FlagLocal, L3Off: uint8(eth), L4Off: uint8(eth + ipLen)}
}

// seal frames and seals plain the way a client would.
func (c *client) seal(peerID uint32, plain []byte) []byte {
	c.pid++
	framed := append([]byte(nil), plain...)
	switch c.comp {
	case CompLZO:
		framed = append([]byte{noCompressByte}, plain...)
	case CompStub:
		if len(plain) > 0 {
			framed = append(append([]byte{noCompressByteSwap}, plain[1:]...), plain[0])
		}
	case CompStubV2:
		if len(plain) > 0 && plain[0] == compAlgV2Indicator {
			framed = append([]byte{compAlgV2Indicator, compAlgV2UncompressedID}, plain...)
		}
	}
	return c.keys[c.kid].Seal(make([]byte, 0, 2048), peerID, c.pid, framed)
}

// open parses an Encap result, checks the outer headers and checksums, and
// decrypts it with the client's keys, undoing the framing.
func (c *client) open(t *testing.T, p *fwd.Packet, from, to netip.AddrPort) (plain []byte, kid uint8) {
	t.Helper()
	d := append([]byte(nil), p.Data()...)
	if p.Flags&fwd.FlagL3Only == 0 || p.L3Off != 0 {
		t.Fatalf("encap flags %b l3 %d", p.Flags, p.L3Off)
	}
	var udp []byte
	if to.Addr().Is4() {
		if p.Flags&fwd.FlagIPv4 == 0 || d[0] != 0x45 || d[9] != protoUDP || int(binary.BigEndian.Uint16(d[2:])) != len(d) {
			t.Fatalf("bad outer IPv4 header % x", d[:20])
		}
		if csum.Fold(csum.Sum(0, d[:20])) != 0 {
			t.Fatalf("IPv4 header checksum wrong")
		}
		if netip.AddrFrom4([4]byte(d[12:16])) != from.Addr() || netip.AddrFrom4([4]byte(d[16:20])) != to.Addr() {
			t.Fatalf("outer addresses %x", d[12:20])
		}
		udp = d[20:]
	} else {
		if p.Flags&fwd.FlagIPv6 == 0 || d[0] != 0x60 || d[6] != protoUDP || int(binary.BigEndian.Uint16(d[4:]))+40 != len(d) {
			t.Fatalf("bad outer IPv6 header % x", d[:40])
		}
		if netip.AddrFrom16([16]byte(d[8:24])) != from.Addr() || netip.AddrFrom16([16]byte(d[24:40])) != to.Addr() {
			t.Fatalf("outer addresses %x", d[8:40])
		}
		udp = d[40:]
		acc := csum.Sum(0, d[8:40]) + uint32(len(udp)) + protoUDP
		if csum.Fold(csum.Sum(acc, udp)) != 0 || binary.BigEndian.Uint16(udp[6:]) == 0 {
			t.Fatalf("IPv6 UDP checksum wrong")
		}
	}
	if int(p.L4Off) != len(d)-len(udp) {
		t.Fatalf("L4Off %d", p.L4Off)
	}
	if binary.BigEndian.Uint16(udp[0:]) != from.Port() || binary.BigEndian.Uint16(udp[2:]) != to.Port() || int(binary.BigEndian.Uint16(udp[4:])) != len(udp) {
		t.Fatalf("bad UDP header % x", udp[:8])
	}
	payload := udp[8:]
	kid = payload[0] & 7
	k := c.keys[kid]
	if k == nil {
		t.Fatalf("encap used key_id %d the client does not have", kid)
	}
	plain, _, err := k.Open(payload)
	if err != nil {
		t.Fatalf("client cannot open: %v", err)
	}
	switch c.comp {
	case CompLZO:
		if plain[0] != noCompressByte {
			t.Fatalf("missing 0xFA")
		}
		plain = plain[1:]
	case CompStub:
		if plain[0] != noCompressByteSwap {
			t.Fatalf("missing 0xFB")
		}
		plain = append([]byte{plain[len(plain)-1]}, plain[1:len(plain)-1]...)
	}
	return plain, kid
}

func inner4(n int) []byte {
	b := make([]byte, n)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	b[8], b[9] = 64, 6
	copy(b[12:], []byte{10, 8, 0, 2, 10, 9, 0, 1})
	for i := 20; i < n; i++ {
		b[i] = byte(i)
	}
	return b
}

func inner6(n int) []byte {
	b := make([]byte, n)
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(n-40))
	b[6], b[7] = 17, 64
	for i := 40; i < n; i++ {
		b[i] = byte(i * 3)
	}
	return b
}

func decapOne(tun *Tunnel, q int, p fwd.Packet) fwd.Packet {
	b := fwd.NewBatch(1)
	b.Add(&p)
	tun.Decap(q, b)
	return b.Pkts[0]
}

func encapOne(tun *Tunnel, q int, p fwd.Packet) fwd.Packet {
	b := fwd.NewBatch(1)
	b.Add(&p)
	tun.Encap(q, b)
	return b.Pkts[0]
}

// innerPacket puts an inner IP packet into a fresh buffer at the headroom.
func innerPacket(peerID uint32, inner []byte) fwd.Packet {
	buf := make([]byte, bufSize)
	copy(buf[fwd.Headroom:], inner)
	fam := fwd.FlagIPv4
	if inner[0]>>4 == 6 {
		fam = fwd.FlagIPv6
	}
	return fwd.Packet{Buf: buf, Off: fwd.Headroom, Len: uint16(len(inner)), Flags: fwd.FlagL3Only | fam, Peer: peerID}
}

func TestDecapEncapRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name          string
		c             Cipher
		local, remote netip.AddrPort
		comp          Comp
	}{
		{"v4-aes128", AES128GCM, srvLocal4, cliRemote4, CompNone},
		{"v6-aes256", AES256GCM, srvLocal6, cliRemote6, CompNone},
		{"v6-chacha", ChaCha20Poly1305, srvLocal6, cliRemote6, CompNone},
		{"v4-comp-lzo-no", AES256GCM, srvLocal4, cliRemote4, CompLZO},
		{"v6-compress-stub", AES128GCM, srvLocal6, cliRemote6, CompStub},
		{"v4-stub-v2", AES128GCM, srvLocal4, cliRemote4, CompStubV2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t, tc.c, tc.local, tc.remote, tc.comp)
			for _, inner := range [][]byte{inner4(20), inner4(1400), inner6(40), inner6(1280), inner4(41)} {
				// In: client → tunnel.
				p := decapOne(l.tun, 1, outerPacket(tc.remote, tc.local, l.cli.seal(l.id, inner)))
				if p.Verdict != fwd.VerdictForward {
					t.Fatalf("decap verdict %d, stats %+v", p.Verdict, l.tun.Stats().Drops)
				}
				fam := fwd.FlagIPv4
				if inner[0]>>4 == 6 {
					fam = fwd.FlagIPv6
				}
				if p.Flags != fwd.FlagL3Only|fam || p.Peer != l.id || !bytes.Equal(p.Data(), inner) {
					t.Fatalf("decap: flags %b peer %d data %x", p.Flags, p.Peer, p.Data())
				}
				// Out: tunnel → client, in place in the same buffer.
				p.Verdict = fwd.VerdictForward
				out := encapOne(l.tun, 0, p)
				if out.Verdict != fwd.VerdictForward {
					t.Fatalf("encap verdict %d drops %v", out.Verdict, l.tun.Stats().Drops)
				}
				got, _ := l.cli.open(t, &out, tc.local, tc.remote)
				if !bytes.Equal(got, inner) {
					t.Fatalf("client got %x, want %x", got, inner)
				}
			}
			s, _ := l.tun.PeerStats(l.id)
			if s.RxPackets != 5 || s.TxPackets != 5 || s.RxBytes != 20+1400+40+1280+41 || s.TxBytes != s.RxBytes {
				t.Fatalf("peer stats %+v", s)
			}
		})
	}
}

func TestDecapDropsAndCounts(t *testing.T) {
	l := newLab(t, AES128GCM, srvLocal4, cliRemote4, CompNone)
	good := l.cli.seal(l.id, inner4(60))
	tamper := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name    string
		payload []byte
		want    TunnelDrop
	}{
		{"short", good[:DataHeaderLen-1], DropShort},
		{"data v1", tamper(func(b []byte) []byte { b[0] = PDataV1 << 3; return b }), DropDataV1},
		{"unknown peer", tamper(func(b []byte) []byte { b[3] = 4; return b }), DropUnknownPeer},
		{"peer-id undefined", tamper(func(b []byte) []byte { b[1], b[2], b[3] = 0xff, 0xff, 0xff; return b }), DropUnknownPeer},
		{"unknown key", tamper(func(b []byte) []byte { b[0] = PDataV2<<3 | 6; return b }), DropUnknownKey},
		{"auth", tamper(func(b []byte) []byte { b[30] ^= 1; return b }), DropAuth},
		{"bad inner", l.cli.seal(l.id, []byte{0x70, 1, 2, 3}), DropBadInner},
		{"inner too short", l.cli.seal(l.id, inner4(60)[:30]), DropBadInner},
	}
	for _, tc := range cases {
		before := l.tun.Stats().Drops[tc.want]
		p := decapOne(l.tun, 0, outerPacket(cliRemote4, srvLocal4, tc.payload))
		if p.Verdict != fwd.VerdictDrop || p.Reason != fwd.DropTunnel {
			t.Fatalf("%s: verdict %d reason %v", tc.name, p.Verdict, p.Reason)
		}
		if got := l.tun.Stats().Drops[tc.want] - before; got != 1 {
			t.Fatalf("%s: %v counted %d times, all %v", tc.name, tc.want, got, l.tun.Stats().Drops)
		}
	}
	// A replay of an accepted packet.
	if p := decapOne(l.tun, 0, outerPacket(cliRemote4, srvLocal4, good)); p.Verdict != fwd.VerdictForward {
		t.Fatal("good packet dropped")
	}
	if p := decapOne(l.tun, 1, outerPacket(cliRemote4, srvLocal4, good)); p.Verdict != fwd.VerdictDrop || l.tun.Stats().Drops[DropReplay] != 1 {
		t.Fatalf("replay not dropped: %v", l.tun.Stats().Drops)
	}
	s, _ := l.tun.PeerStats(l.id)
	if s.Drops[DropAuth] != 1 || s.Drops[DropReplay] != 1 || s.Drops[DropUnknownPeer] != 0 || s.RxPackets != 1 {
		t.Fatalf("peer drops %v rx %d", s.Drops, s.RxPackets)
	}
	// Malformed outer headers.
	p := outerPacket(cliRemote4, srvLocal4, good)
	binary.BigEndian.PutUint16(p.Buf[int(p.Off)+int(p.L4Off)+4:], 5000)
	if decapOne(l.tun, 0, p).Verdict != fwd.VerdictDrop || l.tun.Stats().Drops[DropBadOuter] != 1 {
		t.Fatal("UDP length beyond the packet accepted")
	}
	p = outerPacket(cliRemote4, srvLocal4, good)
	p.Flags |= fwd.FlagFrag
	if decapOne(l.tun, 0, p).Verdict != fwd.VerdictDrop || l.tun.Stats().Drops[DropFragment] != 1 {
		t.Fatal("fragment accepted")
	}
	p = outerPacket(cliRemote4, srvLocal4, good)
	p.Flags &^= fwd.FlagParsed
	if decapOne(l.tun, 0, p).Verdict != fwd.VerdictDrop {
		t.Fatal("unparsed packet accepted")
	}
}

func TestDecapPingConsumed(t *testing.T) {
	l := newLab(t, AES256GCM, srvLocal4, cliRemote4, CompLZO)
	l.tun.Tick(l.tun.start.Add(5 * time.Second))
	p := decapOne(l.tun, 0, outerPacket(cliRemote4, srvLocal4, l.cli.seal(l.id, PingMagic[:])))
	if p.Verdict != fwd.VerdictConsumed {
		t.Fatalf("ping verdict %d", p.Verdict)
	}
	s, _ := l.tun.PeerStats(l.id)
	if s.PingsReceived != 1 || s.RxPackets != 0 || s.LastRecv != 5*time.Second || l.tun.Stats().PingsReceived != 1 {
		t.Fatalf("stats after ping: %+v", s)
	}
	// The server's own ping decrypts to the magic on the client.
	payload, to, err := l.tun.SealPing(l.id)
	if err != nil || to != cliRemote4 {
		t.Fatalf("SealPing: %v %v", to, err)
	}
	plain, _, err := l.cli.keys[0].Open(payload)
	if err != nil || !bytes.Equal(plain, append([]byte{noCompressByte}, PingMagic[:]...)) {
		t.Fatalf("client opened ping %x, %v", plain, err)
	}
	// OCC EXIT is consumed and reported.
	exit := append(append([]byte(nil), OCCMagic[:]...), OCCExit)
	if p := decapOne(l.tun, 1, outerPacket(cliRemote4, srvLocal4, l.cli.seal(l.id, exit))); p.Verdict != fwd.VerdictConsumed {
		t.Fatalf("OCC exit verdict %d", p.Verdict)
	}
	ev := l.tun.Poll(l.tun.start.Add(6*time.Second), nil)
	if len(ev) != 1 || ev[0].Kind != EventExit || ev[0].Peer != l.id {
		t.Fatalf("events %+v", ev)
	}
}

func TestDecapPuntsControl(t *testing.T) {
	l := newLab(t, AES128GCM, srvLocal6, cliRemote6, CompNone)
	ctl := []byte{PControlHardResetClientV2 << 3, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0}
	for i := 0; i < 6; i++ { // the ring holds 4 per queue
		ctl[1] = byte(i)
		p := decapOne(l.tun, 1, outerPacket(cliRemote6, srvLocal6, ctl))
		want := fwd.VerdictConsumed
		if i >= 4 {
			want = fwd.VerdictDrop
		}
		if p.Verdict != want {
			t.Fatalf("control packet %d: verdict %d", i, p.Verdict)
		}
	}
	if got := l.tun.Stats().Drops[DropPuntFull]; got != 2 {
		t.Fatalf("punt_full %d", got)
	}
	select {
	case <-l.tun.ControlReady():
	default:
		t.Fatal("no ControlReady token after punting")
	}
	buf := make([]byte, 4096)
	for i := 0; i < 4; i++ {
		cp, ok := l.tun.ReadControl(buf)
		if !ok || cp.From != cliRemote6 || cp.To != srvLocal6 || cp.Queue != 1 || cp.Data[1] != byte(i) || len(cp.Data) != len(ctl) {
			t.Fatalf("ReadControl %d: %+v %v", i, cp, ok)
		}
	}
	if _, ok := l.tun.ReadControl(buf); ok {
		t.Fatal("ring should be empty")
	}
	// Data packets alone raise no token.
	decapOne(l.tun, 0, outerPacket(cliRemote6, srvLocal6, l.cli.seal(l.id, inner6(40))))
	select {
	case <-l.tun.ControlReady():
		t.Fatal("ControlReady token without a control packet")
	default:
	}
}

func TestFloat(t *testing.T) {
	l := newLab(t, AES128GCM, srvLocal4, cliRemote4, CompNone)
	moved := netip.MustParseAddrPort("198.18.7.9:5555")
	// A forged packet from the new address moves nothing.
	forged := l.cli.seal(l.id, inner4(40))
	forged[len(forged)-1] ^= 1
	if p := decapOne(l.tun, 0, outerPacket(moved, srvLocal4, forged)); p.Verdict != fwd.VerdictDrop {
		t.Fatal("forged packet accepted")
	}
	if s, _ := l.tun.PeerStats(l.id); s.Remote != cliRemote4 {
		t.Fatalf("forged packet moved the peer to %v", s.Remote)
	}
	if ev := l.tun.Poll(time.Now(), nil); len(ev) != 0 {
		t.Fatalf("events after forgery: %+v", ev)
	}
	// A replayed genuine packet from the new address moves nothing either.
	genuine := l.cli.seal(l.id, inner4(40))
	if p := decapOne(l.tun, 0, outerPacket(cliRemote4, srvLocal4, genuine)); p.Verdict != fwd.VerdictForward {
		t.Fatal("genuine packet dropped")
	}
	if p := decapOne(l.tun, 0, outerPacket(moved, srvLocal4, genuine)); p.Verdict != fwd.VerdictDrop {
		t.Fatal("replayed packet accepted")
	}
	if s, _ := l.tun.PeerStats(l.id); s.Remote != cliRemote4 {
		t.Fatalf("replayed packet moved the peer to %v", s.Remote)
	}
	// An authentic new packet from the new address floats the peer.
	if p := decapOne(l.tun, 1, outerPacket(moved, srvLocal4, l.cli.seal(l.id, inner4(40)))); p.Verdict != fwd.VerdictForward {
		t.Fatal("authentic float packet dropped")
	}
	if s, _ := l.tun.PeerStats(l.id); s.Remote != moved {
		t.Fatalf("peer at %v after float, want %v", s.Remote, moved)
	}
	ev := l.tun.Poll(time.Now(), nil)
	if len(ev) != 1 || ev[0].Kind != EventFloat || ev[0].Addr != moved || ev[0].Peer != l.id {
		t.Fatalf("float events %+v", ev)
	}
	// Replies now go to the new address.
	out := encapOne(l.tun, 0, innerPacket(l.id, inner4(100)))
	if got, _ := l.cli.open(t, &out, srvLocal4, moved); !bytes.Equal(got, inner4(100)) {
		t.Fatal("reply after float")
	}
	// A NAT rebinding (the same address, another port) floats too: the
	// in-place comparison covers the ports.
	rebound := netip.AddrPortFrom(moved.Addr(), moved.Port()+1)
	if p := decapOne(l.tun, 0, outerPacket(rebound, srvLocal4, l.cli.seal(l.id, inner4(40)))); p.Verdict != fwd.VerdictForward {
		t.Fatal("authentic packet after rebinding dropped")
	}
	if ev := l.tun.Poll(time.Now(), nil); len(ev) != 1 || ev[0].Kind != EventFloat || ev[0].Addr != rebound {
		t.Fatalf("rebinding events %+v", ev)
	}
	// The same peer reaching another of our addresses moves the local end
	// alone: replies leave from there, and it is no float.
	local2 := netip.AddrPortFrom(netip.MustParseAddr("198.18.0.3"), srvLocal4.Port())
	if p := decapOne(l.tun, 0, outerPacket(rebound, local2, l.cli.seal(l.id, inner4(40)))); p.Verdict != fwd.VerdictForward {
		t.Fatal("authentic packet to another local address dropped")
	}
	if ev := l.tun.Poll(time.Now(), nil); len(ev) != 0 {
		t.Fatalf("a new local address raised %+v", ev)
	}
	if s, _ := l.tun.PeerStats(l.id); s.Local != local2 || s.Remote != rebound {
		t.Fatalf("endpoint %v -> %v, want %v -> %v", s.Remote, s.Local, rebound, local2)
	}
}

// TestKeyRotation walks a renegotiation: the new key arrives as secondary,
// both key_ids decrypt, the swap moves sending to the new key, and dropping
// the lame duck makes its key_id unknown. Traffic never stops.
func TestKeyRotation(t *testing.T) {
	l := newLab(t, AES256GCM, srvLocal4, cliRemote4, CompNone)
	send := func(kid uint8, want fwd.Verdict) {
		t.Helper()
		l.cli.kid = kid
		if p := decapOne(l.tun, 0, outerPacket(cliRemote4, srvLocal4, l.cli.seal(l.id, inner4(80)))); p.Verdict != want {
			t.Fatalf("key_id %d: verdict %d, want %d", kid, p.Verdict, want)
		}
	}
	recvKeyID := func() uint8 {
		t.Helper()
		out := encapOne(l.tun, 0, innerPacket(l.id, inner4(80)))
		_, kid := l.cli.open(t, &out, srvLocal4, cliRemote4)
		return kid
	}
	send(0, fwd.VerdictForward)
	_, cli1 := testKeys(AES256GCM, 1)
	l.cli.keys[1] = mustKey(t, cli1)
	send(1, fwd.VerdictDrop) // the client has it, the tunnel not yet
	l.installKey(AES256GCM, 1, Secondary)
	send(1, fwd.VerdictForward)
	send(0, fwd.VerdictForward)
	if kid := recvKeyID(); kid != 0 {
		t.Fatalf("sent with key_id %d before the swap", kid)
	}
	if err := l.tun.SetPrimary(l.id, 1); err != nil {
		t.Fatal(err)
	}
	if kid := recvKeyID(); kid != 1 {
		t.Fatalf("sent with key_id %d after the swap", kid)
	}
	send(0, fwd.VerdictForward) // late packets on the lame duck still arrive
	s, _ := l.tun.PeerStats(l.id)
	if s.PrimaryKeyID != 1 || s.SecondaryKeyID != 0 || s.TxPacketID != 1 {
		t.Fatalf("keys %+v", s)
	}
	if err := l.tun.DropKey(l.id, 0); err != nil {
		t.Fatal(err)
	}
	send(0, fwd.VerdictDrop)
	send(1, fwd.VerdictForward)
	if err := l.tun.SetPrimary(l.id, 5); err == nil {
		t.Fatal("SetPrimary to a missing key succeeded")
	}
}

func TestPacketIDExhaustion(t *testing.T) {
	l := newLab(t, AES128GCM, srvLocal4, cliRemote4, CompNone)
	k := l.tun.peers.Load().get(l.id).keys.Load().slot[Primary]
	k.txLast.Store(PacketIDWrapTrigger - 2)
	for i := 0; i < 3; i++ {
		if p := encapOne(l.tun, 0, innerPacket(l.id, inner4(40))); p.Verdict != fwd.VerdictForward {
			t.Fatalf("packet %d near the trigger dropped", i)
		}
	}
	ev := l.tun.Poll(time.Now(), nil)
	if len(ev) != 1 || ev[0].Kind != EventKeyWearOut || ev[0].KeyID != 0 {
		t.Fatalf("events at the trigger: %+v", ev)
	}
	k.txLast.Store(maxPacketID - 1)
	out := encapOne(l.tun, 1, innerPacket(l.id, inner4(40)))
	if out.Verdict != fwd.VerdictForward {
		t.Fatal("last packet-id refused")
	}
	payload := out.Data()[ipv4HeaderLen+udpHeaderLen:]
	if binary.BigEndian.Uint32(payload[4:]) != maxPacketID {
		t.Fatalf("last packet-id %x", payload[4:8])
	}
	for i := 0; i < 3; i++ {
		if p := encapOne(l.tun, 1, innerPacket(l.id, inner4(40))); p.Verdict != fwd.VerdictDrop {
			t.Fatal("packet sent past packet-id 2^32-1")
		}
	}
	if _, _, err := l.tun.SealPing(l.id); err == nil {
		t.Fatal("ping sealed with an exhausted key")
	}
	// The control plane's own packet-ids (SealPing) report wear-out too.
	l.installKey(AES128GCM, 2, Secondary)
	if err := l.tun.SetPrimary(l.id, 2); err != nil {
		t.Fatal(err)
	}
	l.tun.peers.Load().get(l.id).keys.Load().slot[Primary].txLast.Store(PacketIDWrapTrigger)
	if _, _, err := l.tun.SealPing(l.id); err != nil {
		t.Fatal(err)
	}
	ev = l.tun.Poll(time.Now(), nil)
	if len(ev) != 2 || ev[0].Kind != EventKeyWearOut || ev[0].KeyID != 2 || ev[1].Kind != EventKeyExhausted {
		t.Fatalf("events after SealPing at the trigger: %+v", ev)
	}
	if got := l.tun.Stats().Drops[DropKeyExhausted]; got != 3 {
		t.Fatalf("key_exhausted drops %d", got)
	}
	// A new key brings sending back.
	l.installKey(AES128GCM, 1, Secondary)
	if err := l.tun.SetPrimary(l.id, 1); err != nil {
		t.Fatal(err)
	}
	if p := encapOne(l.tun, 0, innerPacket(l.id, inner4(40))); p.Verdict != fwd.VerdictForward {
		t.Fatal("new key does not send")
	}
}

func TestEncapDrops(t *testing.T) {
	l := newLab(t, AES128GCM, srvLocal4, cliRemote4, CompNone)
	if p := encapOne(l.tun, 0, innerPacket(9, inner4(40))); p.Verdict != fwd.VerdictDrop || l.tun.Stats().Drops[DropUnknownPeer] != 1 {
		t.Fatal("unknown peer not dropped")
	}
	p := innerPacket(l.id, inner4(40))
	p.Off = 20
	copy(p.Buf[20:], inner4(40))
	if p := encapOne(l.tun, 0, p); p.Verdict != fwd.VerdictDrop || l.tun.Stats().Drops[DropNoRoom] != 1 {
		t.Fatal("packet without headroom not dropped")
	}
	p = innerPacket(l.id, inner4(40))
	p.Buf = p.Buf[:int(p.Off)+int(p.Len)+4]
	if p := encapOne(l.tun, 0, p); p.Verdict != fwd.VerdictDrop || l.tun.Stats().Drops[DropNoRoom] != 2 {
		t.Fatal("packet without tailroom not dropped")
	}
	if err := l.tun.DropKey(l.id, 0); err != nil {
		t.Fatal(err)
	}
	if p := encapOne(l.tun, 0, innerPacket(l.id, inner4(40))); p.Verdict != fwd.VerdictDrop || l.tun.Stats().Drops[DropNoKey] != 1 {
		t.Fatal("keyless peer not dropped")
	}
}

func TestKeepaliveEvents(t *testing.T) {
	tun := NewTunnel(TunnelConfig{})
	if err := tun.AddPeer(PeerConfig{ID: 1, Remote: cliRemote4, Local: srvLocal4, PingEvery: 10 * time.Second, Timeout: 60 * time.Second}); err != nil {
		t.Fatal(err)
	}
	at := func(s int) []Event { return tun.Poll(tun.start.Add(time.Duration(s)*time.Second), nil) }
	if ev := at(5); len(ev) != 0 {
		t.Fatalf("t=5: %+v", ev)
	}
	if ev := at(11); len(ev) != 1 || ev[0].Kind != EventPingDue {
		t.Fatalf("t=11: %+v", ev)
	}
	if ev := at(12); len(ev) != 0 {
		t.Fatalf("t=12 (ping already asked for): %+v", ev)
	}
	ev := at(61)
	if len(ev) != 1 || ev[0].Kind != EventExpired {
		t.Fatalf("t=61: %+v", ev)
	}
	if ev := at(62); len(ev) != 0 {
		t.Fatalf("t=62 (expiry reported once): %+v", ev)
	}
}

func TestControlPlaneErrors(t *testing.T) {
	tun := NewTunnel(TunnelConfig{MaxPeers: 4})
	if err := tun.AddPeer(PeerConfig{ID: 4, Remote: cliRemote4, Local: srvLocal4}); err != ErrPeerID {
		t.Errorf("peer-id 4 of 4: %v", err)
	}
	if err := tun.AddPeer(PeerConfig{ID: 2}); err != ErrAddress {
		t.Errorf("no remote: %v", err)
	}
	if err := tun.AddPeer(PeerConfig{ID: 1, Remote: cliRemote6, Local: srvLocal4}); err != ErrAddress {
		t.Errorf("mixed families: %v", err)
	}
	if err := tun.AddPeer(PeerConfig{ID: 1, Remote: cliRemote4, Local: srvLocal4}); err != nil {
		t.Fatal(err)
	}
	if err := tun.AddPeer(PeerConfig{ID: 1, Remote: cliRemote4, Local: srvLocal4}); err != ErrPeerExists {
		t.Errorf("duplicate: %v", err)
	}
	if err := tun.RemovePeer(1); err != nil {
		t.Fatal(err)
	}
	if err := tun.RemovePeer(1); err != ErrNoPeer {
		t.Errorf("double remove: %v", err)
	}
	if err := tun.InstallKey(1, Primary, &KeyMaterial{Cipher: AES128GCM}); err != ErrNoPeer {
		t.Errorf("key for a missing peer: %v", err)
	}
}

// TestLocalAddressLearnt adds a peer without its local address: Encap waits
// for the first authenticated packet, which teaches it.
func TestLocalAddressLearnt(t *testing.T) {
	tun := NewTunnel(TunnelConfig{})
	if err := tun.AddPeer(PeerConfig{ID: 2, Remote: cliRemote6}); err != nil {
		t.Fatal(err)
	}
	srv, cli := testKeys(AES128GCM, 0)
	if err := tun.InstallKey(2, Primary, srv); err != nil {
		t.Fatal(err)
	}
	c := &client{keys: map[uint8]*DataKey{0: mustKey(t, cli)}}
	if p := encapOne(tun, 0, innerPacket(2, inner6(60))); p.Verdict != fwd.VerdictDrop || tun.Stats().Drops[DropNoAddress] != 1 {
		t.Fatalf("encap before the local address is known: verdict %d", p.Verdict)
	}
	if p := decapOne(tun, 0, outerPacket(cliRemote6, srvLocal6, c.seal(2, inner6(60)))); p.Verdict != fwd.VerdictForward {
		t.Fatal("first packet dropped")
	}
	if ev := tun.Poll(time.Now(), nil); len(ev) != 0 {
		t.Fatalf("learning the local address is not a float: %+v", ev)
	}
	out := encapOne(tun, 0, innerPacket(2, inner6(60)))
	if got, _ := c.open(t, &out, srvLocal6, cliRemote6); !bytes.Equal(got, inner6(60)) {
		t.Fatal("reply after learning the local address")
	}
	rx, tx := tun.LastActivity(2)
	if rx.IsZero() || tx.IsZero() {
		t.Fatalf("LastActivity %v %v", rx, tx)
	}
}

func TestAllowedSources(t *testing.T) {
	l := newLab(t, AES128GCM, srvLocal4, cliRemote4, CompNone)
	send := func(inner []byte) fwd.Verdict {
		return decapOne(l.tun, 0, outerPacket(cliRemote4, srvLocal4, l.cli.seal(l.id, inner))).Verdict
	}
	v4 := inner4(40) // from 10.8.0.2
	v6 := inner6(60) // from ::
	if send(v4) != fwd.VerdictForward || send(v6) != fwd.VerdictForward {
		t.Fatal("no AllowedSources: everything passes")
	}
	if err := l.tun.SetAllowedSources(l.id, []netip.Prefix{netip.MustParsePrefix("10.8.0.2/32"), netip.MustParsePrefix("2001:db8:1::/64")}); err != nil {
		t.Fatal(err)
	}
	if send(v4) != fwd.VerdictForward {
		t.Fatal("allowed IPv4 source dropped")
	}
	if send(v6) != fwd.VerdictDrop {
		t.Fatal("IPv6 source outside the list accepted")
	}
	copy(v6[8:24], netip.MustParseAddr("2001:db8:1::5").AsSlice())
	if send(v6) != fwd.VerdictForward {
		t.Fatal("allowed IPv6 source dropped")
	}
	v4[15] = 3 // 10.8.0.3: another client's address
	if send(v4) != fwd.VerdictDrop {
		t.Fatal("spoofed IPv4 source accepted")
	}
	if got := l.tun.Stats().Drops[DropSpoofed]; got != 2 {
		t.Fatalf("spoofed drops %d", got)
	}
}

// Adding and removing a peer costs the same however large the table is:
// with a million peer slots a cycle allocates a few hundred bytes (the
// peer), not a copy of the table (8 MB with copy-on-write).
func TestPeerAddRemoveConstantCost(t *testing.T) {
	tun := NewTunnel(TunnelConfig{MaxPeers: 1 << 20})
	cycle := func(id uint32) {
		if err := tun.AddPeer(PeerConfig{ID: id, Remote: cliRemote4, Local: srvLocal4}); err != nil {
			t.Fatal(err)
		}
		if err := tun.RemovePeer(id); err != nil {
			t.Fatal(err)
		}
	}
	cycle(1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range uint32(100) {
		cycle(1000 + i)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 100; per > 16<<10 {
		t.Fatalf("%d bytes allocated per add+remove with 1M peer slots; want O(1), not a table copy", per)
	}
	if got := tun.Stats().Peers; got != 0 {
		t.Fatalf("%d peers left", got)
	}
}

// The compiled source check agrees with netip.Prefix.Contains for IPv4
// prefixes of every length (and IPv4-mapped ones), on random addresses and
// on each prefix's first and last address.
func TestSourceSetMatchesContains(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	addr := func() netip.Addr {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], rng.Uint32())
		return netip.AddrFrom4(a)
	}
	for bits := 0; bits <= 32; bits++ {
		pfx := netip.PrefixFrom(addr(), bits)
		list := []netip.Prefix{pfx}
		if bits%2 == 1 { // the same prefix written IPv4-mapped
			list = []netip.Prefix{netip.PrefixFrom(netip.AddrFrom16(pfx.Addr().As16()), bits+96)}
		}
		p := &peer{}
		p.sources.Store(newSourceSet(list))
		last := pfx.Masked().Addr().As4()
		binary.BigEndian.PutUint32(last[:], binary.BigEndian.Uint32(last[:])|^(^uint32(0)<<(32-bits)))
		cases := []netip.Addr{pfx.Masked().Addr(), netip.AddrFrom4(last)}
		for range 200 {
			cases = append(cases, addr())
		}
		for _, a := range cases {
			pkt := inner4(40)
			copy(pkt[12:16], a.AsSlice())
			if got, want := p.sourceAllowed(pkt), pfx.Masked().Contains(a); got != want {
				t.Fatalf("%v (from %v): %v allowed %v, want %v", pfx, list[0], a, got, want)
			}
		}
	}
	p := &peer{}
	p.sources.Store(newSourceSet(nil))
	if !p.sourceAllowed(inner4(40)) || !p.sourceAllowed(inner6(60)) {
		t.Fatal("no prefixes must mean no check")
	}
}
