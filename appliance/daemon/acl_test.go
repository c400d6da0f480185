package daemon

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd/acl"
)

// TestACLCompileGroups: ingresses become the engine's port, VPN and group
// lists; peers are placed by [[acl_group]] and [[vpn.ccd]] group, a peer
// whose group has no list (or who has none) falls to the VPN's list.
func TestACLCompileGroups(t *testing.T) {
	cfg := &config.Config{
		ACL: []config.ACL{
			{Name: "staff", Ingress: []string{"group:staff"}, Default: config.ACLAllow},
			{Name: "rest", Ingress: []string{"vpn", "group:contractors"}, Default: config.ACLDeny, Rules: []config.ACLRule{
				{Name: "dns", Action: config.ACLAllow, Proto: "udp", DstPorts: []config.PortRange{{Lo: 53, Hi: 53}},
					Dst: []netip.Prefix{netip.MustParsePrefix("198.18.10.53/32")}}}},
			{Name: "wan", Ingress: []string{"port:wan0"}, Default: config.ACLReject,
				Rules: []config.ACLRule{{Action: config.ACLAllow, Proto: "tcp", TCPFlags: config.TCPFlagsEstablished}}},
		},
		ACLGroups: []config.ACLGroup{{Name: "contractors", CommonNames: []string{"alice"}}, {Name: "guests", CommonNames: []string{"gina"}}},
		VPN:       config.VPN{CCD: []config.VPNCCD{{CommonName: "carol", Group: "staff"}}},
	}
	portIndex := func(n string) (int, bool) { return map[string]int{"lan0": 0, "wan0": 1}[n], n == "lan0" || n == "wan0" }
	s, err := aclCompile(cfg, portIndex, 2)
	if err != nil {
		t.Fatal(err)
	}
	s.peers = map[uint32]aclMember{1: {cn: "alice"}, 2: {cn: "carol"}, 3: {cn: "gina"}, 5: {cn: "nobody"},
		4: {cn: "alice", group: "staff"}} // the authentication command's group wins
	a := s.engineACL()
	if !reflect.DeepEqual(a.Ports, []int16{-1, 2}) || a.VPN != 1 || !reflect.DeepEqual(a.Groups, []int16{0, 1}) {
		t.Fatalf("ports %v vpn %d groups %v", a.Ports, a.VPN, a.Groups)
	}
	// staff is group 0, contractors 1; gina's guests have no list.
	if want := []uint16{0, 2, 1, 0, 1, 0}; !reflect.DeepEqual(a.PeerGroup, want) {
		t.Fatalf("peer groups %v, want %v", a.PeerGroup, want)
	}
	var k acl.Key
	k.Proto, k.HasL4, k.DPort = 17, true, 53
	copy(k.Dst[:], []byte{198, 18, 10, 53})
	if act, _ := a.Rules.Match(1, &k); act != acl.Allow {
		t.Fatalf("dns rule: %v", act)
	}
	k.Proto, k.DPort, k.Flags = 6, 22, acl.TCPSyn
	if act, _ := a.Rules.Match(2, &k); act != acl.Reject {
		t.Fatalf("wan syn: %v", act)
	}
	k.Flags = acl.TCPAck
	if act, _ := a.Rules.Match(2, &k); act != acl.Allow {
		t.Fatalf("wan established: %v", act)
	}
	if s, err := aclCompile(&config.Config{}, portIndex, 2); s != nil || err != nil {
		t.Fatal("no lists: want nil")
	}
}
