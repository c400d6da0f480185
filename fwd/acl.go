package fwd

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/ovfwd/ovfwd/fwd/acl"
)

// The ACL stage (fwd/acl does the matching). forwardIP runs it for a
// packet about to be forwarded, after the FIB and before any ICMP error
// or header edit: a denied packet leaves no trace beyond its counter (and
// the ICMP a Reject rule asks for). Packets for the appliance itself and
// those it builds are not filtered. With no ACL set the stage costs
// forwardIP one nil test.
//
// A list applies by the packet's ingress: a tunnel peer's packets by its
// group's list (else the VPN's), anything else by its port's.

// ACL is the filter configuration the engine publishes to its workers:
// immutable once given to SetACL (build a new one to change it).
type ACL struct {
	Rules *acl.Rules
	// Ports[i] is the list for packets entering port i (-1: none).
	Ports []int16
	// VPN is the list for tunnel peers whose group has none (-1: none).
	VPN int16
	// Groups[g] is the list of group g (-1: the VPN's).
	Groups []int16
	// PeerGroup[peer] is the peer's group plus one (0: no group).
	PeerGroup []uint16
}

// SetACL publishes an ACL configuration to every worker (from its next
// poll); nil turns filtering off. Per-rule counters restart when the
// rules change and carry on when only PeerGroup does.
func (e *Engine) SetACL(a *ACL) { e.acl.Store(a) }

// ACLCounters returns the packets each rule number of a (as Match numbers
// them) decided, summed over the workers as of their last poll that used
// a's rules; nil until a worker has.
func (e *Engine) ACLCounters(r *acl.Rules) []uint64 {
	var out []uint64
	for _, w := range e.workers {
		c := w.aclPub.Load()
		if c == nil || c.rules != r {
			continue
		}
		if out == nil {
			out = make([]uint64, len(c.hits))
		}
		for i := range c.hits {
			out[i] += c.hits[i].Load()
		}
	}
	return out
}

// aclCounters are a worker's published counts for one compiled rule set.
type aclCounters struct {
	rules *acl.Rules
	hits  []atomic.Uint64
}

// refreshACL takes the engine's ACL for this poll; new rules get new
// counters (an allocation per reload, not per packet).
func (w *Worker) refreshACL() {
	a := w.e.acl.Load()
	w.acl = a
	if a == nil || w.aclRules == a.Rules {
		return
	}
	w.aclRules = a.Rules
	n := a.Rules.NumRules()
	w.aclHits = make([]uint64, n)
	w.aclPub.Store(&aclCounters{rules: a.Rules, hits: make([]atomic.Uint64, n)})
}

func (w *Worker) publishACL() {
	c := w.aclPub.Load()
	if c == nil || c.rules != w.aclRules {
		return
	}
	for i, v := range w.aclHits {
		if c.hits[i].Load() != v {
			c.hits[i].Store(v)
		}
	}
}

// aclPass reports whether the ACL lets p through; false when it was
// dropped.
func (w *Worker) aclPass(t *tables, p *Packet, how uint8) bool {
	a := w.acl
	li := int16(-1)
	if how&rFromPeer != 0 {
		li = a.VPN
		if int(p.Peer) < len(a.PeerGroup) {
			if g := int(a.PeerGroup[p.Peer]) - 1; g >= 0 && g < len(a.Groups) && a.Groups[g] >= 0 {
				li = a.Groups[g]
			}
		}
	} else if int(p.InPort) < len(a.Ports) {
		li = a.Ports[p.InPort]
	}
	if li < 0 {
		return true
	}
	k := &w.aclKey
	aclKeyOf(p, k)
	act, id := a.Rules.Match(int(li), k)
	w.aclHits[id]++
	switch act {
	case acl.Allow:
		return true
	case acl.Reject:
		w.icmpError(t, p, errAdminProhibited, 0, how)
	}
	w.drop(p, DropACL)
	return false
}

// aclKeyOf fills k from parsed packet p. An IPv6 packet whose transport
// header Parse did not reach (a later fragment, an unknown upper layer
// after extension headers) is matched by its first next header.
func aclKeyOf(p *Packet, k *acl.Key) {
	d := p.Data()
	l3 := d[p.L3Off:]
	k.V6 = p.Flags&FlagIPv4 == 0
	if k.V6 {
		k.Proto = l3[6]
		k.Src, k.Dst = [16]byte(l3[8:24]), [16]byte(l3[24:40])
	} else {
		k.Proto = l3[9]
		copy(k.Src[:4], l3[12:16])
		copy(k.Dst[:4], l3[16:20])
	}
	k.HasL4 = p.L4Off != 0
	k.SPort, k.DPort, k.Flags = 0, 0, 0
	if !k.HasL4 {
		return
	}
	l4 := d[p.L4Off:]
	switch {
	case p.Flags&FlagTCP != 0:
		k.Proto = protoTCP
		k.SPort, k.DPort = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
		k.Flags = l4[13] & 0x3f
	case p.Flags&FlagUDP != 0:
		k.Proto = protoUDP
		k.SPort, k.DPort = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
	case p.Flags&FlagICMP != 0:
		k.Proto = protoICMP
		if k.V6 {
			k.Proto = protoICMPv6
		}
		k.DPort = uint16(l4[0])
	default:
		k.HasL4 = false
	}
}
