package vpn

import (
	"encoding/binary"
	"net/netip"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/csum"
)

// The per-packet halves of the Tunnel. Everything here runs on a worker:
// no allocation (but a float's new endpoint), no locks, no interface calls
// except the AEAD's own.

const (
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	udpHeaderLen  = 8
	protoUDP      = 17
	outerTTL      = 64
)

// Decap implements fwd.Tunnel.
func (t *Tunnel) Decap(q int, b *fwd.Batch) {
	qs := &t.queues[q]
	tab := t.peers.Load()
	now := t.clock.Load()
	punted := qs.punt.tail.Load()
	for i := range b.Pkts {
		p := &b.Pkts[i]
		p.Verdict, p.Reason = fwd.VerdictForward, fwd.DropNone
		var pr *peer
		if d := t.decap(qs, tab, now, p, &pr); d != DropNone {
			qs.drops[d].Add(1)
			if pr != nil {
				pr.stats.drops[d].Add(1)
			}
			p.Verdict, p.Reason = fwd.VerdictDrop, fwd.DropTunnel
		}
	}
	if qs.punt.tail.Load() != punted {
		select { // once per batch, never blocking
		case t.controlReady <- struct{}{}:
		default:
		}
	}
}

func (t *Tunnel) decap(qs *queueState, tab *peerTable, now int64, p *fwd.Packet, pr **peer) TunnelDrop {
	data := p.Data()
	l3, l4 := int(p.L3Off), int(p.L4Off)
	if p.Flags&fwd.FlagParsed == 0 || l4 == 0 || l4+udpHeaderLen > len(data) || l3 >= l4 {
		return DropShort
	}
	if p.Flags&fwd.FlagFrag != 0 {
		return DropFragment
	}
	var src, dst netip.Addr
	switch data[l3] >> 4 {
	case 4:
		if l3+ipv4HeaderLen > l4 {
			return DropBadOuter
		}
		src = netip.AddrFrom4([4]byte(data[l3+12 : l3+16]))
		dst = netip.AddrFrom4([4]byte(data[l3+16 : l3+20]))
	case 6:
		if l3+ipv6HeaderLen > l4 {
			return DropBadOuter
		}
		src = netip.AddrFrom16([16]byte(data[l3+8 : l3+24]))
		dst = netip.AddrFrom16([16]byte(data[l3+24 : l3+40]))
	default:
		return DropBadOuter
	}
	udp := data[l4:]
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	if ulen < udpHeaderLen || ulen > len(udp) {
		return DropBadOuter
	}
	from := netip.AddrPortFrom(src, binary.BigEndian.Uint16(udp[0:]))
	to := netip.AddrPortFrom(dst, binary.BigEndian.Uint16(udp[2:]))
	payload := udp[udpHeaderLen:ulen]
	if len(payload) == 0 {
		return DropShort
	}
	switch payload[0] >> OpcodeShift {
	case PDataV2:
	case PDataV1:
		return DropDataV1
	default:
		return t.punt(qs, p, from, to, payload)
	}
	if len(payload) < DataHeaderLen {
		return DropShort
	}
	peerID := uint32(payload[1])<<16 | uint32(payload[2])<<8 | uint32(payload[3])
	pe := tab.get(peerID)
	if pe == nil {
		return DropUnknownPeer
	}
	*pr = pe
	k := pe.keys.Load().byKeyID(payload[0] & KeyIDMask)
	if k == nil {
		return DropUnknownKey
	}
	// Re-slice from the buffer so Open may use the tailroom (never past the
	// buffer: Buf may be a window onto a larger UMEM).
	start := int(p.Off) + l4 + udpHeaderLen
	pkt := p.Buf[start : start+len(payload) : len(p.Buf)]
	plain, pid, err := k.key.Open(pkt)
	if err != nil {
		if err == ErrShort {
			return DropShort
		}
		return DropAuth
	}
	switch k.checkReplay(pid) {
	case ReplayDuplicate:
		return DropReplay
	case ReplayTooOld:
		return DropReplayOld
	}
	// Authenticated and new: now the source may move the peer (float).
	if ep := pe.ep.Load(); ep.remote != from || ep.local != to {
		pe.ep.Store(&endpoint{remote: from, local: to})
		if ep.remote != from {
			t.event(qs, Event{Kind: EventFloat, Peer: pe.id, KeyID: k.key.keyID, Addr: from})
		}
	}
	if pe.lastRecv.Load() != now {
		pe.lastRecv.Store(now)
	}
	plain, ok := pe.comp.unframe(plain)
	if !ok {
		return DropCompression
	}
	if len(plain) == len(PingMagic) && [16]byte(plain) == PingMagic {
		qs.pings.Add(1)
		pe.stats.pings.Add(1)
		p.Verdict = fwd.VerdictConsumed
		return DropNone
	}
	if len(plain) > len(OCCMagic) && [16]byte(plain[:16]) == OCCMagic {
		if plain[16] == OCCExit {
			t.event(qs, Event{Kind: EventExit, Peer: pe.id, KeyID: k.key.keyID})
		}
		p.Verdict = fwd.VerdictConsumed
		return DropNone
	}
	n, flag := innerLen(plain)
	if n == 0 {
		return DropBadInner
	}
	if !pe.sourceAllowed(plain) {
		return DropSpoofed
	}
	pe.stats.rxPackets.Add(1)
	pe.stats.rxBytes.Add(uint64(n))
	// plain ends its capacity where the buffer ends, which locates it.
	p.Off = uint16(len(p.Buf) - cap(plain))
	p.Len = uint16(n)
	p.Flags = fwd.FlagL3Only | flag
	p.L3Off, p.L4Off = 0, 0
	p.Peer = peerID
	return DropNone
}

