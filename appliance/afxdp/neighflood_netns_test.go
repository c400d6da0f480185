package afxdp_test

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

const neighFloodConfig = `
[appliance]
mode = "router"
neighbour_table = 256

` + twoRoutedPorts + `
[netlink]
neighbours = true

[metrics]
listen = ""

[status]
socket = "{sock}"
`

// TestNeighbourFloodNetns: a flood of neighbour solicitations and ARP
// requests to the router from random sources on its LAN port, some of
// them claiming B's addresses with other MACs, fills ovfwd's neighbour
// table (256 here); B, confirmed before, keeps its MAC in ovfwd (A's
// traffic reaches it) and in the kernel's table (permanent, ovfwd's mark);
// and the kernel holds no other permanent entry of ovfwd's: what the flood
// made is unconfirmed, mirrored as STALE entries that the kernel's own
// bounds govern.
func TestNeighbourFloodNetns(t *testing.T) {
	nstest.RequireRoot(t)
	bin := nstest.BuildOvfwd(t)
	a, app, b := nstest.New(t, "nfa"), nstest.New(t, "nfr"), nstest.New(t, "nfb")
	nstest.Link(t, a, "a0", app, "p0")
	nstest.Link(t, app, "p1", b, "b0")
	nstest.Run(t, a, "ip", "addr", "add", "198.18.64.1/24", "dev", "a0")
	nstest.Run(t, a, "ip", "addr", "add", "2001:db8:64::1/64", "dev", "a0", "nodad")
	nstest.Run(t, a, "ip", "route", "add", "default", "via", "198.18.64.254")
	nstest.Run(t, a, "ip", "-6", "route", "add", "default", "via", "2001:db8:64::fe")
	nstest.Run(t, b, "ip", "addr", "add", "198.18.65.1/24", "dev", "b0")
	nstest.Run(t, b, "ip", "addr", "add", "2001:db8:65::1/64", "dev", "b0", "nodad")
	nstest.Run(t, b, "ip", "route", "add", "default", "via", "198.18.65.254")
	nstest.Run(t, b, "ip", "-6", "route", "add", "default", "via", "2001:db8:65::fe")
	snap := startOvfwd(t, app, bin, neighFloodConfig)
	if s := snap(30*time.Second, func(s *status.Snapshot) bool { return len(s.Ports) == 2 }); len(s.Ports) != 2 {
		t.Fatalf("ovfwd has %d ports", len(s.Ports))
	}
	bMAC := ifaceMAC(t, b, "b0").String()
	bAddrs := []string{"198.18.65.1", "2001:db8:65::1"}
	// A's traffic makes ovfwd ask for B, whose answer confirms it; the
	// mirror makes it permanent in the kernel.
	kernelB := func(addr string) string { return nstest.Run(t, app, "ip", "neigh", "show", addr, "dev", "p1") }
	for _, addr := range bAddrs {
		for i := 0; ; i++ {
			_, err := a.Run("ping", "-c", "1", "-W", "1", addr)
			k := kernelB(addr)
			if err == nil && strings.Contains(k, bMAC) && strings.Contains(k, "PERMANENT") {
				break
			}
			if i == 10 {
				t.Fatalf("B (%s) not confirmed and mirrored: ping %v, kernel %q", addr, err, k)
			}
		}
	}

	// The flood, from B's side of the LAN: 4,000 solicitations and 4,000
	// ARP requests for the router's addresses from random sources with
	// random MACs, one in 20 claiming B's address.
	x := openPacket(t, b, "b0")
	rng := rand.New(rand.NewPCG(27, 11))
	b4, b6 := netip.MustParseAddr(bAddrs[0]), netip.MustParseAddr(bAddrs[1])
	for i := range 4000 {
		mac := randomMAC(rng)
		src6 := randomIn(rng, netip.MustParsePrefix("2001:db8:65::/64"))
		src4 := randomIn(rng, netip.MustParsePrefix("198.18.65.0/24"))
		if i%20 == 0 {
			src4, src6 = b4, b6
		}
		if src4 == netip.MustParseAddr("198.18.65.254") {
			src4 = netip.MustParseAddr("198.18.65.2")
		}
		x.send(solicit(mac, src6, netip.MustParseAddr("2001:db8:65::fe")))
		x.send(arpRequest(mac, src4, netip.MustParseAddr("198.18.65.254")))
		if i%50 == 49 {
			time.Sleep(time.Millisecond)
		}
	}

	// The mirror writes at most 2,000 entries a second: wait until the
	// kernel's count of ovfwd's entries stops moving (up to 15 s).
	ours := func() (all, permanent int) {
		for _, l := range strings.Split(nstest.Run(t, app, "ip", "neigh", "show", "dev", "p1"), "\n") {
			if strings.Contains(l, "proto 245") {
				all++
				if strings.Contains(l, "PERMANENT") {
					permanent++
				}
			}
		}
		return all, permanent
	}
	prev, stable := -1, 0
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && stable < 4; time.Sleep(250 * time.Millisecond) {
		n, _ := ours()
		if n == prev {
			stable++
		} else {
			prev, stable = n, 0
		}
	}
	s := snap(0, func(*status.Snapshot) bool { return true })
	all, permanent := ours()
	t.Logf("after the flood: engine neighbours %d of 256 (refused %d, unsolicited %d); kernel entries of ovfwd's on the LAN port %d, permanent %d",
		s.Neighbours, s.Engine["neighbour_refused"], s.Engine["neighbour_unsolicited"], all, permanent)
	if s.Neighbours < 240 {
		t.Errorf("the flood filled %d of the 256 entries: the test did not fill the table", s.Neighbours)
	}
	if all > 256 {
		t.Errorf("%d kernel entries of ovfwd's on the LAN port, more than its table holds", all)
	}
	// B's two addresses; nothing the flood made.
	if permanent > len(bAddrs) {
		t.Errorf("%d permanent kernel entries of ovfwd's on the LAN port, want at most B's %d", permanent, len(bAddrs))
	}
	for _, addr := range bAddrs {
		if k := kernelB(addr); !strings.Contains(k, bMAC) || !strings.Contains(k, "PERMANENT") {
			t.Errorf("kernel entry for B's %s after the flood: %q (B is %s)", addr, k, bMAC)
		}
		if out, err := a.Run("ping", "-c", "2", "-i", "0.2", "-W", "1", addr); err != nil {
			t.Errorf("A cannot reach B's %s after the flood (ovfwd lost its MAC?): %v\n%s", addr, err, out)
		}
	}
}

