package fwd

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

// Parse reads the headers of p from p.Off (Ethernet, or IP when FlagL3Only
// is set) and fills Flags, VLAN, L3Off and L4Off. It trims Len to the IP
// datagram's own length (dropping Ethernet padding). It never allocates and
// never reads outside Data(); a packet that does not parse gets the reason
// it is dropped for (DropMalformed, or DropUnsupported for well-formed
// headers the engine does not forward, such as an unknown EtherType).
//
// Hardware hints are not trusted: Parse recomputes every flag it owns.
func Parse(p *Packet) DropReason {
	const owned = FlagVLAN | FlagQinQ | FlagIPv4 | FlagIPv6 | FlagUDP | FlagTCP | FlagICMP |
		FlagFrag | FlagParsed | FlagARP | flagPseudoCsum
	p.Flags &^= owned
	p.VLAN, p.L3Off, p.L4Off = 0, 0, 0
	if int(p.Off)+int(p.Len) > len(p.Buf) {
		return DropMalformed
	}
	b := p.Data()
	l3 := 0
	if p.Flags&FlagL3Only == 0 {
		if len(b) < ethHdrLen {
			return DropMalformed
		}
		etype := binary.BigEndian.Uint16(b[12:])
		l3 = ethHdrLen
		if etype == etherTypeQinQ || etype == etherTypeVLAN {
			if len(b) < l3+vlanTagLen {
				return DropMalformed
			}
			p.Flags |= FlagVLAN
			p.VLAN = binary.BigEndian.Uint16(b[14:]) & 0x0fff
			if etype == etherTypeQinQ {
				p.Flags |= FlagQinQ
			}
			etype = binary.BigEndian.Uint16(b[16:])
			l3 += vlanTagLen
			if etype == etherTypeVLAN {
				if p.Flags&FlagQinQ == 0 {
					p.Flags |= FlagQinQ // 0x8100 stacked on 0x8100: pre-802.1ad QinQ
				}
				if len(b) < l3+vlanTagLen {
					return DropMalformed
				}
				etype = binary.BigEndian.Uint16(b[l3+2:])
				l3 += vlanTagLen
			} else if p.Flags&FlagQinQ != 0 {
				return DropMalformed // an S-tag must carry a C-tag
			}
		}
		p.L3Off = uint8(l3)
		switch etype {
		case etherTypeIPv4:
		case etherTypeIPv6:
		case etherTypeARP:
			return parseARP(p, b[l3:])
		default:
			return DropUnsupported
		}
	}
	if len(b) <= l3 {
		return DropMalformed
	}
	switch b[l3] >> 4 {
	case 4: // in line, not a call: nearly every packet is IPv4
		if len(b) < l3+ipv4MinHdrLen {
			return DropMalformed
		}
		h := (*[ipv4MinHdrLen]byte)(b[l3 : l3+ipv4MinHdrLen])
		ihl := int(h[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(h[2:]))
		if ihl < ipv4MinHdrLen || total < ihl || total > len(b)-l3 {
			return DropMalformed
		}
		if ihl == ipv4MinHdrLen {
			if !ipv4MinHeaderSumOK(h) {
				return DropMalformed
			}
		} else if csum.Checksum(b[l3:l3+ihl]) != 0 {
			return DropMalformed
		}
		p.Len = uint16(l3 + total)
		p.Flags |= FlagIPv4 | FlagParsed
		frag := binary.BigEndian.Uint16(h[6:])
		if frag&(ipv4FlagMF|ipv4FragMask) != 0 {
			p.Flags |= FlagFrag
			if frag&ipv4FragMask != 0 {
				return DropNone // later fragment: no transport header
			}
		}
		return parseL4(p, h[9], b[:l3+total], l3+ihl, csum.AddrSum4((*[8]byte)(h[12:20])))
	case 6:
		return parseIPv6(p, b, l3)
	}
	return DropMalformed
}

func parseARP(p *Packet, a []byte) DropReason {
	if len(a) < arpLen || binary.BigEndian.Uint16(a) != arpHrdEthernet ||
		binary.BigEndian.Uint16(a[2:]) != etherTypeIPv4 || a[4] != ethAddrLen || a[5] != 4 {
		return DropMalformed
	}
	p.Flags |= FlagARP | FlagParsed
	return DropNone
}

func parseIPv6(p *Packet, b []byte, l3 int) DropReason {
	h := b[l3:]
	if len(h) < ipv6HdrLen {
		return DropMalformed
	}
	total := ipv6HdrLen + int(binary.BigEndian.Uint16(h[4:]))
	if total > len(h) {
		return DropMalformed
	}
	p.Len = uint16(l3 + total)
	p.Flags |= FlagIPv6 | FlagParsed
	b = b[:l3+total]
	as := csum.AddrSum6((*[32]byte)(h[8:40]))
	next, off := h[6], l3+ipv6HdrLen
	for range 8 { // bound the chain; more headers than this is an attack, not traffic
		switch next {
		case ipv6ExtHopBy, ipv6ExtRoute, ipv6ExtDest, ipv6ExtAH:
			if len(b) < off+8 {
				return DropMalformed
			}
			n := (int(b[off+1]) + 1) * 8
			if next == ipv6ExtAH {
				n = (int(b[off+1]) + 2) * 4
			}
			if len(b) < off+n {
				return DropMalformed
			}
			next, off = b[off], off+n
		case ipv6ExtFrag:
			if len(b) < off+ipv6FragLen {
				return DropMalformed
			}
			fo := binary.BigEndian.Uint16(b[off+2:])
			if fo&0xfff9 != 0 || fo&1 != 0 {
				p.Flags |= FlagFrag
			}
			if fo&0xfff8 != 0 {
				return DropNone // later fragment
			}
			next, off = b[off], off+ipv6FragLen
		case ipv6NoNext:
			return DropNone
		default:
			return parseL4(p, next, b, off, as)
		}
	}
	return DropUnsupported
}

// parseL4 checks the transport header of protocol proto at b[off:]. In a
// first fragment (FlagFrag) the transport header describes the whole
// datagram, so a UDP length beyond the fragment is expected, and a
// header cut short by the fragment boundary leaves the packet without L4
// features rather than malformed: a router forwards fragments as they are.
// as is the sum of the IP addresses (csum.AddrSum4, csum.AddrSum6), for the test
// that sets flagPseudoCsum.
func parseL4(p *Packet, proto uint8, b []byte, off int, as uint64) DropReason {
	if off > 0xff {
		return DropNone // beyond what L4Off can say: forwarded without L4 features
	}
	t := b[off:]
	frag := p.Flags&FlagFrag != 0
	cut := DropMalformed // what a header that does not fit the packet is
	if frag {
		cut = DropNone
	}
	switch proto {
	case protoTCP:
		if len(t) < tcpMinHdrLen {
			return cut
		}
		doff := int(t[12]>>4) * 4
		if doff < tcpMinHdrLen {
			return DropMalformed
		}
		if doff > len(t) {
			return cut
		}
		p.Flags |= FlagTCP
		if !frag && binary.BigEndian.Uint16(t[16:]) == csum.FoldPseudo(as+protoTCP+uint64(len(t))) {
			p.Flags |= flagPseudoCsum
		}
	case protoUDP:
		if len(t) < udpHdrLen {
			return cut
		}
		n := int(binary.BigEndian.Uint16(t[4:]))
		if n < udpHdrLen || n > len(t) && !frag {
			return DropMalformed
		}
		p.Flags |= FlagUDP
		if !frag && binary.BigEndian.Uint16(t[6:]) == csum.FoldPseudo(as+protoUDP+uint64(n)) {
			p.Flags |= flagPseudoCsum
		}
	case protoICMP, protoICMPv6:
		if (proto == protoICMP) != (p.Flags&FlagIPv4 != 0) {
			return DropNone // ICMP in IPv6 or ICMPv6 in IPv4: not ours to read
		}
		if len(t) < 4 || proto == protoICMP && len(t) < icmpHdrLen {
			return cut
		}
		p.Flags |= FlagICMP
	default:
		return DropNone
	}
	p.L4Off = uint8(off)
	return DropNone
}

// ipv4MinHeaderSumOK checks the checksum of an option-less IPv4 header
// (the common case; checksum sums the others), as five fixed words: no
// loop, no bounds checks, small enough to be inlined. The words are read
// little endian: a one's-complement sum of byte-swapped words is the
// byte-swapped sum (RFC 1071 §2(B)), and the all-ones result that means
// "valid" is the same either way.
func ipv4MinHeaderSumOK(w *[ipv4MinHdrLen]byte) bool {
	s := uint64(binary.LittleEndian.Uint64(w[0:])&0xffffffff) + binary.LittleEndian.Uint64(w[0:])>>32 +
		uint64(binary.LittleEndian.Uint64(w[8:])&0xffffffff) + binary.LittleEndian.Uint64(w[8:])>>32 +
		uint64(binary.LittleEndian.Uint32(w[16:]))
	s = s&0xffff + s>>16 // < 2^16 + 2^19
	s = s&0xffff + s>>16 // ≤ 0xffff + 8, and 0 only for a zero sum
	// s ≡ the sum modulo 0xffff: the header checks exactly when s is
	// 0xffff (the next multiple is beyond 0xffff + 8), so the third fold a
	// 16-bit result needs would not change the answer.
	return s == 0xffff
}