// innerLen checks that b starts with an IPv4 or IPv6 header and returns the
// IP packet's length (which may be less than len(b)) and its family flag,
// or 0 when it is not a sane IP packet.
func innerLen(b []byte) (int, fwd.Flags) {
	if len(b) == 0 {
		return 0, 0
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) < ipv4HeaderLen {
			return 0, 0
		}
		ihl := int(b[0]&0x0f) * 4
		tot := int(binary.BigEndian.Uint16(b[2:]))
		if ihl < ipv4HeaderLen || tot < ihl || tot > len(b) {
			return 0, 0
		}
		return tot, fwd.FlagIPv4
	case 6:
		if len(b) < ipv6HeaderLen {
			return 0, 0
		}
		tot := ipv6HeaderLen + int(binary.BigEndian.Uint16(b[4:]))
		if tot > len(b) {
			return 0, 0
		}
		return tot, fwd.FlagIPv6
	}
	return 0, 0
}

// punt copies a control packet to the control plane's ring.
func (t *Tunnel) punt(qs *queueState, p *fwd.Packet, from, to netip.AddrPort, payload []byte) TunnelDrop {
	if len(payload) > MaxControlPacket {
		return DropPuntTooBig
	}
	if !qs.punt.put(from, to, payload) {
		return DropPuntFull
	}
	p.Verdict = fwd.VerdictConsumed
	return DropNone
}

// Encap implements fwd.Tunnel.
func (t *Tunnel) Encap(q int, b *fwd.Batch) {
	qs := &t.queues[q]
	tab := t.peers.Load()
	now := t.clock.Load()
	for i := range b.Pkts {
		p := &b.Pkts[i]
		p.Verdict, p.Reason = fwd.VerdictForward, fwd.DropNone
		pe := tab.get(p.Peer)
		if pe == nil {
			t.encapDrop(qs, nil, p, DropUnknownPeer)
			continue
		}
		if d := t.encap(qs, pe, now, p); d != DropNone {
			t.encapDrop(qs, pe, p, d)
		}
	}
}

func (t *Tunnel) encapDrop(qs *queueState, pe *peer, p *fwd.Packet, d TunnelDrop) {
	qs.drops[d].Add(1)
	if pe != nil {
		pe.stats.drops[d].Add(1)
	}
	p.Verdict, p.Reason = fwd.VerdictDrop, fwd.DropTunnel
}

