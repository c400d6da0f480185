package control

import (
	"net/netip"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/hooks"
)

// Peer describes one established client to the data plane.
type Peer struct {
	PeerID     uint32
	Addr       netip.AddrPort // the client's UDP address
	VPNIPv4    netip.Addr     // pushed tunnel addresses (invalid if none)
	VPNIPv6    netip.Addr
	Comp       vpn.Comp // compression stub framing (never real compression)
	CommonName string
	Username   string         // authenticated by auth_user_pass_verify; "" without
	Cipher     vpn.Cipher     // the negotiated data channel cipher
	Since      time.Time      // when the client's session began
	IRoutes    []netip.Prefix // networks behind it that client-connect's file named (iroute)
	Client     hooks.Client   // what its client-disconnect and learn-address commands are told
	Group      string         // the access group the authentication command named ("" none)
}

// DataPlane is the data-channel peer table the control plane drives, in
// the style of the kernel ovpn netlink verbs (Linux
// Documentation/netlink/specs/ovpn.yaml). Calls
// come from control-plane goroutines, never concurrently for one peer.
type DataPlane interface {
	// AddPeer creates the peer before its first key is installed.
	AddPeer(p Peer) error
	// InstallKey puts km (its KeyID selects it on receive) into slot. The
	// first key goes to Primary; a renegotiated key goes to Secondary
	// and is promoted with SetPrimary once the client has it.
	InstallKey(peerID uint32, slot vpn.Slot, km *vpn.KeyMaterial) error
	// SetPrimary makes the key with keyID the transmit key; the other
	// key keeps receiving (the lame duck, ssl.c tls_select_encryption_key).
	SetPrimary(peerID uint32, keyID uint8) error
	// DropKey deletes the key with keyID (the expired lame duck).
	DropKey(peerID uint32, keyID uint8) error
	// RemovePeer deletes the peer and all its keys.
	RemovePeer(peerID uint32) error
	// LastActivity reports when the peer last sent an authenticated data
	// packet and when the data plane last sent it one (zero if never).
	LastActivity(peerID uint32) (rx, tx time.Time)
}
