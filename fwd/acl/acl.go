// Package acl compiles access rule lists and matches packets against
// them: the data plane's filter for traffic the host's netfilter never
// sees (fwd's ACL stage calls it).
//
// The model is stateless: a list filters the packets entering by its
// ingress (a port, the VPN, a client group); return traffic is allowed
// by TCP flags (Established) or by explicit rules. docs/acl.md says why.
//
// Matching is a bit-vector intersection (Lakshman and Stiliadis,
// "High-speed policy-based packet forwarding using efficient
// multi-dimensional range matching", SIGCOMM 1998): each field's value
// space is cut into the elementary intervals the rules' bounds make; each
// interval carries the set of rules that accept it. A packet costs one
// binary search per field and an AND of the sets; the first rule left is
// the match. Nothing is allocated per packet.
package acl

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
)

// Action is what a rule, or a list's default, does with a packet.
type Action uint8

const (
	Allow  Action = iota
	Deny          // dropped silently
	Reject        // dropped, with ICMP administratively prohibited (rate-limited)
)

func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return "reject"
}

// TCP flag bits as in the TCP header (RFC 9293 §3.1).
const (
	TCPFin = 1 << iota
	TCPSyn
	TCPRst
	TCPPsh
	TCPAck
	TCPUrg
)

// Established is the TCP flag test of a packet of a connection already
// set up (ACK or RST set), as iptables' and Cisco's `established`.
const Established = TCPAck | TCPRst

// PortRange is an inclusive range of port numbers (or ICMP types).
type PortRange struct{ Lo, Hi uint16 }

// Rule is one rule of a list. An empty field matches anything.
type Rule struct {
	Name     string         // for counters; may be empty
	Src, Dst []netip.Prefix // either family; a rule with only IPv4 prefixes never matches IPv6
	Protos   []uint8        // IP protocol numbers (IPv6: the upper-layer one)
	SrcPorts []PortRange    // TCP/UDP only
	DstPorts []PortRange    // TCP/UDP only
	// ICMPTypes: ICMP or ICMPv6 types (Protos must be ICMP ones).
	ICMPTypes []PortRange
	// TCP flags: matches when flags&FlagsMask == FlagsValue and, when
	// FlagsAny is not 0, flags&FlagsAny != 0 (Established sets FlagsAny).
	FlagsMask, FlagsValue, FlagsAny uint8
	Action                          Action
}

func (r *Rule) hasL4() bool {
	return len(r.SrcPorts)+len(r.DstPorts)+len(r.ICMPTypes) > 0 || r.hasFlags()
}

func (r *Rule) hasFlags() bool { return r.FlagsMask != 0 || r.FlagsAny != 0 }

// List is an ordered rule list with its default action.
type List struct {
	Name    string
	Default Action
	Rules   []Rule
}

// Key is what the matcher looks at in a packet.
type Key struct {
	V6       bool
	Src, Dst [16]byte // IPv4: the address in the first 4 bytes
	Proto    uint8
	// HasL4: ports (TCP/UDP), type (ICMP) and flags (TCP) are valid; not
	// for a later fragment or another protocol.
	HasL4        bool
	SPort, DPort uint16 // ICMP: DPort is the type
	Flags        uint8  // TCP
}

// Rules is a compiled set of lists, immutable once built.
type Rules struct {
	lists []compiled
	// names of every rule, indexed by global rule number; the rules of
	// list i are first[i] .. first[i]+len.
	info  []RuleInfo
	first []int
}

// RuleInfo describes a rule by its global number (what Match returns and
// counters are indexed by). A list's default has a number of its own,
// after its rules.
type RuleInfo struct {
	List    string
	Index   int // position in the list; -1 for the default
	Name    string
	Action  Action
	Default bool
}

// compiled is one list's matcher.
type compiled struct {
	w       int // bitset words per set
	def     Action
	defID   int32
	actions []Action
	// Per field: sorted interval starts (the first is 0) and, for
	// interval i, its rule set at sets[i*w:(i+1)*w].
	src4, dst4 dim32
	src6, dst6 dim128
	sport      dim32
	dport      dim32
	proto      []uint64 // 256 sets
	noL4       []uint64 // rules without a port, type or flag condition
	flagged    []uint64 // rules with a flag condition
	mask, val  []uint8
	any        []uint8
}

