package vpn

// TunnelDrop says why the tunnel refused a packet. fwd sees every one of
// them as fwd.DropTunnel; the tunnel counts them here by reason, per queue
// and, once the peer is known, per peer.
type TunnelDrop uint8

const (
	DropNone         TunnelDrop = iota
	DropShort                   // outer headers or the data header truncated
	DropBadOuter                // outer IP/UDP header inconsistent
	DropFragment                // outer datagram fragmented: no reassembly here
	DropDataV1                  // P_DATA_V1: peer-id is always pushed, so never expected
	DropUnknownPeer             // no peer with that peer-id (or 0xFFFFFF)
	DropUnknownKey              // no key installed under that key_id
	DropAuth                    // AEAD authentication failed
	DropReplay                  // packet-id seen before
	DropReplayOld               // packet-id behind the replay window
	DropCompression             // compression framing we do not accept (real compression)
	DropBadInner                // decrypted payload is not an IPv4/IPv6 packet
	DropSpoofed                 // inner source address not among the peer's AllowedSources
	DropNoKey                   // Encap: the peer has no primary key yet
	DropKeyExhausted            // Encap: the key's packet-ids are used up
	DropNoRoom                  // Encap: not enough headroom/tailroom
	DropNoAddress               // Encap: the peer's local address is not known yet
	DropPuntFull                // control packet: punt ring full
	DropPuntTooBig              // control packet larger than MaxControlPacket
	NumTunnelDrops
)

var tunnelDropNames = [NumTunnelDrops]string{
	"none", "short", "bad_outer", "fragment", "data_v1", "unknown_peer", "unknown_key", "auth",
	"replay", "replay_old", "compression", "bad_inner", "spoofed", "no_key", "key_exhausted",
	"no_room", "no_address", "punt_full", "punt_too_big",
}

func (d TunnelDrop) String() string {
	if d < NumTunnelDrops {
		return tunnelDropNames[d]
	}
	return "unknown"
}
