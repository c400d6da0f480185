package vpn

import (
	"encoding/binary"
	"net/netip"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/csum"
)

// The per-packet halves of the Tunnel, in the order a packet meets them.
//
// Inbound (client to LAN): a P_DATA_V2 datagram to the tunnel's port
//
//   1. fwd's worker parses the frame, finds it for the tunnel's UDP port on
//      one of its addresses before any route lookup, and collects it into
//      the worker's decap batch (fwd/demux.go demux4, fwd/tunnel.go
//      runDecap), one call per batch;
//   2. Decap: loads the peer table and the coarse clock once per batch;
//   3. decap, per packet: checks the outer IP and UDP headers; a control
//      opcode goes, with its addresses (outerAddrs), to punt (a copy into
//      the queue's ring for the control plane); P_DATA_V2 looks up the peer
//      by peer-id and the key by key_id, DataKey.open authenticates and
//      decrypts in place (datakey.go), the replay window admits the
//      packet-id, the peer may float to the new source (its endpoint
//      compared in place, peer.go), the compression framing comes off
//      (comp.go), consume takes pings and OCC messages, innerLen checks
//      the inner IP header, sourceAllowed the inner source (peer.go); the
//      Packet is rewritten to the inner packet;
//   4. back in fwd (runDecap): the batch's inner packets are parsed and
//      routed together, to the LAN, or to another peer through Encap
//      (client-to-client).
//
// Outbound (LAN to client): an IP packet routed to a tunnel peer
//
//   1. fwd's FIB finds a tunnel adjacency (NextHop{Tunnel, Peer}); the
//      worker strips the link layer and collects the packet into its encap
//      batch (fwd/tunnel.go toEncap, runEncap), one call per batch;
//   2. Encap: loads the peer table and the clock once per batch, finds the
//      peer by the Packet's Peer;
//   3. encap, per packet: takes the primary key and the peer's endpoint,
//      checks headroom and tailroom, draws the next packet-id
//      (nextPacketID, tunnel.go), adds the compression framing, Seal
//      encrypts in place behind the P_DATA_V2 header it writes in the
//      headroom, then the outer UDP and IP headers go in front (for IPv4,
//      the endpoint's prepared ones);
//   4. back in fwd (runEncap): the batch's outer datagrams, marked
//      FlagParsed (encap wrote their headers: fwd does not parse them
//      again), are routed together out of the port towards the clients,
//      never into the tunnel again.
//
// Everything here runs on a worker: no allocation (but a float's new
// endpoint), no locks, no interface calls except the AEAD's own.

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
	switch data[l3] >> 4 {
	case 4:
		if l3+ipv4HeaderLen > l4 {
			return DropBadOuter
		}
	case 6:
		if l3+ipv6HeaderLen > l4 {
			return DropBadOuter
		}
	default:
		return DropBadOuter
	}
	ip, udp := data[l3:l4], data[l4:]
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	if ulen < udpHeaderLen || ulen > len(udp) {
		return DropBadOuter
	}
	payload := udp[udpHeaderLen:ulen]
	if len(payload) == 0 {
		return DropShort
	}
	switch payload[0] >> OpcodeShift {
	case PDataV2:
	case PDataV1:
		return DropDataV1
	default:
		from, to := outerAddrs(ip, udp)
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
	plain, pid, err := k.key.open(pkt) // length, opcode and key_id checked above
	if err != nil {
		return DropAuth
	}
	switch k.checkReplay(pid) {
	case ReplayDuplicate:
		return DropReplay
	case ReplayTooOld:
		return DropReplayOld
	}
	// Authenticated and new: now the source may move the peer (float).
	if ep := pe.ep.Load(); !ep.carriedBy(ip, udp) {
		if from, to := outerAddrs(ip, udp); ep.remote != from || ep.local != to {
			pe.ep.Store(newEndpointOf(from, to))
			if ep.remote != from {
				t.event(qs, Event{Kind: EventFloat, Peer: pe.id, KeyID: k.key.keyID, Addr: from})
			}
		}
	}
	if pe.lastRecv.Load() != now {
		pe.lastRecv.Store(now)
	}
	if pe.comp != CompNone {
		var ok bool
		if plain, ok = pe.comp.unframe(plain); !ok {
			return DropCompression
		}
	}
	// An IP packet starts with its version; a ping and an OCC message with
	// their magic, whose first nibble is 2.
	if len(plain) > 0 && plain[0]>>4 != 4 && plain[0]>>4 != 6 {
		return t.consume(qs, pe, k, p, plain)
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

// outerAddrs reads a datagram's source and destination from its IP header
// ip (checked: IPv4 or IPv6, whole) and UDP header udp.
func outerAddrs(ip, udp []byte) (from, to netip.AddrPort) {
	var src, dst netip.Addr
	if ip[0]>>4 == 4 {
		src = netip.AddrFrom4([4]byte(ip[12:16]))
		dst = netip.AddrFrom4([4]byte(ip[16:20]))
	} else {
		src = netip.AddrFrom16([16]byte(ip[8:24]))
		dst = netip.AddrFrom16([16]byte(ip[24:40]))
	}
	return netip.AddrPortFrom(src, binary.BigEndian.Uint16(udp[0:])), netip.AddrPortFrom(dst, binary.BigEndian.Uint16(udp[2:]))
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

// consume takes a keepalive ping or an OCC message off the data channel;
// anything else that is not an IP packet is dropped.
func (t *Tunnel) consume(qs *queueState, pe *peer, k *slotKey, p *fwd.Packet, plain []byte) TunnelDrop {
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
	return DropBadInner
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
	v4 := ep.is4
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
	if pe.comp != CompNone {
		off, n = pe.comp.frame(p.Buf, off, n)
	}
	k.key.Seal(p.Buf[off-DataHeaderLen:off:len(p.Buf)], pe.id, pid, p.Buf[off:off+n])
	off -= DataHeaderLen
	n += DataHeaderLen

	n += udpHeaderLen
	off -= udpHeaderLen + ipLen
	if v4 {
		// The endpoint's header with this packet's lengths and ID; the
		// checksum adds them to the sum of the rest (RFC 1071).
		h := (*[ipv4HeaderLen + udpHeaderLen]byte)(p.Buf[off : off+ipv4HeaderLen+udpHeaderLen])
		*h = ep.out4
		qs.ipID++
		binary.BigEndian.PutUint16(h[2:], uint16(ipLen+n))
		binary.BigEndian.PutUint16(h[4:], qs.ipID)
		binary.BigEndian.PutUint16(h[10:], csum.Fold(ep.out4Sum+uint32(ipLen+n)+uint32(qs.ipID)))
		binary.BigEndian.PutUint16(h[ipv4HeaderLen+4:], uint16(n))
		p.Flags = fwd.FlagL3Only | fwd.FlagParsed | fwd.FlagUDP | fwd.FlagIPv4
	} else {
		ip, udp := p.Buf[off:off+ipLen], p.Buf[off+ipLen:off+ipLen+udpHeaderLen]
		binary.BigEndian.PutUint16(udp[0:], ep.local.Port())
		binary.BigEndian.PutUint16(udp[2:], ep.remote.Port())
		binary.BigEndian.PutUint16(udp[4:], uint16(n))
		binary.BigEndian.PutUint16(udp[6:], 0)
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
