package fwd

// DropReason says why a packet was dropped. Every drop is counted by reason.
type DropReason uint8

const (
	DropNone          DropReason = iota
	DropMalformed                // headers do not parse
	DropNotForUs                 // unicast to another MAC in router mode
	DropNoRoute                  // no route, ICMP unreachable sent (rate permitting)
	DropTTLExceeded              // TTL/hop limit expired, ICMP time exceeded sent
	DropTooBig                   // over the egress MTU with DF / IPv6, ICMP sent
	DropNeighbourFull            // unresolved neighbour's hold queue full
	DropNeighbourFail            // neighbour did not resolve
	DropPuntFull                 // punt ring to the control plane full
	DropTxFull                   // egress queue full
	DropVLAN                     // VLAN not a member of the port
	DropLoop                     // bridge: destination is the ingress port
	DropUnsupported              // protocol we do not forward
	DropTunnel                   // the tunnel refused it (see the tunnel's own counters)
	DropLinkDown                 // egress link down
	DropUplinkFull               // the ring to a site-to-site uplink is full
	DropNAT                      // NAT refused it (reasons in the NAT counters)
	DropHandoffFull              // the ring to the worker owning its NAT flow is full
	DropGleanLimited             // would start resolving a new neighbour beyond its sender's rate
	DropPeerToPeer               // a tunnel peer's packet to another peer, client_to_client off
	DropMartian                  // an address that is never routed at either end (martian.go)
	DropTunnelSource             // from a port with a source that routes into the tunnel (a client's address), on its way to NAT
	DropACL                      // an access rule (or a list's default) denied it
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	"none", "malformed", "not_for_us", "no_route", "ttl_exceeded", "too_big",
	"neighbour_full", "neighbour_fail", "punt_full", "tx_full", "vlan",
	"loop", "unsupported", "tunnel", "link_down", "uplink_full",
	"nat", "handoff_full",
	"glean_limited", "client_to_client", "martian", "tunnel_source", "acl",
}

func (r DropReason) String() string {
	if r < NumDropReasons {
		return dropNames[r]
	}
	return "unknown"
}
