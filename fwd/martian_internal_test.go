package fwd

import (
	"net/netip"
	"testing"
)

// FuzzMartian checks the in-line candidate tests and the exact tests
// (martian.go) together against the class list written with netip's
// predicates, for any pair of addresses: a candidate test that missed a
// class, or an exact test that drops too much, fails it.
func FuzzMartian(f *testing.F) {
	own4, own6, ownLL := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("fe80::1")
	t := &tables{adj: []adjacency{{kind: adjLocal}}}
	t.v4 = t.v4.Insert(netip.PrefixFrom(own4, 32), 0)
	t.v6 = t.v6.Insert(netip.PrefixFrom(own6, 128), 0).Insert(netip.PrefixFrom(ownLL, 128), 0)
	t.ports = []portConf{{v4: []netip.Prefix{netip.PrefixFrom(own4, 24)}, v6: []netip.Prefix{netip.PrefixFrom(own6, 64)}}}
	t.mart = newMartianTables(t.ports, false)
	never4 := func(a netip.Addr) bool {
		b := a.As4()
		return b[0] == 0 || b[0] == 127 || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}
	for _, s := range [][2]string{{"198.18.0.10", "8.8.8.8"}, {"127.0.0.1", "8.8.8.8"}, {"198.18.0.1", "1.1.1.1"},
		{"8.8.8.8", "255.255.255.255"}, {"8.8.8.8", "255.255.255.254"}, {"fe80::a", "2001:db8::1"}, {"fe80::a", "2001:db8:5::1"},
		{"::", "2001:db8::5"}, {"2001:db8::5", "ff02::1"}, {"::1", "2001:db8::5"}, {"2001:db8::5", "::ffff:1.2.3.4"}} {
		f.Add(netip.MustParseAddr(s[0]).AsSlice(), netip.MustParseAddr(s[1]).AsSlice())
	}
	f.Fuzz(func(tt *testing.T, src, dst []byte) {
		if len(src) >= 16 && len(dst) >= 16 {
			s, d := netip.AddrFrom16([16]byte(src)), netip.AddrFrom16([16]byte(dst))
			var h [ipv6HdrLen]byte
			copy(h[8:24], src)
			copy(h[24:40], dst)
			// netip's predicates judge an IPv4-mapped address as IPv4;
			// in an IPv6 header it is none of these classes.
			is := func(a netip.Addr, p func(netip.Addr) bool) bool { return !a.Is4In6() && p(a) }
			want := is(d, netip.Addr.IsMulticast) || is(s, netip.Addr.IsMulticast) || is(s, netip.Addr.IsLoopback) ||
				is(d, netip.Addr.IsLoopback) || is(s, netip.Addr.IsUnspecified) || is(d, netip.Addr.IsUnspecified) ||
				(is(s, netip.Addr.IsLinkLocalUnicast) || is(d, netip.Addr.IsLinkLocalUnicast)) && d != own6 && d != ownLL
			if got := martian6Candidate(t, &h) && martian6(t, &h); got != want {
				tt.Fatalf("%v -> %v: martian %v, want %v", s, d, got, want)
			}
			return
		}
		if len(src) < 4 || len(dst) < 4 {
			return
		}
		s, d := netip.AddrFrom4([4]byte(src)), netip.AddrFrom4([4]byte(dst))
		var h [ipv4MinHdrLen]byte
		copy(h[12:16], src)
		copy(h[16:20], dst)
		want := never4(s) || never4(d) || s == own4
		if got := martian4Candidate(t, &h) && martian4(t, &h); got != want {
			tt.Fatalf("%v -> %v: martian %v, want %v", s, d, got, want)
		}
	})
}