type dim32 struct {
	starts []uint32
	sets   []uint64
}

// dim128 keeps the starts' high and low words apart; hiOnly: every low
// word is 0 (no prefix longer than /64), the search reads only hi.
type dim128 struct {
	hi, lo []uint64
	hiOnly bool
	sets   []uint64
}

// Compile builds the matchers of lists.
func Compile(lists []List) *Rules {
	r := &Rules{}
	for _, l := range lists {
		r.first = append(r.first, len(r.info))
		for i, ru := range l.Rules {
			r.info = append(r.info, RuleInfo{List: l.Name, Index: i, Name: ru.Name, Action: ru.Action})
		}
		defID := len(r.info)
		r.info = append(r.info, RuleInfo{List: l.Name, Index: -1, Name: "default", Action: l.Default, Default: true})
		r.lists = append(r.lists, compileList(l, int32(defID)))
	}
	return r
}

// NumRules is the number of rule numbers (rules and defaults).
func (r *Rules) NumRules() int { return len(r.info) }

// Info describes rule number id.
func (r *Rules) Info(id int) RuleInfo { return r.info[id] }

// ListRules is the range of rule numbers of list li (its default last).
func (r *Rules) ListRules(li int) (first, n int) {
	return r.first[li], len(r.lists[li].actions) + 1
}

// NumLists is the number of lists, numbered as given to Compile.
func (r *Rules) NumLists() int { return len(r.lists) }

func compileList(l List, defID int32) compiled {
	n := len(l.Rules)
	w := max(1, (n+63)/64)
	c := compiled{w: w, def: l.Default, defID: defID}
	c.actions = make([]Action, n)
	c.mask, c.val, c.any = make([]uint8, n), make([]uint8, n), make([]uint8, n)
	c.noL4, c.flagged = make([]uint64, w), make([]uint64, w)
	c.proto = make([]uint64, 256*w)
	for i := range l.Rules {
		ru := &l.Rules[i]
		c.actions[i] = ru.Action
		c.mask[i], c.val[i], c.any[i] = ru.FlagsMask, ru.FlagsValue, ru.FlagsAny
		if !ru.hasL4() {
			c.noL4[i/64] |= 1 << (i % 64)
		}
		if ru.hasFlags() {
			c.flagged[i/64] |= 1 << (i % 64)
		}
		for p := range 256 {
			if len(ru.Protos) == 0 || slices.Contains(ru.Protos, uint8(p)) {
				c.proto[p*w+i/64] |= 1 << (i % 64)
			}
		}
	}
	c.src4 = build32(l.Rules, w, 1<<32-1, func(ru *Rule) []rng32 { return addrRanges4(ru.Src) })
	c.dst4 = build32(l.Rules, w, 1<<32-1, func(ru *Rule) []rng32 { return addrRanges4(ru.Dst) })
	c.sport = build32(l.Rules, w, 0xffff, func(ru *Rule) []rng32 { return portRanges(ru.SrcPorts) })
	c.dport = build32(l.Rules, w, 0xffff, func(ru *Rule) []rng32 {
		if len(ru.ICMPTypes) > 0 {
			return portRanges(ru.ICMPTypes)
		}
		return portRanges(ru.DstPorts)
	})
	c.src6 = build128(l.Rules, w, func(ru *Rule) []rng128 { return addrRanges6(ru.Src) })
	c.dst6 = build128(l.Rules, w, func(ru *Rule) []rng128 { return addrRanges6(ru.Dst) })
	return c
}

type rng32 struct{ lo, hi uint32 }

type rng128 struct{ lo, hi [2]uint64 }

// addrRanges4 is the IPv4 part of ps as ranges; nil means any (ps
// empty), an empty non-nil slice none (only IPv6 prefixes).
func addrRanges4(ps []netip.Prefix) []rng32 {
	if len(ps) == 0 {
		return nil
	}
	out := []rng32{}
	for _, p := range ps {
		if !p.Addr().Is4() {
			continue
		}
		p = p.Masked()
		b := p.Addr().As4()
		lo := binary.BigEndian.Uint32(b[:])
		hi := lo | uint32(uint64(1)<<(32-p.Bits())-1)
		out = append(out, rng32{lo, hi})
	}
	return out
}

