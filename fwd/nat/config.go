package nat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Rule says which packets are translated: those from one of Sources
// leaving through egress port Port get a source of one of Outside (ports
// PortLo..PortHi).
type Rule struct {
	Name    string
	Sources []netip.Prefix
	Port    int
	Outside []netip.Addr // IPv4
	PortLo  uint16
	PortHi  uint16
}

// Timeouts are the idle times after which a session ends.
type Timeouts struct {
	TCPEstablished time.Duration // RFC 5382 REQ-5: at least 2 h 4 min
	TCPTransitory  time.Duration // before both SYNs, after both FINs or an RST: at least 4 min
	UDP            time.Duration // RFC 4787 REQ-5: at least 2 min
	ICMP           time.Duration // RFC 5508 REQ-1: 60 s
}

// Config is the NAT of one engine; Tables read it, never change it.
type Config struct {
	Rules []Rule
	// MaxSessions bounds the sessions of all workers together (each gets
	// an equal share); a session over it is refused and counted.
	MaxSessions int
	// BlockSize is the number of outside ports in a client's port block;
	// a client holds up to MaxBlocks blocks.
	BlockSize int
	MaxBlocks int
	// MaxSessionsPerClient bounds one inside address's sessions (of one
	// rule), MaxSessionsPerMapping one inside endpoint's (each remote it
	// talks to, or, with endpoint-independent filtering, that reaches it,
	// is a session): one client, or outside sources spraying a mapping,
	// cannot take the table from the others. A session over either is
	// refused and counted (client_limit); existing ones are undisturbed.
	MaxSessionsPerClient  int
	MaxSessionsPerMapping int
	Timeouts              Timeouts
	// EndpointIndependentFiltering lets any remote endpoint reach a mapping
	// (RFC 4787 REQ-8's application-transparent choice); by default only
	// remotes the inside endpoint sent to may (address and port dependent).
	EndpointIndependentFiltering bool
	// Exclude is an outside port never mapped (the VPN's own UDP port on the
	// same address); 0 for none.
	Exclude uint16
}

// Defaults.
const (
	DefaultMaxSessions = 1 << 20
	DefaultBlockSize   = 256
	DefaultMaxBlocks   = 8
	// A busy desktop holds a few hundred to a few thousand flows; a
	// peer-to-peer client more. 8192 a client is under 1 % of the
	// default table, so 128 such clients are needed to fill it.
	DefaultMaxSessionsPerClient  = 8192
	DefaultMaxSessionsPerMapping = 1024
	DefaultPortLo                = 1024
	DefaultPortHi                = 32767
	maxBlocksCap                 = 64
	maxRules                     = 255
)

// DefaultTimeouts are the RFC minimums (RFC 4787 recommends 5 min for UDP;
// 2 min is its floor and what Linux's conntrack uses for a stream).
var DefaultTimeouts = Timeouts{
	TCPEstablished: 2*time.Hour + 4*time.Minute,
	TCPTransitory:  4 * time.Minute,
	UDP:            2 * time.Minute,
	ICMP:           60 * time.Second,
}

func (c *Config) setDefaults() {
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.MaxBlocks == 0 {
		c.MaxBlocks = DefaultMaxBlocks
	}
	if c.MaxSessionsPerClient == 0 {
		c.MaxSessionsPerClient = DefaultMaxSessionsPerClient
	}
	if c.MaxSessionsPerMapping == 0 {
		c.MaxSessionsPerMapping = DefaultMaxSessionsPerMapping
	}
	d := &c.Timeouts
	for _, f := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&d.TCPEstablished, DefaultTimeouts.TCPEstablished}, {&d.TCPTransitory, DefaultTimeouts.TCPTransitory},
		{&d.UDP, DefaultTimeouts.UDP}, {&d.ICMP, DefaultTimeouts.ICMP}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	for i := range c.Rules {
		if c.Rules[i].PortLo == 0 && c.Rules[i].PortHi == 0 {
			c.Rules[i].PortLo, c.Rules[i].PortHi = DefaultPortLo, DefaultPortHi
		}
	}
}

// outside is one outside address of a rule.
type outside struct {
	addr   uint32
	rule   uint8
	port   int
	lo, hi uint16
	blocks int // port blocks in lo..hi
}

// Compiled is a checked Config with its lookup arrays, ready to publish to
// Tables; immutable.
type Compiled struct {
	cfg     Config
	timeout [4]uint32 // seconds: tcp established, tcp transitory, udp, icmp
	rules   []crule
	out     []outside
	srcs    []pfx4 // every rule's source prefixes: Prefetch's test
	// lone[i]: rule i's egress port when no earlier rule of that port
	// has a source prefix that overlaps one of rule i's, else -1: for a
	// source rule i covers, match is i exactly when the port is lone[i]
	// (the fast path's test, without the rule scan). A rule without one
	// (overlapping prefixes on one port, first match wins) is left to
	// the general path.
	lone [maxRules]int32
}

type crule struct {
	pfx   []pfx4
	port  int
	first int // index of the rule's first outside address in Compiled.out
	n     int
}

type pfx4 struct{ addr, mask uint32 }

