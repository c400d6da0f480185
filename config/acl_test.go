package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestParseACL(t *testing.T) {
	src := twoPorts + vpnOn + `
[[vpn.ccd]]
common_name = "carol"
group = "staff"

[[acl_group]]
name = "contractors"
common_names = ["alice", "bob"]

[[acl]]
name = "contractors"
ingress = ["group:contractors", "vpn"]
[[acl.rule]]
name = "web"
dst = ["198.18.10.0/24", "2001:db8:10::/48"]
proto = "tcp"
dst_ports = ["80", "8000-8080"]
[[acl.rule]]
proto = "icmp"
icmp_types = [8, 128]
action = "reject"

[[acl]]
ingress = ["port:wan0"]
default = "allow"
[[acl.rule]]
proto = "tcp"
tcp_flags = "established"
`
	c, err := Parse("ovfwd.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []ACL{
		{Name: "contractors", Ingress: []string{"group:contractors", "vpn"}, Default: ACLDeny, Rules: []ACLRule{
			{Name: "web", Action: ACLAllow, Dst: []netip.Prefix{netip.MustParsePrefix("198.18.10.0/24"), netip.MustParsePrefix("2001:db8:10::/48")},
				Proto: "tcp", DstPorts: []PortRange{{80, 80}, {8000, 8080}}},
			{Action: ACLReject, Proto: "icmp", ICMPTypes: []int{8, 128}},
		}},
		{Name: "acl1", Ingress: []string{"port:wan0"}, Default: ACLAllow, Rules: []ACLRule{
			{Action: ACLAllow, Proto: "tcp", TCPFlags: TCPFlagsEstablished}}},
	}
	if !reflect.DeepEqual(c.ACL, want) {
		t.Errorf("got  %+v\nwant %+v", c.ACL, want)
	}
	if !reflect.DeepEqual(c.ACLGroups, []ACLGroup{{Name: "contractors", CommonNames: []string{"alice", "bob"}}}) {
		t.Errorf("groups %+v", c.ACLGroups)
	}
	if c.VPN.CCD[0].Group != "staff" {
		t.Errorf("ccd group %q", c.VPN.CCD[0].Group)
	}
}

func TestBadACLs(t *testing.T) {
	for _, tc := range []struct{ name, key, msg, src string }{
		{"unknown port", "acl[0].ingress[0]", `no port "dmz0"`, twoPorts + `
[[acl]]
ingress = ["port:dmz0"] #<`},
		{"ingress twice", "acl[1].ingress[0]", `already the ingress of list "a"`, twoPorts + `
[[acl]]
name = "a"
ingress = ["port:lan0"]
[[acl]]
ingress = ["port:lan0"] #<`},
		{"ports without proto", "acl[0].rule[0]", "ports need proto tcp or udp", twoPorts + `
[[acl]]
ingress = ["port:lan0"]
[[acl.rule]] #<
dst_ports = ["22"]`},
		{"bad port", "acl[0].rule[0].dst_ports[0]", `bad port "ssh"`, twoPorts + `
[[acl]]
ingress = ["port:lan0"]
[[acl.rule]]
proto = "tcp"
dst_ports = ["ssh"] #<`},
		{"bad proto", "acl[0].rule[0].proto", `unknown protocol "tpc"`, twoPorts + `
[[acl]]
ingress = ["port:lan0"]
[[acl.rule]]
proto = "tpc" #<`},
		{"vpn ingress without vpn", "acl[0].ingress[0]", "without a VPN server", twoPorts + `
[[acl]]
ingress = ["vpn"] #<`},
		{"mixed families", "acl[0].rule[0]", "different families", twoPorts + `
[[acl]]
ingress = ["port:lan0"]
[[acl.rule]] #<
src = ["198.18.0.0/24"]
dst = ["2001:db8::/32"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := markedLine(t, tc.src)
			errs := parseErrs(t, tc.src)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(errs), errs)
			}
			e := errs[0]
			if e.Key != tc.key || e.Line != line || !strings.Contains(e.Msg, tc.msg) || e.Fix == "" {
				t.Errorf("got %d: %s: %s (fix %q)\nwant %d: %s: …%s…", e.Line, e.Key, e.Msg, e.Fix, line, tc.key, tc.msg)
			}
		})
	}
}