func randomMAC(rng *rand.Rand) net.HardwareAddr {
	m := make(net.HardwareAddr, 6)
	binary.LittleEndian.PutUint32(m, rng.Uint32())
	binary.LittleEndian.PutUint16(m[4:], uint16(rng.Uint32()))
	m[0] = m[0]&^1 | 2 // unicast, locally administered
	return m
}

func randomIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	a := p.Addr().AsSlice()
	for i := p.Bits() / 8; i < len(a); i++ {
		a[i] = byte(rng.Uint32())
	}
	r, _ := netip.AddrFromSlice(a)
	if r == p.Addr() || r.Is4() && a[3] == 255 {
		return randomIn(rng, p)
	}
	return r
}

// solicit is a neighbour solicitation (RFC 4861 §4.3) for target from src
// at mac (its source link-layer address option), to target's
// solicited-node multicast address.
func solicit(mac net.HardwareAddr, src, target netip.Addr) []byte {
	t := target.As16()
	dst := netip.AddrFrom16([16]byte{0xff, 0x02, 11: 1, 12: 0xff, 13: t[13], 14: t[14], 15: t[15]})
	icmp := make([]byte, 32)
	icmp[0] = 135
	copy(icmp[8:], t[:])
	icmp[24], icmp[25] = 1, 1 // source link-layer address, 8 bytes
	copy(icmp[26:], mac)
	pseudo := append(append(src.AsSlice(), dst.AsSlice()...), 0, 0, 0, byte(len(icmp)), 0, 0, 0, 58)
	binary.BigEndian.PutUint16(icmp[2:], ^onesSum(append(pseudo, icmp...)))
	ip := make([]byte, 40)
	ip[0], ip[6], ip[7] = 0x60, 58, 255
	binary.BigEndian.PutUint16(ip[4:], uint16(len(icmp)))
	copy(ip[8:], src.AsSlice())
	copy(ip[24:], dst.AsSlice())
	f := []byte{0x33, 0x33, 0xff, t[13], t[14], t[15]}
	f = append(append(f, mac...), 0x86, 0xdd)
	return append(append(f, ip...), icmp...)
}

// arpRequest asks who has tpa, from spa at mac (RFC 826).
func arpRequest(mac net.HardwareAddr, spa, tpa netip.Addr) []byte {
	f := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, mac...)
	f = append(f, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1)
	f = append(append(f, mac...), spa.AsSlice()...)
	f = append(f, 0, 0, 0, 0, 0, 0)
	return append(f, tpa.AsSlice()...)
}