func addrRanges6(ps []netip.Prefix) []rng128 {
	if len(ps) == 0 {
		return nil
	}
	out := []rng128{}
	for _, p := range ps {
		if p.Addr().Is4() {
			continue
		}
		p = p.Masked()
		b := p.Addr().As16()
		lo := [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
		hi := lo
		if k := p.Bits(); k < 64 {
			hi[0] |= 1<<(64-k) - 1
			hi[1] = ^uint64(0)
		} else if k < 128 {
			hi[1] |= 1<<(128-k) - 1
		}
		out = append(out, rng128{lo, hi})
	}
	return out
}

func portRanges(rs []PortRange) []rng32 {
	if len(rs) == 0 {
		return nil
	}
	out := make([]rng32, 0, len(rs))
	for _, r := range rs {
		out = append(out, rng32{uint32(r.Lo), uint32(r.Hi)})
	}
	return out
}

// build32 cuts [0, top] at every bound of the rules' ranges and gives
// each piece the set of rules whose ranges (nil: any) contain it.
func build32(rules []Rule, w int, top uint32, of func(*Rule) []rng32) dim32 {
	starts := []uint32{0}
	per := make([][]rng32, len(rules))
	for i := range rules {
		per[i] = of(&rules[i])
		for _, r := range per[i] {
			starts = append(starts, r.lo)
			if r.hi < top {
				starts = append(starts, r.hi+1)
			}
		}
	}
	slices.Sort(starts)
	starts = slices.Compact(starts)
	d := dim32{starts: starts, sets: make([]uint64, len(starts)*w)}
	for k, s := range starts {
		for i := range rules {
			in := per[i] == nil
			for _, r := range per[i] {
				if r.lo <= s && s <= r.hi {
					in = true
					break
				}
			}
			if in {
				d.sets[k*w+i/64] |= 1 << (i % 64)
			}
		}
	}
	return d
}

func less128(a, b [2]uint64) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }

func inc128(a [2]uint64) ([2]uint64, bool) {
	a[1]++
	if a[1] == 0 {
		a[0]++
		if a[0] == 0 {
			return a, false
		}
	}
	return a, true
}

func build128(rules []Rule, w int, of func(*Rule) []rng128) dim128 {
	starts := [][2]uint64{{}}
	per := make([][]rng128, len(rules))
	for i := range rules {
		per[i] = of(&rules[i])
		for _, r := range per[i] {
			starts = append(starts, r.lo)
			if n, ok := inc128(r.hi); ok {
				starts = append(starts, n)
			}
		}
	}
	slices.SortFunc(starts, func(a, b [2]uint64) int {
		switch {
		case less128(a, b):
			return -1
		case less128(b, a):
			return 1
		}
		return 0
	})
	starts = slices.Compact(starts)
	d := dim128{sets: make([]uint64, len(starts)*w), hiOnly: true}
	for _, s := range starts {
		d.hi, d.lo = append(d.hi, s[0]), append(d.lo, s[1])
		d.hiOnly = d.hiOnly && s[1] == 0
	}
	for k, s := range starts {
		for i := range rules {
			in := per[i] == nil
			for _, r := range per[i] {
				if !less128(s, r.lo) && !less128(r.hi, s) {
					in = true
					break
				}
			}
			if in {
				d.sets[k*w+i/64] |= 1 << (i % 64)
			}
		}
	}
	return d
}

// find32 is the index of the last start <= v (starts[0] is 0). The
// loop has a fixed trip count for a list and its step compiles to a
// conditional move: no branch for the packet's value to mispredict.
func find32(starts []uint32, v uint32) int {
	base, n := 0, len(starts)
	for n > 1 {
		half := n >> 1
		if starts[base+half] <= v {
			base += half
		}
		n -= half
	}
	return base
}

func find64(starts []uint64, v uint64) int {
	base, n := 0, len(starts)
	for n > 1 {
		half := n >> 1
		if starts[base+half] <= v {
			base += half
		}
		n -= half
	}
	return base
}

