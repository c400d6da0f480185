package fwd_test

import (
	"net/netip"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

func parseOne(frame []byte, flags fwd.Flags) (fwd.Packet, fwd.DropReason) {
	buf := make([]byte, fwd.Headroom+2048)
	p := fwd.Packet{Buf: buf, Off: fwd.Headroom, Len: uint16(copy(buf[fwd.Headroom:], frame)), Flags: flags}
	r := fwd.Parse(&p)
	return p, r
}

func TestParse(t *testing.T) {
	withOptions := ipv4(aV4, bV4, 17, 64, false, udp(1, 2, []byte("x")))
	// Insert 4 bytes of options (NOP NOP NOP EOL): IHL 6, fix length and checksum.
	opt := append(append(append([]byte{}, withOptions[:20]...), 1, 1, 1, 0), withOptions[20:]...)
	opt[0] = 0x46
	opt[2], opt[3] = 0, byte(len(opt))
	opt[10], opt[11] = 0, 0
	s := csum(opt[:24], 0)
	opt[10], opt[11] = byte(s>>8), byte(s)

	frag := ipv4(aV4, bV4, 17, 64, false, make([]byte, 16))
	frag[6], frag[7] = 0x00, 0x10 // offset 16*8, no MF
	frag[10], frag[11] = 0, 0
	s = csum(frag[:20], 0)
	frag[10], frag[11] = byte(s>>8), byte(s)

	hbhFrag := ipv6(aV6, bV6, 0, 64, append([]byte{44, 0, 1, 4, 0, 0, 0, 0, // hop-by-hop, PadN
		17, 0, 0, 1, 0, 0, 0, 9}, udp(1, 2, nil)...)) // fragment header, offset 0, M=1
	laterFrag := ipv6(aV6, bV6, 44, 64, []byte{17, 0, 0, 8, 0, 0, 0, 9, 1, 2, 3, 4})

	padded := append(udp4AtoB(64), make([]byte, 20)...) // Ethernet padding after the datagram

	// The first fragment of a 1,552-byte UDP datagram (an OpenVPN client's
	// full-size P_DATA_V2 at tun-mtu 1500): its UDP length covers the
	// whole datagram, not the fragment.
	firstFrag := ipv4(aV4, bV4, 17, 64, false, append([]byte{0x9c, 0x40, 0x04, 0xaa, 0x06, 0x08, 0, 0}, make([]byte, 1472)...))
	firstFrag[6] = 0x20 // MF, offset 0
	firstFrag[10], firstFrag[11] = 0, 0
	s = csum(firstFrag[:20], 0)
	firstFrag[10], firstFrag[11] = byte(s>>8), byte(s)
	firstFrag6 := ipv6(aV6, bV6, 44, 64, append([]byte{17, 0, 0, 1, 0, 0, 0, 7, // offset 0, M=1
		0x9c, 0x40, 0x04, 0xaa, 0x06, 0x08, 0, 0}, make([]byte, 1400)...))
	// A first fragment cut inside the TCP header: no L4 features, not malformed.
	cutTCP := ipv4(aV4, bV4, 6, 64, false, make([]byte, 8))
	cutTCP[6] = 0x20
	cutTCP[10], cutTCP[11] = 0, 0
	s = csum(cutTCP[:20], 0)
	cutTCP[10], cutTCP[11] = byte(s>>8), byte(s)

	cases := []struct {
		name        string
		frame       []byte
		in          fwd.Flags
		want        fwd.DropReason
		flags       fwd.Flags
		vlan        uint16
		l3, l4, len int
	}{
		{"udp4", udp4AtoB(64), 0, fwd.DropNone, fwd.FlagIPv4 | fwd.FlagUDP, 0, 14, 34, 0},
		{"udp4 padded", padded, 0, fwd.DropNone, fwd.FlagIPv4 | fwd.FlagUDP, 0, 14, 34, len(udp4AtoB(64))},
		{"ipv4 options", eth(macR0, macA, 0x0800, opt), 0, fwd.DropNone, fwd.FlagIPv4 | fwd.FlagUDP, 0, 14, 38, 0},
		{"ipv4 later fragment", eth(macR0, macA, 0x0800, frag), 0, fwd.DropNone, fwd.FlagIPv4 | fwd.FlagFrag, 0, 14, 0, 0},
		{"ipv4 first fragment", eth(macR0, macA, 0x0800, firstFrag), 0, fwd.DropNone, fwd.FlagIPv4 | fwd.FlagFrag | fwd.FlagUDP, 0, 14, 34, 0},
		{"ipv6 first fragment", eth(macR0, macA, 0x86dd, firstFrag6), 0, fwd.DropNone, fwd.FlagIPv6 | fwd.FlagFrag | fwd.FlagUDP, 0, 14, 14 + 48, 0},
		{"ipv4 first fragment cut in tcp", eth(macR0, macA, 0x0800, cutTCP), 0, fwd.DropNone, fwd.FlagIPv4 | fwd.FlagFrag, 0, 14, 0, 0},
		{"vlan", ethVLAN(macR0, macA, 100, 0x86dd, ipv6(aV6, bV6, 58, 64, icmpEcho(128, 1, 1, nil))), 0, fwd.DropNone,
			fwd.FlagVLAN | fwd.FlagIPv6 | fwd.FlagICMP, 100, 18, 58, 0},
		{"qinq", eth(macR0, macA, 0x88a8, append([]byte{0, 7, 0x81, 0, 0, 9, 0x08, 0}, ipv4(aV4, bV4, 6, 64, false, tcpSYN(1, 2, 1460, 0))...)),
			0, fwd.DropNone, fwd.FlagVLAN | fwd.FlagQinQ | fwd.FlagIPv4 | fwd.FlagTCP, 7, 22, 42, 0},
		{"ipv6 hbh+frag", eth(macR0, macA, 0x86dd, hbhFrag), 0, fwd.DropNone, fwd.FlagIPv6 | fwd.FlagFrag | fwd.FlagUDP, 0, 14, 14 + 40 + 16, 0},
		{"ipv6 later fragment", eth(macR0, macA, 0x86dd, laterFrag), 0, fwd.DropNone, fwd.FlagIPv6 | fwd.FlagFrag, 0, 14, 0, 0},
		{"arp", eth(bcast, macA, 0x0806, arp(1, macA, aV4, make([]byte, 6), bV4)), 0, fwd.DropNone, fwd.FlagARP, 0, 14, 0, 0},
		{"l3 only", ipv4(aV4, bV4, 17, 64, false, udp(1, 2, nil)), fwd.FlagL3Only, fwd.DropNone, fwd.FlagL3Only | fwd.FlagIPv4 | fwd.FlagUDP, 0, 0, 20, 0},
		{"short ethernet", udp4AtoB(64)[:13], 0, fwd.DropMalformed, 0, 0, 0, 0, 0},
		{"truncated ipv4", udp4AtoB(64)[:30], 0, fwd.DropMalformed, 0, 0, 0, 0, 0},
		{"truncated tcp", eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 6, 64, false, make([]byte, 10))), 0, fwd.DropMalformed, 0, 0, 0, 0, 0},
		{"bad udp length", eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 17, 64, false, []byte{0, 1, 0, 2, 0, 99, 0, 0})), 0, fwd.DropMalformed, 0, 0, 0, 0, 0},
		{"short arp", eth(bcast, macA, 0x0806, make([]byte, 10)), 0, fwd.DropMalformed, 0, 0, 0, 0, 0},
		{"qinq without c-tag", eth(macR0, macA, 0x88a8, []byte{0, 7, 0x08, 0}), 0, fwd.DropMalformed, 0, 0, 0, 0, 0},
		{"unknown ethertype", eth(macR0, macA, 0x88cc, make([]byte, 46)), 0, fwd.DropUnsupported, 0, 0, 0, 0, 0},
		{"bad version", eth(macR0, macA, 0x0800, append([]byte{0x55}, make([]byte, 40)...)), 0, fwd.DropMalformed, 0, 0, 0, 0, 0},
		{"ipv6 truncated ext", eth(macR0, macA, 0x86dd, ipv6(aV6, bV6, 0, 64, []byte{17, 5, 0, 0, 0, 0, 0, 0})), 0, fwd.DropMalformed, 0, 0, 0, 0, 0},
	}
	for _, c := range cases {
		p, r := parseOne(c.frame, c.in)
		if r != c.want {
			t.Errorf("%s: reason %v, want %v", c.name, r, c.want)
			continue
		}
		if r != fwd.DropNone {
			continue
		}
		const info = fwd.FlagVLAN | fwd.FlagQinQ | fwd.FlagIPv4 | fwd.FlagIPv6 | fwd.FlagUDP | fwd.FlagTCP |
			fwd.FlagICMP | fwd.FlagFrag | fwd.FlagARP | fwd.FlagL3Only
		if p.Flags&info != c.flags || p.Flags&fwd.FlagParsed == 0 {
			t.Errorf("%s: flags %#x, want %#x", c.name, p.Flags&info, c.flags)
		}
		if p.VLAN != c.vlan || int(p.L3Off) != c.l3 || int(p.L4Off) != c.l4 {
			t.Errorf("%s: vlan %d l3 %d l4 %d, want %d %d %d", c.name, p.VLAN, p.L3Off, p.L4Off, c.vlan, c.l3, c.l4)
		}
		if c.len != 0 && int(p.Len) != c.len {
			t.Errorf("%s: len %d, want %d (padding not trimmed)", c.name, p.Len, c.len)
		}
	}
	_ = netip.Addr{}
}
