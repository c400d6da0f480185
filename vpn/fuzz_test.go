package vpn

import (
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// FuzzOpen feeds arbitrary UDP payloads to DataKey.Open, with and without
// tailroom: it must never panic, and whatever it accepts must be a packet
// the peer's key sealed.
func FuzzOpen(f *testing.F) {
	server, client := testKeys(AES128GCM, 1)
	s, cl := mustKey(f, server), mustKey(f, client)
	f.Add(sealInPlace(s, 1, 1, PingMagic[:]), true)
	f.Add(sealInPlace(s, 0xffffff, 0xffffffff, inner4(60)), false)
	f.Add(sealInPlace(s, 1, 2, nil), true)
	f.Add([]byte{0x49}, true)
	f.Add(make([]byte, DataHeaderLen), false)
	f.Fuzz(func(t *testing.T, pkt []byte, tailroom bool) {
		orig := append([]byte(nil), pkt...)
		buf := append([]byte(nil), pkt...)
		if tailroom {
			buf = append(buf, make([]byte, TagLen)...)[:len(pkt)]
		}
		plain, pid, err := cl.Open(buf)
		if err != nil {
			return
		}
		// Accepted: resealing the plaintext must give the input back.
		if again := s.Seal(nil, uint32(orig[1])<<16|uint32(orig[2])<<8|uint32(orig[3]), pid, plain); string(again) != string(orig) {
			t.Fatalf("accepted a packet Seal would not produce: %x", orig)
		}
	})
}

// FuzzDecap feeds arbitrary bytes as the UDP payload, with arbitrary outer
// offsets, through Tunnel.Decap: never a panic, always a verdict and a
// counted reason for drops, and a forwarded packet stays inside its buffer.
func FuzzDecap(f *testing.F) {
	l := &lab{}
	l.cli = &client{keys: map[uint8]*DataKey{}}
	tun := NewTunnel(TunnelConfig{MaxPeers: 4, PuntRing: 2})
	if err := tun.AddPeer(PeerConfig{ID: 3, Remote: cliRemote4, Local: srvLocal4, Comp: CompStub}); err != nil {
		f.Fatal(err)
	}
	srv, cli := testKeys(AES256GCM, 0)
	if err := tun.InstallKey(3, Primary, srv); err != nil {
		f.Fatal(err)
	}
	c := &client{keys: map[uint8]*DataKey{0: mustKey(f, cli)}, comp: CompStub}
	f.Add(c.seal(3, inner4(60)), uint8(14), uint8(34))
	f.Add(c.seal(3, inner6(80)), uint8(14), uint8(34))
	f.Add(c.seal(3, PingMagic[:]), uint8(14), uint8(34))
	f.Add(c.seal(3, []byte{0x45, 0, 0, 10}), uint8(14), uint8(34))
	f.Add([]byte{PControlHardResetClientV2 << 3, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0}, uint8(14), uint8(34))
	f.Add([]byte{0x48, 0, 0, 3}, uint8(0), uint8(20))
	f.Add([]byte{}, uint8(200), uint8(10))
	f.Fuzz(func(t *testing.T, payload []byte, l3, l4 uint8) {
		if len(payload) > 1800 {
			return
		}
		p := outerPacket(cliRemote4, srvLocal4, payload)
		if l3 != 14 || l4 != 34 { // also try inconsistent offsets over the same bytes
			p.L3Off, p.L4Off = l3, l4
			if int(l4) > int(p.Len) {
				p.Len = uint16(l4)
			}
		}
		before := tun.Stats().Drops
		got := decapOne(tun, 0, p)
		after := tun.Stats().Drops
		counted := 0
		for i := range after {
			counted += int(after[i] - before[i])
		}
		switch got.Verdict {
		case fwd.VerdictDrop:
			if counted != 1 || got.Reason != fwd.DropTunnel {
				t.Fatalf("drop counted %d times, reason %v", counted, got.Reason)
			}
		case fwd.VerdictForward:
			if int(got.Off)+int(got.Len) > len(got.Buf) || got.Len == 0 || got.Flags&fwd.FlagL3Only == 0 {
				t.Fatalf("forwarded packet off %d len %d flags %b", got.Off, got.Len, got.Flags)
			}
		case fwd.VerdictConsumed:
		default:
			t.Fatalf("verdict %d", got.Verdict)
		}
		buf := make([]byte, MaxControlPacket)
		for {
			if _, ok := tun.ReadControl(buf); !ok {
				break
			}
		}
	})
}
