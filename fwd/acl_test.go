package fwd_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/acl"
)

func pfxs(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, x := range s {
		out = append(out, netip.MustParsePrefix(x))
	}
	return out
}

// aclPortRig: port 0's packets pass list "lan": DNS to B allowed, SSH to
// B rejected with ICMP, echo requests allowed, anything else denied.
// Port 1 has no list (return traffic passes).
func aclPortRig(t *testing.T) (*rig, *acl.Rules) {
	r := newRig(t, rigOpt{cfg: fwd.Config{ICMPRate: 1 << 30, ICMPBurst: 1 << 20}})
	must(t, r.e.SetNeighbour(1, bV4, macB))
	must(t, r.e.SetNeighbour(1, bV6, macB))
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(0, aV6, macA))
	rules := acl.Compile([]acl.List{{Name: "lan", Default: acl.Deny, Rules: []acl.Rule{
		{Name: "dns", Dst: pfxs("198.18.1.20/32", "2001:db8:1::20/128"), Protos: []uint8{17}, DstPorts: []acl.PortRange{{Lo: 53, Hi: 53}}},
		{Name: "ssh", Protos: []uint8{6}, DstPorts: []acl.PortRange{{Lo: 22, Hi: 22}}, Action: acl.Reject},
		{Name: "ping", Protos: []uint8{1, 58}, ICMPTypes: []acl.PortRange{{Lo: 8, Hi: 8}, {Lo: 128, Hi: 128}}},
	}}})
	r.e.SetACL(&fwd.ACL{Rules: rules, Ports: []int16{0, -1}, VPN: -1})
	return r, rules
}

func TestACLPortFilters(t *testing.T) {
	r, rules := aclPortRig(t)
	send := func(port int, f []byte) {
		r.inject(port, f)
		r.poll()
	}
	// Allowed, both families, and the answer from the port without a list.
	send(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 17, 64, true, udp(4000, 53, []byte("q")))))
	send(0, eth(macR0, macA, 0x86dd, ipv6(aV6, bV6, 17, 64, udp(4000, 53, []byte("q")))))
	send(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 1, 64, true, icmpEcho(8, 1, 1, nil))))
	if n := len(r.drain(1)); n != 3 {
		t.Fatalf("%d of 3 allowed packets forwarded", n)
	}
	send(1, eth(macR1, macB, 0x0800, ipv4(bV4, aV4, 17, 64, true, udp(53, 4000, []byte("a")))))
	if n := len(r.drain(0)); n != 1 {
		t.Fatalf("return packet: %d forwarded", n)
	}
	// Denied by default: silently.
	send(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 17, 64, true, udp(4000, 54, []byte("q")))))
	send(0, eth(macR0, macA, 0x86dd, ipv6(aV6, bV6, 58, 64, icmpEcho(129, 1, 1, nil))))
	r.expectNone(1)
	r.expectNone(0)
	// Rejected: ICMP administratively prohibited back to the sender.
	send(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 6, 64, true, tcpSYN(4000, 22, 1460, 0))))
	r.expectNone(1)
	_, ic := checkIPv4(t, parseEth(t, r.drainOne(0)).l3)
	if ic[0] != 3 || ic[1] != 13 {
		t.Fatalf("reject sent ICMP type %d code %d, want 3/13", ic[0], ic[1])
	}
	send(0, eth(macR0, macA, 0x86dd, ipv6(aV6, bV6, 6, 64, tcpSYN(4000, 22, 1460, 0))))
	_, ic = checkIPv6(t, parseEth(t, r.drainOne(0)).l3)
	if ic[0] != 1 || ic[1] != 1 {
		t.Fatalf("reject sent ICMPv6 type %d code %d, want 1/1", ic[0], ic[1])
	}
	got := r.e.ACLCounters(rules)
	want := []uint64{2, 2, 1, 2} // dns, ssh, ping, default
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("counters %v, want %v", got, want)
		}
	}
	if d := r.drops(fwd.DropACL); d != 4 {
		t.Fatalf("%d ACL drops, want 4", d)
	}
	// Off: everything passes again.
	r.e.SetACL(nil)
	send(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 17, 64, true, udp(4000, 54, []byte("q")))))
	if n := len(r.drain(1)); n != 1 {
		t.Fatal("packet dropped with the ACL off")
	}
	r.checkNoLeak()
}

