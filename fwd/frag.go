package fwd

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

// fragment4 splits an IPv4 datagram without DF that exceeds the egress MTU
// (RFC 791 §3.2, RFC 1812 §5.2.6). The first fragment stays in p's buffer
// (header edited, data truncated); each later one is built in a buffer of
// the egress port with only the options whose copied flag is set. The
// later fragments go first: the first one's buffer holds their data.
func (w *Worker) fragment4(t *tables, p *Packet, a *adjacency, mtu int) {
	l3 := p.Data()[p.L3Off:]
	hl := int(l3[0]&0x0f) * 4
	data := int(binary.BigEndian.Uint16(l3[2:])) - hl
	frag := binary.BigEndian.Uint16(l3[6:])
	var opts [40]byte
	on := 0
	for i := ipv4MinHdrLen; i < hl; {
		ty := l3[i]
		if ty == 0 { // end of options
			break
		}
		if ty == 1 { // no-operation
			i++
			continue
		}
		if i+1 >= hl || l3[i+1] < 2 || i+int(l3[i+1]) > hl {
			break
		}
		l := int(l3[i+1])
		if ty&0x80 != 0 { // copied flag
			on += copy(opts[on:], l3[i:i+l])
		}
		i += l
	}
	// A fragment ending past 65,535 bytes belongs to no valid datagram
	// (RFC 791 §3.1: total length is 16 bits); its pieces' offsets would
	// overflow the 13-bit field into the flags.
	if int(frag&ipv4FragMask)*8+data > 0xffff {
		w.drop(p, DropMalformed)
		return
	}
	lhl := ipv4MinHdrLen + (on+3)&^3 // padding stays zero: end of options
	first, later := (mtu-hl)&^7, (mtu-lhl)&^7
	if first < 8 || later < 8 {
		w.drop(p, DropTooBig)
		return
	}
	for off := first; off < data; off += later {
		n := min(later, data-off)
		np := w.alloc(int(a.port))
		if np == nil {
			w.drop(p, DropTxFull) // an incomplete datagram is useless
			return
		}
		w.tmpFrag = *np
		f := &w.tmpFrag
		b := f.Buf[f.Off:]
		if len(b) < lhl+n {
			w.release(f)
			w.drop(p, DropTxFull)
			return
		}
		copy(b[:ipv4MinHdrLen], l3)
		copy(b[ipv4MinHdrLen:lhl], opts[:])
		b[0] = 0x40 | byte(lhl/4)
		binary.BigEndian.PutUint16(b[2:], uint16(lhl+n))
		fo := frag&^ipv4FragMask + uint16(off/8) + frag&ipv4FragMask
		if off+n < data {
			fo |= ipv4FlagMF
		}
		binary.BigEndian.PutUint16(b[6:], fo)
		clear(b[10:12])
		binary.BigEndian.PutUint16(b[10:], csum.Checksum(b[:lhl]))
		copy(b[lhl:], l3[hl+off:hl+off+n])
		f.Len, f.L3Off, f.L4Off = uint16(lhl+n), 0, 0
		f.Flags = FlagL3Only | FlagParsed | FlagIPv4 | FlagFrag
		w.nextHop(t, f, a)
	}
	binary.BigEndian.PutUint16(l3[2:], uint16(hl+first))
	binary.BigEndian.PutUint16(l3[6:], frag|ipv4FlagMF)
	clear(l3[10:12])
	binary.BigEndian.PutUint16(l3[10:], csum.Checksum(l3[:hl]))
	p.Len = uint16(int(p.L3Off) + hl + first)
	p.Flags |= FlagFrag
	w.cnt[cFragments]++
	w.nextHop(t, p, a)
}

// fragment6 splits an IPv6 packet the appliance itself sends (a tunnel's
// outer datagram to a client) that exceeds the egress MTU: RFC 8200 §4.5
// lets the source, and only the source, fragment. Its packets carry no
// extension headers, so the unfragmentable part is the fixed header. The
// first fragment stays in p's buffer, its header moved 8 bytes into the
// headroom to make room for the Fragment header; each later one is built
// in a buffer of the egress port.
func (w *Worker) fragment6(t *tables, p *Packet, a *adjacency, mtu int) {
	l3 := p.Data()[p.L3Off:]
	next := l3[6]
	payload := int(binary.BigEndian.Uint16(l3[4:]))
	chunk := (mtu - ipv6HdrLen - ipv6FragLen) &^ 7
	start := int(p.Off) + int(p.L3Off)
	switch next {
	case ipv6ExtHopBy, ipv6ExtRoute, ipv6ExtFrag, ipv6ExtAH, ipv6ExtDest:
		w.drop(p, DropTooBig) // not a packet of our own making
		return
	}
	if chunk < 8 || start < ipv6FragLen+ethHdrLen+vlanTagLen || ipv6HdrLen+payload > len(l3) {
		w.drop(p, DropTooBig)
		return
	}
	w.fragID++
	id := w.fragID
	for off := chunk; off < payload; off += chunk {
		n := min(chunk, payload-off)
		np := w.alloc(int(a.port))
		if np == nil {
			w.drop(p, DropTxFull) // an incomplete packet is useless
			return
		}
		w.tmpFrag = *np
		f := &w.tmpFrag
		b := f.Buf[f.Off:]
		if len(b) < ipv6HdrLen+ipv6FragLen+n {
			w.release(f)
			w.drop(p, DropTxFull)
			return
		}
		copy(b[:ipv6HdrLen], l3)
		putFragHeader6(b, next, off, off+n < payload, id, n)
		copy(b[ipv6HdrLen+ipv6FragLen:], l3[ipv6HdrLen+off:ipv6HdrLen+off+n])
		f.Len, f.L3Off, f.L4Off = uint16(ipv6HdrLen+ipv6FragLen+n), 0, 0
		f.Flags = FlagL3Only | FlagParsed | FlagIPv6 | FlagFrag
		w.nextHop(t, f, a)
	}
	h := p.Buf[start-ipv6FragLen : start+ipv6HdrLen]
	copy(h, p.Buf[start:start+ipv6HdrLen]) // overlapping: copy moves like memmove
	putFragHeader6(h, next, 0, true, id, chunk)
	p.Off, p.Len = uint16(start-ipv6FragLen), uint16(ipv6HdrLen+ipv6FragLen+chunk)
	p.L3Off, p.L4Off = 0, 0
	p.Flags = p.Flags&^(FlagVLAN|FlagQinQ|FlagUDP|FlagTCP|FlagICMP) | FlagL3Only | FlagFrag
	p.VLAN = 0
	w.cnt[cFragments]++
	w.nextHop(t, p, a)
}

// putFragHeader6 turns the fixed IPv6 header at b into one followed by a
// Fragment header (RFC 8200 §4.5) for n bytes of data at offset off.
func putFragHeader6(b []byte, next uint8, off int, more bool, id uint32, n int) {
	binary.BigEndian.PutUint16(b[4:], uint16(ipv6FragLen+n))
	b[6] = ipv6ExtFrag
	fh := b[ipv6HdrLen : ipv6HdrLen+ipv6FragLen]
	fh[0], fh[1] = next, 0
	fo := uint16(off)
	if more {
		fo |= 1
	}
	binary.BigEndian.PutUint16(fh[2:], fo)
	binary.BigEndian.PutUint32(fh[4:], id)
}