// Compile checks c, fills its defaults and builds what the workers read.
// workers is the engine's worker count (it partitions the port blocks).
func Compile(c Config) (*Compiled, error) {
	c.Rules = slices.Clone(c.Rules)
	c.setDefaults()
	if len(c.Rules) > maxRules {
		return nil, fmt.Errorf("nat: %d rules, at most %d", len(c.Rules), maxRules)
	}
	if c.MaxSessions < 1 || c.MaxSessions > 1<<28 {
		return nil, fmt.Errorf("nat: max sessions %d out of range 1..%d", c.MaxSessions, 1<<28)
	}
	if c.BlockSize < 1 || c.BlockSize > 65536 {
		return nil, fmt.Errorf("nat: block size %d out of range 1..65536", c.BlockSize)
	}
	if c.MaxBlocks < 1 || c.MaxBlocks > maxBlocksCap {
		return nil, fmt.Errorf("nat: max blocks %d out of range 1..%d", c.MaxBlocks, maxBlocksCap)
	}
	t := c.Timeouts
	if t.TCPEstablished < time.Second || t.TCPTransitory < time.Second || t.UDP < time.Second || t.ICMP < time.Second {
		return nil, errors.New("nat: timeouts must be at least 1 s")
	}
	k := &Compiled{cfg: c}
	k.timeout = [4]uint32{secs(t.TCPEstablished), secs(t.TCPTransitory), secs(t.UDP), secs(t.ICMP)}
	seen := map[uint32]bool{}
	for i, r := range c.Rules {
		if len(r.Sources) == 0 {
			return nil, fmt.Errorf("nat: rule %d: no source prefixes", i)
		}
		if len(r.Outside) == 0 {
			return nil, fmt.Errorf("nat: rule %d: no outside addresses", i)
		}
		if r.PortLo == 0 || r.PortLo > r.PortHi {
			return nil, fmt.Errorf("nat: rule %d: bad port range %d-%d", i, r.PortLo, r.PortHi)
		}
		cr := crule{port: r.Port, first: len(k.out), n: len(r.Outside)}
		for _, p := range r.Sources {
			if !p.Addr().Is4() {
				return nil, fmt.Errorf("nat: rule %d: source %v is not IPv4", i, p)
			}
			m := uint32(0)
			if p.Bits() > 0 {
				m = ^uint32(0) << (32 - p.Bits())
			}
			cr.pfx = append(cr.pfx, pfx4{binary.BigEndian.Uint32(p.Masked().Addr().AsSlice()), m})
		}
		for _, a := range r.Outside {
			if !a.Is4() {
				return nil, fmt.Errorf("nat: rule %d: outside address %v is not IPv4", i, a)
			}
			v := binary.BigEndian.Uint32(a.AsSlice())
			if seen[v] {
				return nil, fmt.Errorf("nat: outside address %v in two rules (or twice)", a)
			}
			seen[v] = true
			n := int(r.PortHi) - int(r.PortLo) + 1
			k.out = append(k.out, outside{addr: v, rule: uint8(i), port: r.Port, lo: r.PortLo, hi: r.PortHi,
				blocks: (n + c.BlockSize - 1) / c.BlockSize})
		}
		k.lone[i] = int32(r.Port)
		for j := range k.rules {
			if k.rules[j].port == r.Port && overlap(k.rules[j].pfx, cr.pfx) {
				k.lone[i] = -1
			}
		}
		k.rules = append(k.rules, cr)
		k.srcs = append(k.srcs, cr.pfx...)
	}
	return k, nil
}

func secs(d time.Duration) uint32 { return uint32(max(d/time.Second, 1)) }

// sameRule reports whether rule i of a and rule j of b translate alike, so
// that the sessions of a's rule i stay valid under b.
func sameRule(a *Compiled, i int, b *Compiled, j int) bool {
	ra, rb := &a.cfg.Rules[i], &b.cfg.Rules[j]
	return ra.Port == rb.Port && ra.PortLo == rb.PortLo && ra.PortHi == rb.PortHi &&
		slices.Equal(ra.Sources, rb.Sources) && slices.Equal(ra.Outside, rb.Outside) &&
		a.cfg.BlockSize == b.cfg.BlockSize && a.cfg.Exclude == b.cfg.Exclude
}

// match returns the rule translating source src out of port, or -1.
func (k *Compiled) match(src uint32, port int) int {
	for i := range k.rules {
		r := &k.rules[i]
		if r.port != port {
			continue
		}
		for _, p := range r.pfx {
			if src&p.mask == p.addr {
				return i
			}
		}
	}
	return -1
}

// overlap reports whether an address is in one of a and one of b.
func overlap(a, b []pfx4) bool {
	for _, p := range a {
		for _, q := range b {
			if m := p.mask & q.mask; p.addr&m == q.addr&m {
				return true
			}
		}
	}
	return false
}

// outsideIndex returns the index of outside address a, or -1.
func (k *Compiled) outsideIndex(a uint32) int {
	for i := range k.out {
		if k.out[i].addr == a {
			return i
		}
	}
	return -1
}

// Outside reports whether a is one of c's outside addresses, and the
// egress port of its rule.
func (k *Compiled) Outside(a [4]byte) (port int, ok bool) {
	if i := k.outsideIndex(binary.BigEndian.Uint32(a[:])); i >= 0 {
		return k.out[i].port, true
	}
	return 0, false
}

// Config returns the configuration with its defaults filled in.
func (k *Compiled) Config() Config { return k.cfg }

// le loads and stores in wire order (see wireKey): one instruction each,
// called directly (a wrapper's extra inlining level costs the fast path
// a marker NOP per call).
var le = binary.LittleEndian
