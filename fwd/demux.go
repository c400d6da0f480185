package fwd

import "encoding/binary"

// Early demux of the tunnel's datagrams: a received IPv4 UDP datagram to
// the tunnel's port on one of our addresses goes to the decap batch from
// routeFrame, without the FIB lookup, forwardIP and localInput, as the
// kernel hands a datagram to its socket before the route lookup
// (net/ipv4/ip_input.c ip_rcv_finish_core, net/ipv4/udp.c
// udp_v4_early_demux). The test is exact: our own addresses are host
// routes to a local adjacency that no other route overrides (effective),
// so such a datagram is one the FIB would send to localInput, whose
// tunnelData branch it would take. What that path would have done on the
// way is done here: FlagLocal, fragments to the host (not demuxed), and
// NAT, which passes a datagram to a port it never maps (nat.Config's
// Exclude; demux4 steps aside when the tunnel's port is not that one).
// IPv6 datagrams, and addresses past the first maxDemux4, take the FIB.

// maxDemux4 bounds the addresses demux4 compares with: an appliance has
// one or two.
const maxDemux4 = 4

// demux4 takes p (parsed IPv4, header h, a candDemux candidate) into the
// decap batch when it is the tunnel's; false leaves it to the FIB.
func (w *Worker) demux4(t *tables, p *Packet, h *[ipv4MinHdrLen]byte) bool {
	if p.Flags&(FlagUDP|FlagFrag) != FlagUDP || t.tunnel == nil {
		return false
	}
	x := int(p.Off) + int(p.L4Off)
	if binary.BigEndian.Uint16(p.Buf[x+2:x+4]) != t.tunnelPort { // Parse checked the UDP header is there
		return false
	}
	if w.nat.Active() && w.nat.Excluded() != t.tunnelPort {
		return false
	}
	dst := binary.LittleEndian.Uint32(h[16:20])
	for _, a := range t.mart.own4[:t.mart.n4] {
		if a == dst {
			p.Flags |= FlagLocal
			w.toDecap(t, p)
			return true
		}
	}
	return false
}
