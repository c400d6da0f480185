package fwd

import (
	"net/netip"
	"sync/atomic"

	"github.com/ovfwd/ovfwd/fwd/lpm"
)

// tables is everything the workers read about routing and ports. It is
// immutable once published: the control plane builds a new one and swaps
// the pointer (copy-on-write).
type tables struct {
	v4    *lpm.V4 // prefix → index into adj
	v6    *lpm.V6
	adj   []adjacency // append-only: indexes held by old tables stay valid
	ports []portConf

	tunnel     Tunnel
	tunnelPort uint16 // UDP port of the tunnel on our addresses; 0 = none
	// clientToClient lets packets a peer sent be routed into the tunnel
	// to another peer (SetClientToClient).
	clientToClient bool

	mart martianTables // the martian candidate tests' (martian.go)
}

type adjKind uint8

const (
	adjGlean     adjKind = iota + 1 // connected subnet: the destination is the neighbour
	adjVia                          // remote: the neighbour is the gateway
	adjLocal                        // one of our addresses
	adjTunnel                       // into the tunnel, to peer
	adjBlackhole                    // drop silently
	adjUplink                       // to the control plane's uplink peer (its MTU in mtu)
)

type adjacency struct {
	kind adjKind
	port uint16
	via  [16]byte // gateway as a neighbour key (key4 for IPv4)
	peer uint32
	mtu  uint16 // adjUplink only
}

// portConf is the per-port part of tables.
type portConf struct {
	mac  [6]byte
	mtu  int
	pool uint16
	v4   []netip.Prefix // our addresses on the port
	v6   []netip.Prefix
	// VLANs. Router mode: routerTag is the 802.1Q tag the port sends and
	// expects (0: untagged). Bridge mode: pvid carries untagged frames (0:
	// untagged frames dropped) and member says which tagged VLANs pass.
	routerTag uint16
	pvid      uint16
	member    *[4096 / 64]uint64
	// hostCopies: punt a copy of ARP/ND for a host stack behind an
	// exception TAP (SetHostCopies).
	hostCopies bool
}

func (pc *portConf) isMember(vlan uint16) bool {
	return pc.member != nil && pc.member[vlan>>6]&(1<<(vlan&63)) != 0
}

// src4 picks our IPv4 address on the port for talking to dst: one on dst's
// subnet if any, else the first.
func (pc *portConf) src4(dst [4]byte) ([4]byte, bool) {
	a := netip.AddrFrom4(dst)
	for _, p := range pc.v4 {
		if p.Contains(a) {
			return p.Addr().As4(), true
		}
	}
	if len(pc.v4) > 0 {
		return pc.v4[0].Addr().As4(), true
	}
	return [4]byte{}, false
}

func (pc *portConf) src6(dst [16]byte) ([16]byte, bool) {
	a := netip.AddrFrom16(dst)
	for _, p := range pc.v6 {
		if p.Contains(a) {
			return p.Addr().As16(), true
		}
	}
	if len(pc.v6) > 0 {
		return pc.v6[0].Addr().As16(), true
	}
	return [16]byte{}, false
}

func (pc *portConf) owns4(a []byte) bool {
	for _, p := range pc.v4 {
		if p.Addr().As4() == [4]byte(a) {
			return true
		}
	}
	return false
}

func (pc *portConf) owns6(a []byte) bool {
	for _, p := range pc.v6 {
		if p.Addr().As16() == [16]byte(a) {
			return true
		}
	}
	return false
}

// neighbour is one ARP/ND entry. The control plane creates and removes
// entries; the data plane refreshes an existing entry's MAC and expiry with
// atomic stores (no lock), so a reply needs no round trip to take effect.
type neighbour struct {
	port   uint16
	addr   [16]byte
	is4    bool
	static bool
	// confirmed: the address answered our question, or has talked to us
	// from this MAC since; only then does a different MAC not replace it.
	confirmed atomic.Bool
	// mac holds the MAC in the low 48 bits and neighValid in bit 63.
	mac     atomic.Uint64
	expires atomic.Int64 // engine clock ns; static entries never expire
	// reported is the MAC the last event gave the control plane (control
	// plane only): a worker's move whose message was lost shows as a
	// difference.
	reported uint64
	probeAt  atomic.Int64 // no unicast refresh probe before this time
}

const neighValid = 1 << 63

func packMAC(m []byte) uint64 {
	return neighValid | uint64(m[0])<<40 | uint64(m[1])<<32 | uint64(m[2])<<24 |
		uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}

