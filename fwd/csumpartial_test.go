package fwd_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// tcpSeg is a TCP segment (ACK|PSH, no options) carrying payload.
func tcpSeg(sport, dport uint16, payload []byte) []byte {
	t := make([]byte, 20, 20+len(payload))
	binary.BigEndian.PutUint16(t, sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	t[12], t[13] = 5<<4, 0x18
	binary.BigEndian.PutUint16(t[14:], 65535)
	return append(t, payload...)
}

// partial rewrites the TCP or UDP checksum of the IP packet ip (built by
// ipv4/ipv6, checksums finished) as a Linux sender that offloads it
// leaves it: the pseudo-header sum, folded, not complemented.
func partial(ip []byte) []byte {
	ip = append([]byte{}, ip...)
	var src, dst []byte
	var proto byte
	var l4 []byte
	if ip[0]>>4 == 4 {
		src, dst, proto, l4 = ip[12:16], ip[16:20], ip[9], ip[20:]
	} else {
		src, dst, proto, l4 = ip[8:24], ip[24:40], ip[6], ip[40:]
	}
	off := map[byte]int{6: 16, 17: 6}[proto]
	s := pseudo(src, dst, proto, len(l4))
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	binary.BigEndian.PutUint16(l4[off:], uint16(s))
	return ip
}

// verifies reports whether an IP packet's TCP/UDP checksum checks.
func verifies(ip []byte) bool {
	var src, dst []byte
	var proto byte
	var l4 []byte
	if ip[0]>>4 == 4 {
		src, dst, proto, l4 = ip[12:16], ip[16:20], ip[9], ip[20:]
	} else {
		src, dst, proto, l4 = ip[8:24], ip[24:40], ip[6], ip[40:]
	}
	return csum(l4, pseudo(src, dst, proto, len(l4))) == 0
}

// A LAN host with checksum offload (a veth's default) sends TCP and UDP
// whose checksum holds only the pseudo-header sum. The router finishes it
// before forwarding (and before the MSS clamp edits a SYN), counting
// each; a finished checksum is left as it is. Before, the packets left
// unfinished and the receiver dropped them: ping worked, TCP never
// connected.
func TestPartialChecksumsAreFinished(t *testing.T) {
	r := newRig(t, rigOpt{cfg: fwd.Config{MSSClamp: 1300}})
	must(t, r.e.SetNeighbour(1, bV4, macB))
	must(t, r.e.SetNeighbour(1, bV6, macB))
	payload := bytes.Repeat([]byte("ovfwd csum "), 100)
	cases := []struct {
		name string
		ip   []byte
	}{
		{"tcp4 data", partial(ipv4(aV4, bV4, 6, 64, true, tcpSeg(40000, 80, payload)))},
		{"tcp4 syn (clamped after)", partial(ipv4(aV4, bV4, 6, 64, true, tcpSYN(40000, 80, 1460, 0)))},
		{"udp4", partial(ipv4(aV4, bV4, 17, 64, false, udp(40000, 53, payload)))},
		{"tcp6 data", partial(ipv6(aV6, bV6, 6, 64, tcpSeg(40000, 80, payload)))},
		{"udp6", partial(ipv6(aV6, bV6, 17, 64, udp(40000, 53, payload[:333])))},
	}
	for i, c := range cases {
		if verifies(c.ip) {
			t.Fatalf("%s: test packet already verifies", c.name)
		}
		et := uint16(0x0800)
		if c.ip[0]>>4 == 6 {
			et = 0x86dd
		}
		r.inject(0, eth(macR0, macA, et, c.ip))
		r.poll()
		p := parseEth(t, r.drainOne(1))
		if !verifies(p.l3) {
			t.Errorf("%s: forwarded with an unfinished checksum", c.name)
		}
		if got := r.e.Stats().CsumPartial; got != uint64(i+1) {
			t.Errorf("%s: csum_partial %d, want %d", c.name, got, i+1)
		}
	}
	if r.e.Stats().Clamped != 1 {
		t.Errorf("clamped %d SYNs, want 1", r.e.Stats().Clamped)
	}
	r.checkNoLeak()
}

// The false positive: a finished checksum that happens to equal the
// pseudo-header sum. It verifies, so it is forwarded untouched and not
// counted.
func TestFinishedChecksumEqualToPseudoSumIsKept(t *testing.T) {
	r := newRig(t, rigOpt{})
	must(t, r.e.SetNeighbour(1, bV4, macB))
	for _, v6 := range []bool{false, true} {
		// Two free payload bytes chosen so that the real checksum comes
		// out as the pseudo-header sum.
		seg := udp(40000, 53, []byte("padding-xx"))
		src, dst := aV4.AsSlice(), bV4.AsSlice()
		if v6 {
			src, dst = aV6.AsSlice(), bV6.AsSlice()
		}
		ps := pseudo(src, dst, 17, len(seg))
		for ps > 0xffff {
			ps = ps&0xffff + ps>>16
		}
		binary.BigEndian.PutUint16(seg[6:], uint16(ps))
		clear(seg[16:18])
		// Sum of everything but the free word must plus the word be 0xffff.
		rest := uint32(0xffff) - uint32(^csum(seg, pseudo(src, dst, 17, len(seg))))
		for rest > 0xffff {
			rest = rest&0xffff + rest>>16
		}
		binary.BigEndian.PutUint16(seg[16:], uint16(rest))
		var ip []byte
		et := uint16(0x0800)
		if v6 {
			ip, et = ipv6(aV6, bV6, 59, 64, seg), 0x86dd // 59: keep the helper's hands off the checksum
			ip[6] = 17
			must(t, r.e.SetNeighbour(1, bV6, macB))
		} else {
			ip = ipv4(aV4, bV4, 59, 64, false, seg)
			ip[9] = 17
			binary.BigEndian.PutUint16(ip[10:], 0)
			binary.BigEndian.PutUint16(ip[10:], csum(ip[:20], 0))
		}
		if !verifies(ip) || binary.BigEndian.Uint16(seg[6:]) != uint16(ps) {
			t.Fatalf("v6 %v: could not build the packet (verifies %v)", v6, verifies(ip))
		}
		r.inject(0, eth(macR0, macA, et, ip))
		r.poll()
		p := parseEth(t, r.drainOne(1))
		if !bytes.Equal(p.l3[len(p.l3)-len(seg):], seg) {
			t.Fatalf("v6 %v: the segment was changed", v6)
		}
	}
	if n := r.e.Stats().CsumPartial; n != 0 {
		t.Fatalf("csum_partial %d, want 0", n)
	}
	r.checkNoLeak()
}

// Parse marks (FlagPseudoCsum) exactly the segments whose checksum field
// holds the pseudo-header sum: the router calls finishPartialCsum for
// those alone, so an unmarked partial checksum would leave unfinished.
func TestParseMarksPseudoHeaderChecksums(t *testing.T) {
	payload := bytes.Repeat([]byte("mark "), 50)
	for _, c := range []struct {
		name string
		ip   []byte
	}{
		{"tcp4", ipv4(aV4, bV4, 6, 64, true, tcpSeg(40000, 80, payload))},
		{"udp4", ipv4(aV4, bV4, 17, 64, false, udp(40000, 53, payload))},
		{"tcp6", ipv6(aV6, bV6, 6, 64, tcpSeg(40000, 80, payload))},
		{"udp6", ipv6(aV6, bV6, 17, 64, udp(40000, 53, payload))},
	} {
		et := uint16(0x0800)
		if c.ip[0]>>4 == 6 {
			et = 0x86dd
		}
		for _, part := range []bool{false, true} {
			ip := c.ip
			if part {
				ip = partial(ip)
			}
			buf := make([]byte, fwd.Headroom+2048)
			f := eth(macR0, macA, et, ip)
			p := fwd.Packet{Buf: buf, Off: fwd.Headroom, Len: uint16(copy(buf[fwd.Headroom:], f))}
			if r := fwd.Parse(&p); r != fwd.DropNone {
				t.Fatalf("%s: parse: %v", c.name, r)
			}
			if got := p.Flags&fwd.FlagPseudoCsum != 0; got != part {
				t.Errorf("%s partial %v: marked %v", c.name, part, got)
			}
			if got := fwd.FinishPartialCsum(&p); got != part {
				t.Errorf("%s partial %v: finished %v", c.name, part, got)
			}
		}
	}
}

// TestPuntedPartialChecksumsAreFinished: TCP and UDP for one of our own
// addresses go to the host stack (behind an exception TAP), which takes
// them as a NIC's frames, trusting nothing: an unfinished checksum is
// finished before the punt, as before forwarding, and counted. Before,
// a host with checksum offload could not reach the appliance's kernel
// over TCP on a vfio or mlx5-sim port.
func TestPuntedPartialChecksumsAreFinished(t *testing.T) {
	r := newRig(t, rigOpt{})
	payload := make([]byte, 333)
	for i := range payload {
		payload[i] = byte(i * 13)
	}
	for i, ip := range [][]byte{
		partial(ipv4(aV4, r0v4.Addr(), 6, 64, true, tcpSeg(40000, 22, payload))),
		partial(ipv4(aV4, r0v4.Addr(), 17, 64, true, udp(40000, 53, payload))),
	} {
		r.inject(0, eth(macR0, macA, 0x0800, ip))
		r.poll()
		n := r.e.Punts(func(_ int, frame []byte) { checkIPv4(t, parseEth(t, frame).l3) })
		if n != 1 {
			t.Fatalf("packet %d: %d frames punted, want 1", i, n)
		}
		if got := r.e.Stats().CsumPartial; got != uint64(i+1) {
			t.Fatalf("packet %d: csum_partial %d, want %d", i, got, i+1)
		}
	}
	r.checkNoLeak()
}
