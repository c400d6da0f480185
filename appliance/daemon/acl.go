package daemon

import (
	"fmt"
	"strings"
	"sync"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/acl"
)

// aclState is the control plane's side of the access lists: the compiled
// rules and, for tunnel peers, which group each belongs to. Every change
// (a reload, a client connecting or leaving) publishes a new fwd.ACL,
// which the workers take at their next poll.
type aclState struct {
	mu    sync.Mutex
	lists []config.ACL
	rules *acl.Rules
	// ports, vpn, groups: fwd.ACL's Ports, VPN and Groups; groupNum
	// numbers the groups that have a list.
	ports    []int16
	vpn      int16
	groups   []int16
	groupNum map[string]int
	// cnGroup: a common name's group ([[acl_group]], [[vpn.ccd]] group).
	cnGroup map[string]string
	// peers: the connected peers' common names and the groups their
	// authentication command named.
	peers map[uint32]aclMember
}

type aclMember struct{ cn, group string }

// groupOf is a peer's group: the authentication command's, else its
// common name's.
func (s *aclState) groupOf(m aclMember) string {
	if m.group != "" {
		return m.group
	}
	return s.cnGroup[m.cn]
}

// aclCompile turns cfg's [[acl]] into a state ready to publish; nil
// without lists.
func aclCompile(cfg *config.Config, portIndex func(string) (int, bool), nports int) (*aclState, error) {
	if len(cfg.ACL) == 0 {
		return nil, nil
	}
	s := &aclState{lists: cfg.ACL, ports: make([]int16, nports), vpn: -1, groupNum: map[string]int{},
		cnGroup: map[string]string{}, peers: map[uint32]aclMember{}}
	for i := range s.ports {
		s.ports[i] = -1
	}
	var lists []acl.List
	for li, l := range cfg.ACL {
		al := acl.List{Name: l.Name, Default: aclAction(l.Default)}
		for _, r := range l.Rules {
			ar, err := aclRule(r)
			if err != nil {
				return nil, fmt.Errorf("acl %s: %w", l.Name, err)
			}
			al.Rules = append(al.Rules, ar)
		}
		lists = append(lists, al)
		for _, in := range l.Ingress {
			switch {
			case in == config.IngressVPN:
				s.vpn = int16(li)
			case strings.HasPrefix(in, config.IngressPort):
				pi, ok := portIndex(strings.TrimPrefix(in, config.IngressPort))
				if !ok {
					return nil, fmt.Errorf("acl %s: %s is not running (ports change only at restart)", l.Name, in)
				}
				s.ports[pi] = int16(li)
			case strings.HasPrefix(in, config.IngressGroup):
				s.groupNum[strings.TrimPrefix(in, config.IngressGroup)] = len(s.groups)
				s.groups = append(s.groups, int16(li))
			}
		}
	}
	s.rules = acl.Compile(lists)
	for _, g := range cfg.ACLGroups {
		for _, cn := range g.CommonNames {
			s.cnGroup[cn] = g.Name
		}
	}
	for _, c := range cfg.VPN.CCD {
		if c.Group != "" {
			s.cnGroup[c.CommonName] = c.Group
		}
	}
	return s, nil
}

func aclAction(s string) acl.Action {
	switch s {
	case config.ACLAllow:
		return acl.Allow
	case config.ACLReject:
		return acl.Reject
	}
	return acl.Deny
}

func aclRule(r config.ACLRule) (acl.Rule, error) {
	protos, ok := config.ParseACLProto(r.Proto)
	if !ok {
		return acl.Rule{}, fmt.Errorf("rule %s: protocol %q", r.Name, r.Proto)
	}
	ar := acl.Rule{Name: r.Name, Src: r.Src, Dst: r.Dst, Protos: protos, Action: aclAction(r.Action)}
	for _, p := range r.SrcPorts {
		ar.SrcPorts = append(ar.SrcPorts, acl.PortRange{Lo: uint16(p.Lo), Hi: uint16(p.Hi)})
	}
	for _, p := range r.DstPorts {
		ar.DstPorts = append(ar.DstPorts, acl.PortRange{Lo: uint16(p.Lo), Hi: uint16(p.Hi)})
	}
	for _, t := range r.ICMPTypes {
		ar.ICMPTypes = append(ar.ICMPTypes, acl.PortRange{Lo: uint16(t), Hi: uint16(t)})
	}
	switch r.TCPFlags {
	case config.TCPFlagsEstablished:
		ar.FlagsAny = acl.Established
	case config.TCPFlagsSYN:
		ar.FlagsMask, ar.FlagsValue = acl.TCPSyn|acl.TCPAck, acl.TCPSyn
	}
	return ar, nil
}

