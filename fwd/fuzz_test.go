package fwd_test

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

func fuzzSeeds(f *testing.F) {
	for _, fr := range parseFrames() {
		f.Add(fr)
	}
	f.Add(udp4AtoB(1))
	f.Add(eth(bcast, macA, 0x0806, arp(1, macA, aV4, make([]byte, 6), r0v4.Addr())))
	f.Add(eth([]byte{0x33, 0x33, 0xff, 0, 0, 1}, macA, 0x86dd, ipv6(aV6, solicitedNode(r0v6.Addr()), 58, 255, nd(135, r0v6.Addr(), macA))))
	f.Add(eth(macR0, macA, 0x86dd, ipv6(aV6, bV6, 44, 64, []byte{17, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 2, 0, 8, 0, 0})))
	f.Add(eth(macR0, macA, 0x88a8, []byte{0, 5, 0x81, 0, 0, 6, 0x08, 0}))
	// First fragments: a UDP length beyond the fragment, a TCP header cut short.
	f.Add(eth(macR0, macA, 0x0800, ipv4Frag(ipv4(aV4, r0v4.Addr(), 17, 64, false, udp(5000, 1194, make([]byte, 200))), 0, 96, true)))
	f.Add(eth(macR0, macA, 0x0800, ipv4Frag(ipv4(aV4, bV4, 6, 64, false, tcpSYN(1, 2, 1460, 0)), 0, 8, true)))
	f.Add([]byte{})
}

// FuzzParse: Parse never panics, and what it accepts is self-consistent.
func FuzzParse(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) > 2048 {
			return
		}
		buf := make([]byte, fwd.Headroom+2048)
		for _, l3only := range []bool{false, true} {
			p := fwd.Packet{Buf: buf, Off: fwd.Headroom, Len: uint16(copy(buf[fwd.Headroom:], frame))}
			if l3only {
				p.Flags = fwd.FlagL3Only
			}
			if fwd.Parse(&p) != fwd.DropNone {
				continue
			}
			d := p.Data()
			if int(p.L3Off) >= len(d) || int(p.L4Off) > len(d) {
				t.Fatalf("offsets %d/%d beyond %d bytes", p.L3Off, p.L4Off, len(d))
			}
			if p.Flags&fwd.FlagIPv4 != 0 {
				ip := d[p.L3Off:]
				ihl := int(ip[0]&15) * 4
				if csum(ip[:ihl], 0) != 0 || int(binary.BigEndian.Uint16(ip[2:])) != len(ip) {
					t.Fatal("accepted an IPv4 header with a bad checksum or length")
				}
			}
			if p.Flags&(fwd.FlagTCP|fwd.FlagUDP|fwd.FlagICMP) != 0 && p.L4Off <= p.L3Off {
				t.Fatal("L4 flag without an L4 offset")
			}
			// The router skips finishPartialCsum for a packet Parse did
			// not mark: no packet it would finish may go unmarked.
			if p.Flags&(fwd.FlagTCP|fwd.FlagUDP) != 0 && p.Flags&(fwd.FlagFrag|fwd.FlagPseudoCsum) == 0 {
				q := p
				q.Buf = append([]byte(nil), buf...)
				if fwd.FinishPartialCsum(&q) {
					t.Fatal("Parse did not mark a checksum finishPartialCsum finishes")
				}
			}
		}
	})
}

func fuzzEngine(f *testing.F, mode fwd.Mode) {
	for _, fr := range parseFrames() {
		f.Add(fr, true)
	}
	f.Add(udp4AtoB(1), true)
	f.Add(eth(macR0, macA, 0x0800, ipv4(aV4, r0v4.Addr(), 1, 5, false, icmpEcho(8, 1, 1, nil))), true)
	f.Add(eth(bcast, macA, 0x0806, arp(1, macA, aV4, make([]byte, 6), r0v4.Addr())), false)
	f.Add(eth([]byte{0x33, 0x33, 0xff, 0, 0, 1}, macA, 0x86dd, ipv6(aV6, solicitedNode(r0v6.Addr()), 58, 255, nd(135, r0v6.Addr(), macA))), false)
	f.Add(eth(macR0, macA, 0x88a8, []byte{0, 5, 0x81, 0, 0, 6, 0x08, 0}), false)
	// Unfinished checksums (a host with checksum offload), TCP and UDP.
	f.Add(eth(macR0, macA, 0x0800, partial(ipv4(aV4, bV4, 6, 64, true, tcpSeg(1, 2, make([]byte, 100))))), false)
	f.Add(eth(macR0, macA, 0x86dd, partial(ipv6(aV6, bV6, 17, 64, udp(1, 2, make([]byte, 33))))), false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, frame []byte, fix bool) {
		if len(frame) > 2048 {
			return
		}
		if fix { // steer random bytes past the cheap checks: our MAC, a valid IPv4 header checksum
			frame = append([]byte(nil), frame...)
			if len(frame) >= 14 {
				copy(frame, macR0)
			}
			if len(frame) >= 34 && binary.BigEndian.Uint16(frame[12:]) == 0x0800 {
				ihl := int(frame[14]&15) * 4
				if ihl >= 20 && 14+ihl <= len(frame) {
					frame[24], frame[25] = 0, 0
					binary.BigEndian.PutUint16(frame[24:], csum(frame[14:14+ihl], 0))
				}
			}
		}
		r := newRig(t, rigOpt{mode: mode, nports: 3, poolBufs: 64, cfg: fwd.Config{MSSClamp: 1200, BridgeTable: 64}})
		if mode == fwd.ModeBridge {
			must(t, r.e.SetPortVLAN(0, fwd.PortVLAN{Untagged: 1, Tagged: []uint16{5, 6}}))
		} else {
			must(t, r.e.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), fwd.NextHop{Port: 1, Via: bV4}))
			must(t, r.e.AddRoute(netip.MustParsePrefix("::/0"), fwd.NextHop{Port: 1, Via: bV6}))
		}
		r.inject(0, frame)
		r.poll()
		r.e.Service()
		r.e.Punts(func(int, []byte) {})
		for range 12 { // let held packets (and the errors about them) fail
			r.advance(time.Second)
			r.poll()
		}
		r.checkNoLeak()
	})
}

// FuzzRouter feeds arbitrary frames through the whole router: no panic,
// no leaked buffer.
func FuzzRouter(f *testing.F) { fuzzEngine(f, fwd.ModeRouter) }

// FuzzBridge does the same through the bridge.
func FuzzBridge(f *testing.F) { fuzzEngine(f, fwd.ModeBridge) }