// TestACLTunnelGroups: two peers in two groups, each filtered by its
// group's list; moving a peer to the other group takes effect at the
// next poll, counters carrying on.
func TestACLTunnelGroups(t *testing.T) {
	r := newRig(t, rigOpt{})
	c7, c8 := netip.MustParseAddr("198.19.0.7"), netip.MustParseAddr("198.19.0.8")
	ft := &fakeTunnel{server: r0v4.Addr(), peers: map[uint32]netip.Addr{7: aV4, 8: cV4},
		peerOfOuter: map[netip.Addr]uint32{aV4: 7, cV4: 8}}
	r.e.SetTunnel(ft, 1194)
	must(t, r.e.AddRoute(netip.PrefixFrom(c7, 32), fwd.NextHop{Tunnel: true, Peer: 7}))
	must(t, r.e.AddRoute(netip.PrefixFrom(c8, 32), fwd.NextHop{Tunnel: true, Peer: 8}))
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(0, cV4, macC))
	must(t, r.e.SetNeighbour(1, bV4, macB))
	rules := acl.Compile([]acl.List{
		{Name: "staff", Default: acl.Allow},
		{Name: "contractors", Default: acl.Deny, Rules: []acl.Rule{
			{Name: "dns", Protos: []uint8{17}, DstPorts: []acl.PortRange{{Lo: 53, Hi: 53}}}}},
	})
	peerGroup := make([]uint16, 9)
	peerGroup[7], peerGroup[8] = 1, 2 // staff, contractors
	set := func() {
		r.e.SetACL(&fwd.ACL{Rules: rules, Ports: []int16{-1, -1}, VPN: 1, Groups: []int16{0, 1},
			PeerGroup: append([]uint16(nil), peerGroup...)})
	}
	set()
	from := func(outer, client netip.Addr, mac []byte, dport uint16) int {
		inner := ipv4(client, bV4, 17, 64, false, udp(3333, dport, []byte("x")))
		r.inject(0, eth(macR0, mac, 0x0800, ipv4(outer, r0v4.Addr(), 17, 64, false, udp(5000, 1194, inner))))
		r.poll()
		return len(r.drain(1))
	}
	if from(aV4, c7, macA, 80) != 1 || from(aV4, c7, macA, 53) != 1 {
		t.Fatal("staff peer filtered")
	}
	if from(cV4, c8, macC, 80) != 0 || from(cV4, c8, macC, 53) != 1 {
		t.Fatal("contractor peer not filtered by its group's list")
	}
	peerGroup[8] = 1
	set()
	if from(cV4, c8, macC, 80) != 1 {
		t.Fatal("peer moved to staff still filtered")
	}
	peerGroup[7] = 0 // no group: the VPN's list (contractors)
	set()
	if from(aV4, c7, macA, 80) != 0 {
		t.Fatal("peer without a group not filtered by the VPN's list")
	}
	got := r.e.ACLCounters(rules)
	want := []uint64{3, 1, 2} // staff default; contractors dns, default
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("counters %v, want %v", got, want)
		}
	}
	r.checkNoLeak()
}

// benchRules: lists of per rules each, every rule a TCP service on a
// network of its own; the last rule of each allows UDP to B's networks,
// what the benchmark's packets are.
func benchRules(lists, per int) *acl.Rules {
	var ls []acl.List
	for g := range lists {
		l := acl.List{Name: "g" + string(rune('A'+g%26)) + string(rune('a'+g/26)), Default: acl.Deny}
		for i := range per - 1 {
			n := g*per + i
			l.Rules = append(l.Rules, acl.Rule{
				Dst:      []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(n >> 8), byte(n)}), 32), netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xff, byte(n >> 8), byte(n)}), 56)},
				Protos:   []uint8{6},
				DstPorts: []acl.PortRange{{Lo: uint16(1000 + i*10), Hi: uint16(1005 + i*10)}},
			})
		}
		l.Rules = append(l.Rules, acl.Rule{Dst: pfxs("198.18.1.0/24", "2001:db8:1::/64"), Protos: []uint8{17}})
		ls = append(ls, l)
	}
	return acl.Compile(ls)
}

func aclHotRig(t testing.TB, frames [][]byte, rules *acl.Rules) *rig {
	r := hotRig(t, fwd.ModeRouter, frames, fwd.Config{ICMPRate: 1 << 30, ICMPBurst: 1 << 20})
	if rules != nil {
		r.e.SetACL(&fwd.ACL{Rules: rules, Ports: []int16{int16(rules.NumLists() - 1), -1}, VPN: -1})
		r.poll()
	}
	return r
}

func aclFrames() [][]byte { return [][]byte{udp4AtoB(64), udp6AtoB(64)} }

// Filtering allocates nothing per packet, and the packets it allows all
// leave.
func TestACLPollDoesNotAllocate(t *testing.T) {
	rules := benchRules(50, 20)
	r := aclHotRig(t, aclFrames(), rules)
	before := r.e.Stats()
	if allocs := testing.AllocsPerRun(50, func() { r.advance(time.Millisecond); r.poll() }); allocs != 0 {
		t.Fatalf("%v allocations per poll", allocs)
	}
	after := r.e.Stats()
	if sent := after.Ports[1].TxPackets - before.Ports[1].TxPackets; sent < 50*64 {
		t.Fatalf("only %d packets sent", sent)
	}
	if c := r.e.ACLCounters(rules); c[rules.NumRules()-2] < 50*64 {
		t.Fatalf("the allowing rule counted %d", c[rules.NumRules()-2])
	}
}

// TestACLUplinkNotFiltered: a packet out of a site-to-site uplink (InjectIP)
// is not judged by port 0's list, though it is built in port 0's buffers.
func TestACLUplinkNotFiltered(t *testing.T) {
	r, rules := aclPortRig(t)
	must(t, r.e.InjectIP(ipv4(netip.MustParseAddr("198.19.5.5"), bV4, 17, 64, true, udp(4000, 54, []byte("q")))))
	r.poll()
	if n := len(r.drain(1)); n != 1 {
		t.Fatalf("uplink packet: %d forwarded, want 1", n)
	}
	if c := r.e.ACLCounters(rules); c != nil && c[3] != 0 {
		t.Fatalf("port 0's default counted the uplink's packet: %v", c)
	}
}