func (t *Tunnel) encap(qs *queueState, pe *peer, now int64, p *fwd.Packet) TunnelDrop {
	k := pe.keys.Load().slot[Primary]
	if k == nil {
		return DropNoKey
	}
	ep := pe.ep.Load()
	if !ep.local.IsValid() {
		return DropNoAddress
	}
	v4 := ep.remote.Addr().Is4()
	ipLen := ipv6HeaderLen
	if v4 {
		ipLen = ipv4HeaderLen
	}
	off, n := int(p.Off), int(p.Len)
	// Room: the framing prefix, the data header and the outer headers in
	// front; a swapped framing byte and the AEAD's tag scratch behind.
	if off < maxCompPrefix+DataHeaderLen+udpHeaderLen+ipLen || len(p.Buf)-(off+n) < 1+TagLen {
		return DropNoRoom
	}
	if off+n+1+TagLen+DataHeaderLen+udpHeaderLen+ipLen > 0xffff {
		return DropNoRoom
	}
	pid, ok := t.nextPacketID(qs, pe, k)
	if !ok {
		return DropKeyExhausted
	}
	inner := n
	off, n = pe.comp.frame(p.Buf, off, n)
	k.key.Seal(p.Buf[off-DataHeaderLen:off:len(p.Buf)], pe.id, pid, p.Buf[off:off+n])
	off -= DataHeaderLen
	n += DataHeaderLen

	off -= udpHeaderLen
	udp := p.Buf[off : off+udpHeaderLen]
	n += udpHeaderLen
	binary.BigEndian.PutUint16(udp[0:], ep.local.Port())
	binary.BigEndian.PutUint16(udp[2:], ep.remote.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(n))
	binary.BigEndian.PutUint16(udp[6:], 0) // IPv4: zero means "no checksum" (RFC 768)

	off -= ipLen
	ip := p.Buf[off : off+ipLen]
	if v4 {
		qs.ipID++
		ip[0], ip[1] = 0x45, 0
		binary.BigEndian.PutUint16(ip[2:], uint16(ipLen+n))
		binary.BigEndian.PutUint16(ip[4:], qs.ipID)
		binary.BigEndian.PutUint16(ip[6:], 0) // no DF: the router may fragment the outer packet
		ip[8], ip[9] = outerTTL, protoUDP
		binary.BigEndian.PutUint16(ip[10:], 0)
		src, dst := ep.local.Addr().As4(), ep.remote.Addr().As4()
		copy(ip[12:16], src[:])
		copy(ip[16:20], dst[:])
		binary.BigEndian.PutUint16(ip[10:], csum.Fold(csum.Sum(0, ip)))
		p.Flags = fwd.FlagL3Only | fwd.FlagParsed | fwd.FlagUDP | fwd.FlagIPv4
	} else {
		binary.BigEndian.PutUint32(ip[0:], 6<<28)
		binary.BigEndian.PutUint16(ip[4:], uint16(n))
		ip[6], ip[7] = protoUDP, outerTTL
		src, dst := ep.local.Addr().As16(), ep.remote.Addr().As16()
		copy(ip[8:24], src[:])
		copy(ip[24:40], dst[:])
		// IPv6 requires the UDP checksum (RFC 8200 §8.1): pseudo-header + datagram.
		acc := csum.Sum(0, ip[8:40])
		acc += uint32(n) + protoUDP
		acc = csum.Sum(acc, p.Buf[off+ipLen:off+ipLen+n])
		c := csum.Fold(acc)
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(udp[6:], c)
		p.Flags = fwd.FlagL3Only | fwd.FlagParsed | fwd.FlagUDP | fwd.FlagIPv6
	}
	n += ipLen
	p.Off, p.Len = uint16(off), uint16(n)
	p.L3Off, p.L4Off = 0, uint8(ipLen)
	pe.stats.txPackets.Add(1)
	pe.stats.txBytes.Add(uint64(inner))
	if pe.lastSent.Load() != now {
		pe.lastSent.Store(now)
	}
	return DropNone
}