func unpackMAC(v uint64, m []byte) {
	_ = m[5]
	m[0], m[1], m[2], m[3], m[4], m[5] = byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

type neighKey struct {
	port uint16
	addr [16]byte
}

func neighHash(port uint16, a *[16]byte) uint64 {
	lo := uint64(a[0]) | uint64(a[1])<<8 | uint64(a[2])<<16 | uint64(a[3])<<24 |
		uint64(a[4])<<32 | uint64(a[5])<<40 | uint64(a[6])<<48 | uint64(a[7])<<56
	hi := uint64(a[8]) | uint64(a[9])<<8 | uint64(a[10])<<16 | uint64(a[11])<<24 |
		uint64(a[12])<<32 | uint64(a[13])<<40 | uint64(a[14])<<48 | uint64(a[15])<<56
	return neighHashWords(port, lo, hi)
}

// neighHashWords is neighHash of the address read as two little-endian
// words (bytes 0–7 and 8–15).
func neighHashWords(port uint16, lo, hi uint64) uint64 {
	// Every bit of the result must depend on every byte of the address:
	// callers index with the low bits (the table's home slot, the glean
	// bucket) and tag with the high ones. The finaliser is MurmurHash3's
	// fmix64. (The former single multiply left the low bits independent
	// of an IPv6 address's last three bytes: every host of a /64 numbered
	// ::1, ::2, ... shared one home slot and one glean budget.)
	h := (lo^uint64(port))*0x9e3779b97f4a7c15 ^ hi
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	return h ^ h>>33
}

// neighTable is an open-addressing index over the entries. Workers read
// it without a lock while the control plane (under e.mu) changes it in
// place: an insert fills a free or deleted slot of its key's chain, a
// delete leaves a tombstone, so a concurrent lookup finds every entry
// present throughout and stops only at a never-used slot. Rebuilding it
// per change instead made a neighbour storm's main garbage (8 KiB per
// control pass). Tombstones lengthen chains: when live and deleted slots
// would pass half the table, the control plane builds a fresh one and
// publishes it (Engine.putNeigh), once per cap/4 deletions or so.
type neighTable struct {
	slots      []atomic.Pointer[neighbour]
	mask       uint64
	used, dead int // control plane only
}

// neighDeleted marks a slot whose entry was deleted (a tombstone).
var neighDeleted = &neighbour{port: 0xffff}

func buildNeighTable(all map[neighKey]*neighbour) *neighTable {
	n := 16
	for n < 4*len(all) {
		n <<= 1
	}
	t := &neighTable{slots: make([]atomic.Pointer[neighbour], n), mask: uint64(n - 1)}
	for _, e := range all {
		h := neighHash(e.port, &e.addr)
		for t.slots[h&t.mask].Load() != nil {
			h++
		}
		t.slots[h&t.mask].Store(e)
	}
	t.used = len(all)
	return t
}

func (t *neighTable) lookup(port uint16, a *[16]byte) *neighbour {
	h := neighHash(port, a)
	for {
		e := t.slots[h&t.mask].Load()
		if e == nil || e.port == port && e.addr == *a && e != neighDeleted {
			return e
		}
		h++
	}
}

// put adds n, or replaces the entry with its key. It reports false,
// changing nothing, when the table is too full to take it.
func (t *neighTable) put(n *neighbour) bool {
	var free *atomic.Pointer[neighbour] // the chain's first tombstone
	h := neighHash(n.port, &n.addr)
	for ; ; h++ {
		s := &t.slots[h&t.mask]
		e := s.Load()
		switch {
		case e == neighDeleted:
			if free == nil {
				free = s
			}
			continue
		case e == nil:
		case e.port == n.port && e.addr == n.addr:
			s.Store(n)
			return true
		default:
			continue
		}
		if free != nil {
			free.Store(n)
			t.dead--
		} else {
			if 2*(t.used+t.dead+1) > len(t.slots) {
				return false
			}
			s.Store(n)
		}
		t.used++
		return true
	}
}

// remove deletes the entry with n's key, if there is one.
func (t *neighTable) remove(n *neighbour) {
	h := neighHash(n.port, &n.addr)
	for ; ; h++ {
		s := &t.slots[h&t.mask]
		e := s.Load()
		if e == nil {
			return
		}
		if e != neighDeleted && e.port == n.port && e.addr == n.addr {
			s.Store(neighDeleted)
			t.used--
			t.dead++
			return
		}
	}
}

// key4 is the neighbour key of an IPv4 address: its IPv4-mapped IPv6 form,
// which no IPv6 neighbour can have.
func key4(a []byte) (k [16]byte) {
	k[10], k[11] = 0xff, 0xff
	copy(k[12:], a[:4])
	return k
}

// onLink4 reports whether a is on one of the port's IPv4 subnets.
func (pc *portConf) onLink4(a []byte) bool {
	ad := netip.AddrFrom4([4]byte(a))
	for _, p := range pc.v4 {
		if p.Contains(ad) {
			return true
		}
	}
	return false
}

// onLink6 reports whether a is link-local or on one of the port's IPv6
// subnets.
func (pc *portConf) onLink6(a []byte) bool {
	if a[0] == 0xfe && a[1]&0xc0 == 0x80 {
		return true
	}
	ad := netip.AddrFrom16([16]byte(a))
	for _, p := range pc.v6 {
		if p.Contains(ad) {
			return true
		}
	}
	return false
}
