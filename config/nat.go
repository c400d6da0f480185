package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// NAT is one [[nat]] rule: packets from Sources routed out of Port leave
// from one of Outside (the port's own IPv4 addresses when empty) and a port
// in PortLo..PortHi, and their answers are translated back.
type NAT struct {
	Name    string // for logs; default "nat<index>"
	Sources []netip.Prefix
	Port    string
	Outside []netip.Addr
	PortLo  int // default 1024
	PortHi  int // default 32767: below Linux's ephemeral ports, so the host's own connections keep working
}

// NATOptions is [nat_options]: what every [[nat]] rule shares.
type NATOptions struct {
	MaxSessions int // all workers together; default 1048576
	BlockSize   int // outside ports per client block; default 256
	MaxBlocks   int // blocks per client; default 8
	// Sessions one client (inside address) and one mapping (inside
	// endpoint) may hold; defaults 8192 and 1024.
	MaxSessionsPerClient  int
	MaxSessionsPerMapping int
	// Filtering is "endpoint-dependent" (default: only remotes the inside
	// endpoint sent to may answer) or "endpoint-independent" (RFC 4787
	// REQ-8: any remote may reach an existing mapping).
	Filtering      string
	TCPEstablished time.Duration // default 2h4m (RFC 5382 REQ-5)
	TCPTransitory  time.Duration // default 4m
	UDP            time.Duration // default 2m (RFC 4787 REQ-5)
	ICMP           time.Duration // default 60s (RFC 5508 REQ-1)
}

// Values of [nat_options] filtering.
const (
	FilteringEndpointDependent   = "endpoint-dependent"
	FilteringEndpointIndependent = "endpoint-independent"
)

// DefaultNATOptions are [nat_options]' defaults.
func DefaultNATOptions() NATOptions {
	return NATOptions{MaxSessions: 1 << 20, BlockSize: 256, MaxBlocks: 8, MaxSessionsPerClient: 8192, MaxSessionsPerMapping: 1024,
		Filtering:      FilteringEndpointDependent,
		TCPEstablished: 2*time.Hour + 4*time.Minute, TCPTransitory: 4 * time.Minute, UDP: 2 * time.Minute, ICMP: 60 * time.Second}
}

func (d *decoder) nat(t *table, n *NAT) {
	t.str("name", &n.Name)
	t.prefixes("sources", &n.Sources, false)
	t.str("port", &n.Port)
	t.addrs("outside", &n.Outside)
	var ports string
	if t.str("ports", &ports) {
		lo, hi, ok := parsePortRange(ports)
		if !ok {
			d.errorf(t.key("ports"), `write a range like "1024-32767" within 1-65535`, "bad port range %q", ports)
		} else {
			n.PortLo, n.PortHi = lo, hi
		}
	}
	t.done()
}

func parsePortRange(s string) (lo, hi int, ok bool) {
	a, b, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, false
	}
	return lo, hi, true
}

func (d *decoder) natOptions(t *table, o *NATOptions) {
	t.integer("max_sessions", &o.MaxSessions, 1, 1<<28)
	t.integer("block_size", &o.BlockSize, 1, 65536)
	t.integer("max_blocks", &o.MaxBlocks, 1, 64)
	t.integer("max_sessions_per_client", &o.MaxSessionsPerClient, 1, 1<<28)
	t.integer("max_sessions_per_mapping", &o.MaxSessionsPerMapping, 1, 1<<28)
	t.enum("filtering", &o.Filtering, FilteringEndpointDependent, FilteringEndpointIndependent)
	t.duration("tcp_established_timeout", &o.TCPEstablished, time.Second, 24*time.Hour)
	t.duration("tcp_transitory_timeout", &o.TCPTransitory, time.Second, 24*time.Hour)
	t.duration("udp_timeout", &o.UDP, time.Second, 24*time.Hour)
	t.duration("icmp_timeout", &o.ICMP, time.Second, 24*time.Hour)
	t.done()
}

func natKey(i int, k string) string { return joinPath(indexPath("nat", i), k) }

// validateNAT checks the rules against the ports and each other.
func (d *decoder) validateNAT(c *Config) {
	if len(c.NAT) > 0 && c.Appliance.Mode == ModeBridge {
		d.errorf("nat", `set mode = "router" in [appliance], or remove the [[nat]] sections`, "NAT needs router mode")
	}
	owner := map[netip.Addr]int{}
	for i := range c.NAT {
		n := &c.NAT[i]
		if n.Name == "" {
			n.Name = fmt.Sprintf("nat%d", i)
		}
		if n.PortLo == 0 {
			n.PortLo, n.PortHi = 1024, 32767
		}
		if len(n.Sources) == 0 && !d.bad[natKey(i, "sources")] {
			d.errorf(indexPath("nat", i), `add sources = ["198.19.0.0/24"] (the VPN pool, a LAN prefix)`, "NAT rule without sources")
		}
		for j, p := range n.Sources {
			if !p.Addr().Is4() {
				d.errorf(indexPath(natKey(i, "sources"), j), "NAT44 translates IPv4 only: list IPv4 prefixes", "source %v is not IPv4", p)
			}
		}
		pi := -1
		for j := range c.Ports {
			if c.Ports[j].Name == n.Port {
				pi = j
			}
		}
		switch {
		case n.Port == "" && !d.bad[natKey(i, "port")]:
			d.errorf(indexPath("nat", i), `add port = "wan0", the port the translated packets leave through`, "NAT rule without a port")
			continue
		case pi < 0 && n.Port != "":
			d.errorf(natKey(i, "port"), "use the name of a [[port]]", "no port named %q", n.Port)
			continue
		case pi < 0:
			continue
		}
		if len(n.Outside) == 0 {
			for _, a := range c.Ports[pi].Addresses {
				if a.Addr().Is4() {
					n.Outside = append(n.Outside, a.Addr())
				}
			}
			if len(n.Outside) == 0 {
				d.errorf(natKey(i, "port"), `give the port an IPv4 address, or list outside = ["198.18.1.1"]`, "port %q has no IPv4 address to translate to", n.Port)
			}
		}
		for j, a := range n.Outside {
			k := indexPath(natKey(i, "outside"), j)
			switch o, dup := owner[a]; {
			case !a.Is4():
				d.errorf(k, "list IPv4 addresses", "outside address %v is not IPv4", a)
			case dup:
				d.errorf(k, "give each rule its own outside addresses", "outside address %v is already nat[%d]'s", a, o)
			default:
				owner[a] = i
			}
		}
		if n.PortHi-n.PortLo+1 < c.NATOptions.BlockSize {
			d.errorf(natKey(i, "ports"), fmt.Sprintf("widen the range or lower [nat_options] block_size (%d)", c.NATOptions.BlockSize),
				"port range %d-%d is smaller than one port block", n.PortLo, n.PortHi)
		}
	}
}