// applyACL publishes cfg's access lists (none: filtering off), with the
// connected peers placed in the new groups.
func (d *daemon) applyACL(cfg *config.Config) error {
	s, err := aclCompile(cfg, d.portIndex, len(d.ports))
	if err != nil {
		return err
	}
	d.aclMu.Lock()
	defer d.aclMu.Unlock()
	d.acl = s
	if s == nil {
		d.engine.SetACL(nil)
		return nil
	}
	if d.vpn != nil {
		d.vpn.mu.Lock()
		for id, p := range d.vpn.peers {
			s.peers[id] = aclMember{p.CommonName, p.Group}
		}
		d.vpn.mu.Unlock()
	}
	d.publishACL()
	return nil
}

// aclPeer records a peer's arrival (up: with its common name and the
// group its authentication command named) or departure, and publishes
// its group.
func (d *daemon) aclPeer(id uint32, m aclMember, up bool) {
	d.aclMu.Lock()
	defer d.aclMu.Unlock()
	if d.acl == nil {
		return
	}
	if up {
		d.acl.peers[id] = m
	} else {
		delete(d.acl.peers, id)
	}
	d.publishACL()
}

// publishACL publishes the engine's ACL (aclMu held).
func (d *daemon) publishACL() { d.engine.SetACL(d.acl.engineACL()) }

// engineACL is s as the engine takes it, the peers placed in their groups.
func (s *aclState) engineACL() *fwd.ACL {
	n := uint32(0)
	for id := range s.peers {
		n = max(n, id+1)
	}
	pg := make([]uint16, n)
	for id, m := range s.peers {
		if g, ok := s.groupNum[s.groupOf(m)]; ok {
			pg[id] = uint16(g + 1)
		}
	}
	return &fwd.ACL{Rules: s.rules, Ports: s.ports, VPN: s.vpn, Groups: s.groups, PeerGroup: pg}
}

// aclSnapshot is the lists' counters for status and metrics.
func (d *daemon) aclSnapshot() []status.ACL {
	d.aclMu.Lock()
	s := d.acl
	d.aclMu.Unlock()
	if s == nil {
		return nil
	}
	counts := d.engine.ACLCounters(s.rules)
	var out []status.ACL
	for li, l := range s.lists {
		sl := status.ACL{Name: l.Name, Ingress: l.Ingress, Default: l.Default}
		first, n := s.rules.ListRules(li)
		for i := first; i < first+n; i++ {
			info := s.rules.Info(i)
			var c uint64
			if i < len(counts) {
				c = counts[i]
			}
			if info.Default {
				sl.DefaultPackets = c
				continue
			}
			name := info.Name
			if name == "" {
				name = fmt.Sprintf("rule%d", info.Index)
			}
			sl.Rules = append(sl.Rules, status.ACLRule{Name: name, Action: info.Action.String(), Packets: c})
		}
		out = append(out, sl)
	}
	return out
}

// aclGroupOf is the group peer id is filtered as ("" none), for status.
func (d *daemon) aclGroupOf(id uint32) string {
	d.aclMu.Lock()
	defer d.aclMu.Unlock()
	if d.acl == nil {
		return ""
	}
	m, ok := d.acl.peers[id]
	if !ok {
		return ""
	}
	return d.acl.groupOf(m)
}

// fastACL keeps the XDP fast path off the ports an [[acl]] filters: the
// fast path does not match rules, so their traffic goes to the workers.
// It runs in syncFast, on the control loop, which owns the fast path's
// state; a port that gains a list at a reload leaves the fast path at the
// loop's next tick, one that loses it returns to it.
func (d *daemon) fastACL() {
	f := d.fast
	if f.aclOff == nil {
		f.aclOff = make([]bool, len(d.ports))
	}
	d.aclMu.Lock()
	var filtered []int16
	if d.acl != nil {
		filtered = d.acl.ports
	}
	d.aclMu.Unlock()
	for i, pt := range d.ports {
		want := i < len(filtered) && filtered[i] >= 0
		switch {
		case want && f.on[i]:
			if err := pt.xdp.SetFast(false, f.clamp != 0); err != nil {
				d.log.Error("xdp fast path: off for an [[acl]]", "port", pt.cfg.Name, "err", err)
				continue
			}
			f.on[i], f.aclOff[i] = false, true
			d.log.Info("xdp fast path", "port", pt.cfg.Name, "on", false, "why", "an [[acl]] filters the port's traffic (the workers match rules)")
		case !want && f.aclOff[i]:
			if err := pt.xdp.SetFast(true, f.clamp != 0); err != nil {
				d.log.Error("xdp fast path: back on", "port", pt.cfg.Name, "err", err)
				continue
			}
			f.on[i], f.aclOff[i] = true, false
			d.log.Info("xdp fast path", "port", pt.cfg.Name, "on", true, "why", "no [[acl]] filters the port any more")
		}
	}
}
