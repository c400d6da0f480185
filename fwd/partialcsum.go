package fwd

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

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
		as = csum.AddrSum4((*[8]byte)(ip4Hdr(p)[12:20]))
	} else {
		as = csum.AddrSum6((*[32]byte)(ip6Hdr(p)[8:40]))
	}
	ps := csum.Fold17(as + uint64(proto) + uint64(n))
	if stored != uint16(ps&0xffff+ps>>16) { // csum.FoldPseudo's value, from ps
		return false
	}
	seg := d[l4o : l4o+n]
	// One pass: the sum with the stored value in place says whether the
	// checksum is already right; adding its complement takes it out again.
	sum := csum.Sum(ps, seg)
	if csum.Fold(sum) == 0 {
		return false // a finished checksum that equals the pseudo-header sum
	}
	c := csum.Fold(sum + uint32(^stored))
	if c == 0 && proto == protoUDP {
		c = 0xffff // RFC 768: zero means "no checksum"; a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(seg[field:], c)
	return true
}
