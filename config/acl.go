package config

import (
	"fmt"
	"strconv"
	"strings"

	"net/netip"
)

// ACL is one [[acl]] rule list: the packets entering by one of Ingress
// that ovfwd forwards are matched against Rules in order; the first that
// matches decides, Default when none does.
type ACL struct {
	Name string // for counters and logs; default "acl<index>"
	// Ingress: "vpn" (tunnel clients whose group has no list of its
	// own), "group:NAME" (clients of group NAME), "port:NAME" (packets
	// received on port NAME). Each ingress belongs to one list.
	Ingress []string
	Default string // ACLAllow, ACLDeny (default) or ACLReject
	Rules   []ACLRule
}

// ACLRule is one [[acl.rule]]. An empty field matches anything.
type ACLRule struct {
	Name     string
	Action   string // ACLAllow (default), ACLDeny or ACLReject
	Src, Dst []netip.Prefix
	// Proto: "tcp", "udp", "icmp" (ICMP for IPv4, ICMPv6 for IPv6) or
	// an IP protocol number; "" any.
	Proto     string
	SrcPorts  []PortRange // "80" or "8000-8080"; tcp or udp only
	DstPorts  []PortRange
	ICMPTypes []int // icmp only
	// TCPFlags: "established" (ACK or RST set: a connection's packets
	// after its first) or "syn" (SYN without ACK: a connection's first);
	// tcp only.
	TCPFlags string
}

// PortRange is an inclusive range of ports.
type PortRange struct{ Lo, Hi int }

// ACLGroup is one [[acl_group]]: VPN clients by the common names of
// their certificates (or usernames, with username_as_common_name). A
// [[vpn.ccd]] group key, or a group line from the authentication command,
// puts a client in a group too.
type ACLGroup struct {
	Name        string
	CommonNames []string
}

// ACL actions.
const (
	ACLAllow  = "allow"
	ACLDeny   = "deny"
	ACLReject = "reject" // deny, answering with ICMP administratively prohibited (rate-limited)
)

// ACL ingress forms.
const (
	IngressVPN   = "vpn"
	IngressGroup = "group:"
	IngressPort  = "port:"
)

// ACL tcp_flags values.
const (
	TCPFlagsEstablished = "established"
	TCPFlagsSYN         = "syn"
)

func (d *decoder) acl(t *table, a *ACL) {
	t.str("name", &a.Name)
	t.strings("ingress", &a.Ingress, `["vpn"], ["group:contractors"], ["port:lan0"]`)
	t.enum("default", &a.Default, ACLAllow, ACLDeny, ACLReject)
	for _, rt := range t.list("rule") {
		var r ACLRule
		d.aclRule(rt, &r)
		a.Rules = append(a.Rules, r)
	}
	t.done()
}

func (d *decoder) aclRule(t *table, r *ACLRule) {
	t.str("name", &r.Name)
	t.enum("action", &r.Action, ACLAllow, ACLDeny, ACLReject)
	t.prefixes("src", &r.Src, false)
	t.prefixes("dst", &r.Dst, false)
	if t.str("proto", &r.Proto) {
		if _, ok := ParseACLProto(r.Proto); !ok {
			d.errorf(t.key("proto"), `write "tcp", "udp", "icmp" or a protocol number from 0 to 255`, "unknown protocol %q", r.Proto)
			r.Proto = ""
		}
	}
	for _, k := range []struct {
		key string
		dst *[]PortRange
	}{{"src_ports", &r.SrcPorts}, {"dst_ports", &r.DstPorts}} {
		var ss []string
		if !t.strings(k.key, &ss, `["443", "8000-8080"]`) {
			continue
		}
		for i, s := range ss {
			lo, hi, ok := parsePortRange(s)
			if !ok {
				var err error
				lo, err = strconv.Atoi(strings.TrimSpace(s))
				hi, ok = lo, err == nil && lo >= 0 && lo <= 65535
			}
			if !ok {
				d.errorf(indexPath(t.key(k.key), i), `write a port like "443" or a range like "8000-8080"`, "bad port %q", s)
				continue
			}
			*k.dst = append(*k.dst, PortRange{lo, hi})
		}
	}
	if a, ok := t.array("icmp_types", "[8, 0]"); ok {
		for i, v := range a {
			var n int
			if t.intValue(indexPath(t.key("icmp_types"), i), v, &n, 0, 255) {
				r.ICMPTypes = append(r.ICMPTypes, n)
			}
		}
	}
	t.enum("tcp_flags", &r.TCPFlags, TCPFlagsEstablished, TCPFlagsSYN)
	t.done()
}

func (d *decoder) aclGroup(t *table, g *ACLGroup) {
	t.str("name", &g.Name)
	t.strings("common_names", &g.CommonNames, `["alice", "bob"]`)
	t.done()
}

