package fwd

import "encoding/binary"

// Internet checksum (RFC 1071) and its incremental update (RFC 1624).

// sumBytes adds b to a running one's-complement sum as big-endian 16-bit
// words (an odd last byte is padded with zero). It adds 32-bit words into
// 64 bits and folds once at the end: 2^16 ≡ 1 modulo 2^16-1, so a 32-bit
// word's value folds to the sum of its two 16-bit halves (RFC 1071 §2(C)).
// The result is below 2^17, so callers may add small terms to it.
func sumBytes(sum uint32, b []byte) uint32 {
	s := uint64(sum)
	for len(b) >= 32 {
		s += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:])) +
			uint64(binary.BigEndian.Uint32(b[8:])) + uint64(binary.BigEndian.Uint32(b[12:])) +
			uint64(binary.BigEndian.Uint32(b[16:])) + uint64(binary.BigEndian.Uint32(b[20:])) +
			uint64(binary.BigEndian.Uint32(b[24:])) + uint64(binary.BigEndian.Uint32(b[28:]))
		b = b[32:]
	}
	for len(b) >= 4 {
		s += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	s = s&0xffffffff + s>>32 // < 2^33
	s = s&0xffffffff + s>>32 // < 2^32
	s = s&0xffff + s>>16     // < 2^17
	return uint32(s)
}

// fold reduces a running sum to 16 bits and complements it: the value to
// store in a checksum field.
func fold(sum uint32) uint16 {
	for sum > 0xffff {
		sum = (sum & 0xffff) + (sum >> 16)
	}
	return ^uint16(sum)
}

// checksum is the Internet checksum of b.
func checksum(b []byte) uint16 { return fold(sumBytes(0, b)) }

// pseudoSum is the sum of the IPv4 or IPv6 pseudo-header for an upper-layer
// packet of length n: src and dst are 4 or 16 bytes each.
func pseudoSum(src, dst []byte, proto uint8, n int) uint32 {
	s := sumBytes(0, src)
	s = sumBytes(s, dst)
	return s + uint32(proto) + uint32(n>>16) + uint32(n&0xffff)
}

// csumReplace16 returns checksum hc updated for one 16-bit word changing
// from old to new: RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'), which never
// produces the ambiguous -0 that eqn. 2 can.
func csumReplace16(hc, old, new uint16) uint16 {
	s := uint32(^hc) + uint32(^old) + uint32(new)
	s = (s & 0xffff) + (s >> 16)
	s = (s & 0xffff) + (s >> 16)
	return ^uint16(s)
}

// fixCsum16 updates the big-endian checksum stored at field for a 16-bit
// word changing from old to new.
func fixCsum16(field []byte, old, new uint16) {
	binary.BigEndian.PutUint16(field, csumReplace16(binary.BigEndian.Uint16(field), old, new))
}

// Unfinished transport checksums. A Linux host that offloads checksums
// (a veth's default, so every container and VM bridge) hands its driver
// TCP and UDP with CHECKSUM_PARTIAL: the checksum field holds only the
// pseudo-header sum, folded but not complemented (tcp_v4_send_check,
// udp4_hwcsum, and their IPv6 twins in the kernel), and the device is to
// finish it. A veth peer receives the skb so; XDP and AF_XDP get its bytes
// and nothing else (struct xdp_md carries no checksum state, the XDP
// metadata kfuncs offer hash, timestamp and VLAN only), so a forwarder
// must recognise it from the bytes.
//
// The test: the field equals the pseudo-header sum (a few adds over the
// addresses, no pass over the payload), and the segment does not already
// verify. The second part rules out the false positive — a finished
// checksum that happens to have that value (one packet in 65,536 of
// random data): then the sum over the segment checks and the packet is
// left alone. Only packets that pass the cheap test pay for the pass over
// the payload, and those need it to be finished anyway.

// addrSum4 is the sum of an IPv4 pseudo-header's addresses a (source,
// destination) as 32-bit words: two fixed words, not a loop.
func addrSum4(a *[8]byte) uint64 {
	return uint64(binary.BigEndian.Uint32(a[0:])) + uint64(binary.BigEndian.Uint32(a[4:]))
}

// addrSum6 is addrSum4 for IPv6's addresses: eight words, below 2^35.
func addrSum6(a *[32]byte) uint64 {
	w0, w1, w2, w3 := binary.BigEndian.Uint64(a[0:]), binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(a[16:]), binary.BigEndian.Uint64(a[24:])
	return w0>>32 + w0&0xffffffff + w1>>32 + w1&0xffffffff + w2>>32 + w2&0xffffffff + w3>>32 + w3&0xffffffff
}

// foldSum17 folds s, an address sum plus the protocol and the segment's
// length (below 2^36), to a sum below 2^17 that is s modulo 2^16-1.
func foldSum17(s uint64) uint32 {
	s = s&0xffff + s>>16 // < 2^21
	return uint32(s&0xffff + s>>16)
}

// foldPseudo is foldSum17 folded to 16 bits, not complemented: what the
// checksum field of a segment whose sender left it to the device holds.
func foldPseudo(s uint64) uint16 {
	ps := foldSum17(s)
	return uint16(ps&0xffff + ps>>16)
}

// finishPartialCsum completes p's TCP or UDP checksum when the sender left
// only the pseudo-header sum in it, and reports whether it did. p is
// parsed, not a fragment, and carries its whole transport segment.
func finishPartialCsum(p *Packet) bool {
	// Fixed-size views: this runs for every forwarded packet, and each
	// open-ended slice expression costs two index checks and a mask.
	end := int(p.Off) + int(p.Len)
	l4o := int(p.Off) + int(p.L4Off)
	if l4o+udpHdrLen > end || end > len(p.Buf) { // shorter than any header Parse lets through
		return false
	}
	d := p.Buf[:end]
	proto, field, n := uint32(protoTCP), 16, end-l4o
	if p.Flags&FlagUDP != 0 {
		u := (*[udpHdrLen]byte)(d[l4o : l4o+udpHdrLen])
		proto, field, n = protoUDP, 6, int(binary.BigEndian.Uint16(u[4:]))
	}
	if n < field+2 || n > end-l4o {
		return false
	}
	f := l4o + field
	stored := binary.BigEndian.Uint16(d[f : f+2])
	var as uint64
	if p.Flags&FlagIPv4 != 0 {
		as = addrSum4((*[8]byte)(ip4Hdr(p)[12:20]))
	} else {
		as = addrSum6((*[32]byte)(ip6Hdr(p)[8:40]))
	}
	ps := foldSum17(as + uint64(proto) + uint64(n))
	if stored != uint16(ps&0xffff+ps>>16) { // foldPseudo's value, from ps
		return false
	}
	seg := d[l4o : l4o+n]
	// One pass: the sum with the stored value in place says whether the
	// checksum is already right; adding its complement takes it out again.
	sum := sumBytes(ps, seg)
	if fold(sum) == 0 {
		return false // a finished checksum that equals the pseudo-header sum
	}
	c := fold(sum + uint32(^stored))
	if c == 0 && proto == protoUDP {
		c = 0xffff // RFC 768: zero means "no checksum"; a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(seg[field:], c)
	return true
}
