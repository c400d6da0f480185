package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/ovfwd/ovfwd/fwd"
)

// FastSync writes engine views (fwd.Engine.FastView) into a FastPath,
// changing only what changed: next hops first, then routes, then the next
// hops no route names any more. The control plane calls Apply where it
// publishes the engine's tables (and on a short tick for neighbour ageing).
type FastSync struct {
	fp      *FastPath
	ifindex []int // engine port -> egress ifindex; 0: not a fast-path egress
	routes  map[netip.Prefix]uint32
	nhs     map[fastNHKey]uint32
	free    []uint32
	next    uint32
	macs    map[[fastMACKeySize]byte][fastMACSize]byte // what ApplyBridge wrote
	own     map[netip.Addr]bool                        // the engine's addresses in own4/own6
	ownLast [256]byte                                  // what own holds
}

type fastNHKey struct {
	ifindex, mtu int
	dst, src     [6]byte
}

// NewFastSync mirrors into fp; ifindex[i] is engine port i's device (0
// for a port the fast path must not send to: not AF_XDP, a veth, …).
func NewFastSync(fp *FastPath, ifindex []int) (*FastSync, error) {
	s := &FastSync{fp: fp, ifindex: append([]int(nil), ifindex...), routes: map[netip.Prefix]uint32{},
		nhs: map[fastNHKey]uint32{}, next: 1, own: map[netip.Addr]bool{}}
	return s, errors.Join(fp.SetNextHop(0, FastNextHop{}), fp.own.Put(uint32(0), s.ownLast[:]))
}

// SetTarget changes engine port i's redirect target (0: none, e.g. while
// its link is down); the next Apply takes it into account.
func (s *FastSync) SetTarget(i, ifindex int) {
	if i >= 0 && i < len(s.ifindex) {
		s.ifindex[i] = ifindex
	}
}

// Apply makes the fast path forward exactly what v says it may.
func (s *FastSync) Apply(v fwd.FastView) error {
	want := make(map[netip.Prefix]fastNHKey, len(v.Routes))
	for _, r := range v.Routes {
		var k fastNHKey
		if !r.Punt && r.Port < len(s.ifindex) && s.ifindex[r.Port] != 0 && r.Port < len(v.Ports) &&
			!v.Ports[r.Port].Tagged && !v.Ports[r.Port].NAT && len(r.MAC) == 6 && len(v.Ports[r.Port].MAC) == 6 {
			k = fastNHKey{ifindex: s.ifindex[r.Port], mtu: v.Ports[r.Port].MTU,
				dst: [6]byte(r.MAC), src: [6]byte(v.Ports[r.Port].MAC)}
		}
		want[r.Prefix] = k
	}
	var errs []error
	used := map[uint32]bool{0: true}
	ids := make(map[netip.Prefix]uint32, len(want))
	for p, k := range want {
		if k == (fastNHKey{}) {
			ids[p] = 0
			continue
		}
		id, ok := s.nhs[k]
		if !ok {
			if n := len(s.free); n > 0 {
				id, s.free = s.free[n-1], s.free[:n-1]
			} else if s.next < maxFastNextHops {
				id = s.next
				s.next++
			} else {
				ids[p] = 0 // out of next hops: the engine forwards it
				continue
			}
			if err := s.fp.SetNextHop(id, FastNextHop{Ifindex: k.ifindex, MTU: k.mtu, Dst: k.dst[:], Src: k.src[:]}); err != nil {
				errs = append(errs, err)
				s.free = append(s.free, id)
				ids[p] = 0
				continue
			}
			s.nhs[k] = id
		}
		used[id] = true
		ids[p] = id
	}
	for p, id := range ids {
		if old, ok := s.routes[p]; ok && old == id {
			continue
		}
		if err := s.fp.SetRoute(p, id); err != nil {
			errs = append(errs, err)
			continue
		}
		s.routes[p] = id
	}
	for p := range s.routes {
		if _, ok := ids[p]; !ok {
			if err := s.fp.DeleteRoute(p); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(s.routes, p)
		}
	}
	for k, id := range s.nhs {
		if !used[id] {
			errs = append(errs, s.fp.SetNextHop(id, FastNextHop{}))
			delete(s.nhs, k)
			s.free = append(s.free, id)
		}
	}
	return errors.Join(append(errs, s.applyOwn(v.Routes))...)
}

// applyOwn writes the engine's own addresses (its Local host routes) for
// the program's martian test: a source that is one of them is a martian,
// and so is a link-local end unless the destination is one of them.
func (s *FastSync) applyOwn(routes []fwd.FastRoute) error {
	want := map[netip.Addr]bool{}
	var last [256]byte
	for _, r := range routes {
		if r.Local && r.Prefix.IsSingleIP() {
			a := r.Prefix.Addr()
			want[a] = true
			if a.Is4() {
				last[a.As4()[3]] = 1
			}
		}
	}
	var errs []error
	for a := range want {
		if !s.own[a] {
			if err := s.ownMap(a).Put(a.AsSlice(), uint32(1)); err != nil {
				errs = append(errs, fmt.Errorf("afxdp: fast path: own address %v: %w", a, err))
				continue
			}
			s.own[a] = true
		}
	}
	for a := range s.own {
		if !want[a] {
			if err := s.ownMap(a).Delete(a.AsSlice()); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, err)
				continue
			}
			delete(s.own, a)
		}
	}
	if last != s.ownLast {
		if err := s.fp.own.Put(uint32(0), last[:]); err != nil {
			return errors.Join(append(errs, err)...)
		}
		s.ownLast = last
	}
	return errors.Join(errs...)
}

func (s *FastSync) ownMap(a netip.Addr) *ebpf.Map {
	if a.Is4() {
		return s.fp.own4
	}
	return s.fp.own6
}

// ApplyBridge makes the bridge fast path forward exactly to the MACs v
// lists (bridge mode): each is a redirect to its port when that port is a
// redirect target and sends the VLAN untagged; otherwise the entry still
// tells the program where the MAC was learned (its frames count as known
// sources) and punts frames to it.
func (s *FastSync) ApplyBridge(v fwd.FastBridgeView) error {
	want := make(map[[fastMACKeySize]byte][fastMACSize]byte, len(v.MACs))
	for _, m := range v.MACs {
		if m.Port < 0 || m.Port >= len(v.Ports) {
			continue
		}
		var k [fastMACKeySize]byte
		var val [fastMACSize]byte
		copy(k[:], m.MAC[:])
		binary.NativeEndian.PutUint16(k[6:], m.VLAN)
		pc := v.Ports[m.Port]
		if m.Port < len(s.ifindex) && s.ifindex[m.Port] != 0 && pc.PVID == m.VLAN {
			binary.NativeEndian.PutUint32(val[0:], uint32(s.ifindex[m.Port]))
			binary.NativeEndian.PutUint32(val[4:], uint32(pc.MTU))
		}
		binary.NativeEndian.PutUint32(val[8:], uint32(m.Port))
		want[k] = val
	}
	if s.macs == nil {
		s.macs = map[[fastMACKeySize]byte][fastMACSize]byte{}
	}
	var errs []error
	for k, val := range want {
		if old, ok := s.macs[k]; ok && old == val {
			continue
		}
		if err := s.fp.macs.Put(k[:], val[:]); err != nil {
			errs = append(errs, err) // e.g. the map is full: the engine forwards to it
			continue
		}
		s.macs[k] = val
	}
	for k := range s.macs {
		if _, ok := want[k]; !ok {
			if err := s.fp.macs.Delete(k[:]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, err)
				continue
			}
			delete(s.macs, k)
		}
	}
	return errors.Join(errs...)
}