// ParseACLProto is a rule's proto as IP protocol numbers (icmp: ICMP and
// ICMPv6); nil for "" (any).
func ParseACLProto(s string) ([]uint8, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return nil, true
	case "tcp":
		return []uint8{6}, true
	case "udp":
		return []uint8{17}, true
	case "icmp", "icmpv6", "icmp6":
		return []uint8{1, 58}, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 {
		return nil, false
	}
	return []uint8{uint8(n)}, true
}

func aclKey(i int, k string) string { return joinPath(indexPath("acl", i), k) }

// validateACL checks names, ingresses and what each rule's fields need.
func (d *decoder) validateACL(c *Config) {
	if len(c.ACL) > 0 && c.Appliance.Mode == ModeBridge {
		d.errorf("acl", `set mode = "router" in [appliance], or remove the [[acl]] sections`, "access lists need router mode")
	}
	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[p.Name] = true
	}
	groups := map[string]bool{}
	for i, g := range c.ACLGroups {
		key := indexPath("acl_group", i)
		if g.Name == "" {
			d.errorf(key, `add name = "contractors"`, "group without a name")
		} else if groups[g.Name] {
			d.errorf(joinPath(key, "name"), "give each [[acl_group]] its own name", "group %q defined twice", g.Name)
		}
		groups[g.Name] = true
	}
	names := map[string]bool{}
	owner := map[string]int{}
	for i := range c.ACL {
		a := &c.ACL[i]
		if a.Name == "" {
			a.Name = fmt.Sprintf("acl%d", i)
		}
		if a.Default == "" {
			a.Default = ACLDeny
		}
		if names[a.Name] {
			d.errorf(aclKey(i, "name"), "give each [[acl]] its own name", "list %q defined twice", a.Name)
		}
		names[a.Name] = true
		if len(a.Ingress) == 0 && !d.bad[aclKey(i, "ingress")] {
			d.errorf(indexPath("acl", i), `add ingress = ["vpn"], ["group:NAME"] or ["port:NAME"]`, "list %q applies to nothing", a.Name)
		}
		for j, in := range a.Ingress {
			key := indexPath(aclKey(i, "ingress"), j)
			switch {
			case in == IngressVPN:
				if !c.VPN.Enabled {
					d.errorf(key, "enable [vpn], or remove this ingress", "ingress vpn without a VPN server")
				}
			case strings.HasPrefix(in, IngressPort):
				if !ports[strings.TrimPrefix(in, IngressPort)] {
					d.errorf(key, "name a [[port]]", "no port %q", strings.TrimPrefix(in, IngressPort))
				}
			case strings.HasPrefix(in, IngressGroup):
				if strings.TrimPrefix(in, IngressGroup) == "" {
					d.errorf(key, `write "group:NAME"`, "group without a name")
				}
			default:
				d.errorf(key, `write "vpn", "group:NAME" or "port:NAME"`, "unknown ingress %q", in)
				continue
			}
			if o, dup := owner[in]; dup {
				d.errorf(key, "list each ingress in one [[acl]]", "%s is already the ingress of list %q", in, c.ACL[o].Name)
			}
			owner[in] = i
		}
		for j := range a.Rules {
			d.validateACLRule(indexPath(aclKey(i, "rule"), j), &a.Rules[j])
		}
	}
}

func (d *decoder) validateACLRule(key string, r *ACLRule) {
	if r.Action == "" {
		r.Action = ACLAllow
	}
	proto := strings.ToLower(r.Proto)
	if (len(r.SrcPorts) > 0 || len(r.DstPorts) > 0) && proto != "tcp" && proto != "udp" {
		d.errorf(key, `add proto = "tcp" or "udp"`, "ports need proto tcp or udp")
	}
	if len(r.ICMPTypes) > 0 && !strings.HasPrefix(proto, "icmp") {
		d.errorf(key, `add proto = "icmp"`, "icmp_types need proto icmp")
	}
	if r.TCPFlags != "" && proto != "tcp" {
		d.errorf(key, `add proto = "tcp"`, "tcp_flags need proto tcp")
	}
	fam := map[bool]int{}
	for _, p := range r.Src {
		fam[p.Addr().Is4()] |= 1
	}
	for _, p := range r.Dst {
		fam[p.Addr().Is4()] |= 2
	}
	// A family with a src but no dst prefix (or the reverse) never matches
	// when the other side lists only the other family.
	if len(r.Src) > 0 && len(r.Dst) > 0 && fam[true] != 3 && fam[false] != 3 {
		d.errorf(key, "give src and dst prefixes of one family (a rule for each family)", "src and dst prefixes of different families never match")
	}
}
