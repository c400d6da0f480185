package fwd

import (
	"encoding/binary"
	"math/bits"
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
// group's list (else the VPN's), a port's by its port's; an uplink's
// ([[vpn.client]]) are not filtered.

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
	w.aclCache.Reset(a.Rules)
	n := a.Rules.NumRules()
	w.aclHits = make([]uint64, n)
	w.aclDirty = make([]uint64, (n+63)/64)
	w.aclPub.Store(&aclCounters{rules: a.Rules, hits: make([]atomic.Uint64, n)})
}

// publishACL publishes the counters this poll changed (a poll touches
// few rules; publishing all would cost every poll the rules' number).
func (w *Worker) publishACL() {
	c := w.aclPub.Load()
	if c == nil || c.rules != w.aclRules {
		return
	}
	for j, m := range w.aclDirty {
		if m == 0 {
			continue
		}
		w.aclDirty[j] = 0
		for ; m != 0; m &= m - 1 {
			i := j*64 + bits.TrailingZeros64(m)
			c.hits[i].Store(w.aclHits[i])
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
	} else if how&rInner == 0 && int(p.InPort) < len(a.Ports) {
		// rInner without rFromPeer: from a site-to-site uplink, whose
		// packets carry port 0 as InPort but never entered by it.
		li = a.Ports[p.InPort]
	}
	if li < 0 {
		return true
	}
	act, id := aclMatch(&w.aclCache, int(li), p)
	w.aclHits[id]++
	w.aclDirty[id>>6] |= 1 << (id & 63)
	switch act {
	case acl.Allow:
		return true
	case acl.Reject:
		w.icmpError(t, p, errAdminProhibited, 0, how)
	}
	w.drop(p, DropACL)
	return false
}

// aclMatch matches parsed packet p against list li (through the
// worker's cache of recent decisions). An IPv6 packet whose
// transport header Parse did not reach (a later fragment, an unknown
// upper layer after extension headers) is matched by its first next
// header.
func aclMatch(r *acl.Cache, li int, p *Packet) (acl.Action, int) {
	d := p.Data()
	l3 := d[p.L3Off:]
	v4 := p.Flags&FlagIPv4 != 0
	proto := l3[6]
	if v4 {
		proto = l3[9]
	}
	var sport, dport uint16
	var flags uint8
	l4 := p.L4Off != 0
	if l4 {
		t := d[p.L4Off:]
		switch {
		case p.Flags&FlagTCP != 0:
			proto, sport, dport, flags = protoTCP, binary.BigEndian.Uint16(t), binary.BigEndian.Uint16(t[2:]), t[13]&0x3f
		case p.Flags&FlagUDP != 0:
			proto, sport, dport = protoUDP, binary.BigEndian.Uint16(t), binary.BigEndian.Uint16(t[2:])
		case p.Flags&FlagICMP != 0:
			proto, dport = protoICMP, uint16(t[0])
			if !v4 {
				proto = protoICMPv6
			}
		default:
			l4 = false
		}
	}
	if v4 {
		return r.Match4(li, binary.BigEndian.Uint32(l3[12:16]), binary.BigEndian.Uint32(l3[16:20]), proto, l4, sport, dport, flags)
	}
	return r.Match6(li, (*[16]byte)(l3[8:24]), (*[16]byte)(l3[24:40]), proto, l4, sport, dport, flags)
}