func find128(d *dim128, hi, lo uint64) int {
	if d.hiOnly {
		return find64(d.hi, hi)
	}
	base, n := 0, len(d.hi)
	for n > 1 {
		half := n >> 1
		if h := d.hi[base+half]; h < hi || h == hi && d.lo[base+half] <= lo {
			base += half
		}
		n -= half
	}
	return base
}

// Match returns the action list li takes on k and the global number of
// the rule (or default) that decided it.
func (r *Rules) Match(li int, k *Key) (Action, int) {
	var sp, dp uint16
	var fl uint8
	if k.HasL4 {
		sp, dp, fl = k.SPort, k.DPort, k.Flags
	}
	if k.V6 {
		return r.Match6(li, &k.Src, &k.Dst, k.Proto, k.HasL4, sp, dp, fl)
	}
	return r.Match4(li, binary.BigEndian.Uint32(k.Src[:4]), binary.BigEndian.Uint32(k.Dst[:4]), k.Proto, k.HasL4, sp, dp, fl)
}

// Match4 is Match for an IPv4 packet, its fields as arguments (in
// registers: the data plane builds no Key).
func (r *Rules) Match4(li int, src, dst uint32, proto uint8, l4 bool, sport, dport uint16, flags uint8) (Action, int) {
	c := &r.lists[li]
	return c.decide(find32(c.src4.starts, src), find32(c.dst4.starts, dst), &c.src4.sets, &c.dst4.sets, proto, l4, sport, dport, flags)
}

// Match6 is Match for an IPv6 packet.
func (r *Rules) Match6(li int, src, dst *[16]byte, proto uint8, l4 bool, sport, dport uint16, flags uint8) (Action, int) {
	c := &r.lists[li]
	si := find128(&c.src6, binary.BigEndian.Uint64(src[:8]), binary.BigEndian.Uint64(src[8:]))
	di := find128(&c.dst6, binary.BigEndian.Uint64(dst[:8]), binary.BigEndian.Uint64(dst[8:]))
	return c.decide(si, di, &c.src6.sets, &c.dst6.sets, proto, l4, sport, dport, flags)
}

// decide intersects the address sets si of ss and di of ds with the
// protocol's and the ports' sets and returns the first rule left.
func (c *compiled) decide(si, di int, ss, ds *[]uint64, proto uint8, l4 bool, sport, dport uint16, flags uint8) (Action, int) {
	w := c.w
	spi, dpi := -1, -1
	if l4 {
		spi, dpi = find32(c.sport.starts, uint32(sport)), find32(c.dport.starts, uint32(dport))
	}
	base := int(c.defID) - len(c.actions)
	if w == 1 { // up to 64 rules: one word a set
		m := (*ss)[si] & (*ds)[di] & c.proto[proto]
		if l4 {
			m &= c.sport.sets[spi] & c.dport.sets[dpi]
		} else {
			m &= c.noL4[0]
		}
		for m != 0 {
			i := bits.TrailingZeros64(m)
			if c.flagged[0]&(1<<i) == 0 || c.flagsMatch(i, flags) {
				return c.actions[i], base + i
			}
			m &= m - 1
		}
		return c.def, int(c.defID)
	}
	s, d := (*ss)[si*w:si*w+w], (*ds)[di*w:di*w+w]
	pr := c.proto[int(proto)*w : int(proto)*w+w]
	sp, dp := c.noL4, c.noL4
	if l4 {
		sp, dp = c.sport.sets[spi*w:spi*w+w], c.dport.sets[dpi*w:dpi*w+w]
	}
	for j := range w {
		m := s[j] & d[j] & pr[j] & sp[j] & dp[j]
		for m != 0 {
			b := bits.TrailingZeros64(m)
			i := j*64 + b
			if c.flagged[j]&(1<<b) == 0 || c.flagsMatch(i, flags) {
				return c.actions[i], base + i
			}
			m &= m - 1
		}
	}
	return c.def, int(c.defID)
}

func (c *compiled) flagsMatch(i int, flags uint8) bool {
	return flags&c.mask[i] == c.val[i] && (c.any[i] == 0 || flags&c.any[i] != 0)
}
