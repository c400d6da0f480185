package vpn

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

// Slot names one of a peer's two key slots. The primary key sends; both
// receive, chosen by the key_id in the packet, so a renegotiation installs
// the new key as secondary, swaps it to primary when the control plane says
// so, and the old key keeps decrypting late packets until it is dropped.
type Slot uint8

const (
	Primary Slot = iota
	Secondary
)

// PeerConfig is what the control plane knows about a peer when it adds it.
type PeerConfig struct {
	ID     uint32         // peer-id pushed to the client, < the tunnel's MaxPeers
	Remote netip.AddrPort // the client's UDP address
	Local  netip.AddrPort // the appliance address and port the client talks to; if invalid, learnt from its first data packet
	Comp   Comp
	// Keepalive: Poll reports EventPingDue after PingEvery without sending
	// and EventExpired after Timeout without an authenticated packet. Zero
	// disables either.
	PingEvery time.Duration
	Timeout   time.Duration
	// AllowedSources, when not empty, are the inner source addresses the
	// peer may use (its pushed addresses as /32 and /128, plus iroutes):
	// Decap drops anything else as spoofed, like the kernel module's
	// reverse-path check. Empty leaves the check to the FIB.
	AllowedSources []netip.Prefix
}

// endpoint is a peer's address pair; immutable, replaced whole on a float.
type endpoint struct {
	remote, local netip.AddrPort
	// For an IPv4 pair with both ends known, the bytes a packet from the
	// peer carries (IPv4 source and destination, UDP source and destination
	// ports), so that Decap's float check compares them in place.
	is4   bool
	ip4   [8]byte
	ports [4]byte
	// For the same pair, the IPv4 and UDP headers Encap puts in front of a
	// packet to the peer, lengths, ID and checksum zero, and the checksum's
	// sum of the rest.
	out4    [ipv4HeaderLen + udpHeaderLen]byte
	out4Sum uint32
}

func newEndpointOf(remote, local netip.AddrPort) *endpoint {
	e := &endpoint{remote: remote, local: local}
	if remote.Addr().Is4() && local.IsValid() && local.Addr().Is4() {
		r, l := remote.Addr().As4(), local.Addr().As4()
		e.is4 = true
		copy(e.ip4[:4], r[:])
		copy(e.ip4[4:], l[:])
		binary.BigEndian.PutUint16(e.ports[0:], remote.Port())
		binary.BigEndian.PutUint16(e.ports[2:], local.Port())
		h := &e.out4
		h[0] = 0x45 // no DF (h[6:8] zero): a router may fragment the outer packet
		h[8], h[9] = outerTTL, protoUDP
		copy(h[12:16], l[:])
		copy(h[16:20], r[:])
		e.out4Sum = csum.Sum(0, h[:ipv4HeaderLen])
		binary.BigEndian.PutUint16(h[ipv4HeaderLen:], local.Port())
		binary.BigEndian.PutUint16(h[ipv4HeaderLen+2:], remote.Port())
		// h[ipv4HeaderLen+6:] zero: no UDP checksum over IPv4 (RFC 768)
	}
	return e
}

// carriedBy reports whether an IPv4 packet with header ip and UDP header
// udp comes from remote to local. False may also mean "not known in place"
// (IPv6, or no local address yet): the caller then compares the addresses.
func (e *endpoint) carriedBy(ip, udp []byte) bool {
	return e.is4 && [8]byte(ip[12:20]) == e.ip4 && [4]byte(udp[:4]) == e.ports
}

// slotKey is one installed key with its send and receive state.
type slotKey struct {
	key *DataKey

	// txLast is the last packet-id sent; Add(1) hands out the next. It is 64
	// bits wide so it can run past 2^32-1 without wrapping into old ids.
	txLast     atomic.Uint64
	wearNoted  atomic.Bool
	spentNoted atomic.Bool

	_ [64]byte // the sending worker and the receiving worker write different lines

	// rxBusy serialises the replay window. A peer's packets normally arrive
	// on one queue (RSS hashes its one UDP flow), so this compare-and-swap
	// is uncontended; it exists for the moment after a float when two
	// workers may briefly see the same peer. The wait is a few instructions.
	rxBusy atomic.Bool
	replay ReplayWindow
}

func (k *slotKey) checkReplay(id uint32) ReplayResult {
	for !k.rxBusy.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
	r := k.replay.Check(id)
	k.rxBusy.Store(false)
	return r
}

// keySet is the immutable pair of slots published per peer.
type keySet struct {
	slot [2]*slotKey
}

func (s *keySet) byKeyID(kid uint8) *slotKey {
	if k := s.slot[Primary]; k != nil && k.key.keyID == kid {
		return k
	}
	if k := s.slot[Secondary]; k != nil && k.key.keyID == kid {
		return k
	}
	return nil
}

// peer is one client. Its address and keys are swapped whole through atomic
// pointers; its counters are atomics written by whichever worker sees it.
type peer struct {
	id        uint32
	comp      Comp
	pingEvery int64 // ns, 0 = off
	timeout   int64 // ns, 0 = off

	ep      atomic.Pointer[endpoint]
	sources atomic.Pointer[sourceSet] // nil: no check
	keys    atomic.Pointer[keySet]

	lastRecv atomic.Int64 // tunnel clock (ns) of the last authenticated packet
	lastSent atomic.Int64 // tunnel clock (ns) of the last packet sent

	expiredNoted atomic.Bool
	pingNoted    atomic.Int64 // lastSent value a ping was already asked for

	stats peerCounters
}

type peerCounters struct {
	rxPackets, rxBytes atomic.Uint64
	txPackets, txBytes atomic.Uint64
	pings              atomic.Uint64
	drops              [NumTunnelDrops]atomic.Uint64
}

// PeerStats is a snapshot of a peer's counters.
type PeerStats struct {
	Remote, Local      netip.AddrPort
	RxPackets, RxBytes uint64 // authenticated inner packets / bytes, pings excluded
	TxPackets, TxBytes uint64
	PingsReceived      uint64
	Drops              [NumTunnelDrops]uint64
	LastRecv, LastSent time.Duration // tunnel clock
	PrimaryKeyID       int           // -1: none
	SecondaryKeyID     int
	TxPacketID         uint64 // last packet-id sent with the primary key
}

// peerTable is the peer-id → peer array the workers read, sized once to
// MaxPeers. Each slot is published on its own (an atomic pointer), so
// adding or removing a peer is O(1) however many peers there are, and a
// worker's lookup is one load.
type peerTable struct {
	peers []atomic.Pointer[peer]
}

func (t *peerTable) get(id uint32) *peer {
	if id < uint32(len(t.peers)) {
		return t.peers[id].Load()
	}
	return nil
}

// sourceSet is a peer's AllowedSources as the per-packet check reads
// them: IPv4 prefixes as address and mask words, so the common check (the
// client's one /32) is a load, a mask and a compare.
type sourceSet struct {
	v4 []source4
	v6 []netip.Prefix
}

type source4 struct{ addr, mask uint32 }

// newSourceSet compiles prefixes (the caller keeps its slice), canonical
// and unmapped; no prefixes means no check (nil).
func newSourceSet(prefixes []netip.Prefix) *sourceSet {
	if len(prefixes) == 0 {
		return nil
	}
	s := &sourceSet{}
	for _, pfx := range prefixes {
		if pfx.Addr().Is4In6() && pfx.Bits() >= 96 {
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
		}
		pfx = pfx.Masked()
		if pfx.Addr().Is4() {
			a := pfx.Addr().As4()
			// A shift by 32 (a /0) leaves 0: every address matches.
			s.v4 = append(s.v4, source4{addr: binary.BigEndian.Uint32(a[:]), mask: ^uint32(0) << (32 - pfx.Bits())})
		} else {
			s.v6 = append(s.v6, pfx)
		}
	}
	return s
}

// sourceAllowed reports whether the inner packet's source address is one
// the peer may use. b is a checked IPv4 or IPv6 packet.
func (p *peer) sourceAllowed(b []byte) bool {
	s := p.sources.Load()
	if s == nil {
		return true
	}
	if b[0]>>4 == 4 {
		src := binary.BigEndian.Uint32(b[12:16])
		for _, e := range s.v4 {
			if src&e.mask == e.addr {
				return true
			}
		}
		return false
	}
	src := netip.AddrFrom16([16]byte(b[8:24]))
	for _, pfx := range s.v6 {
		if pfx.Contains(src) {
			return true
		}
	}
	return false
}
