package control

import (
	"net/netip"
	"testing"
)

func TestLeasesRoundTrip(t *testing.T) {
	in := "# openvpn ipp.txt\nalice,198.18.142.9,2001:db8:142::1009\nbob,198.18.142.10,\ncarol,,2001:db8::5\nbad line\nx,not-an-ip,\nalice,198.18.142.11\n"
	m, bad := parseLeases([]byte(in))
	if bad != 2 || len(m) != 3 {
		t.Fatalf("parsed %v with %d bad lines, want 3 names and 2 bad", m, bad)
	}
	if m["alice"].v4 != netip.MustParseAddr("198.18.142.11") || m["alice"].v6.IsValid() {
		t.Errorf("the later alice line must win: %+v", m["alice"])
	}
	again, bad := parseLeases(formatLeases(m))
	if bad != 0 || len(again) != len(m) {
		t.Fatalf("round trip: %v (%d bad)", again, bad)
	}
	for k, v := range m {
		if again[k] != v {
			t.Errorf("%s: %+v after the round trip, want %+v", k, again[k], v)
		}
	}
}

// FuzzParseLeases: a pool_persist file never panics the parser, and what
// it accepts writes back to the same leases.
func FuzzParseLeases(f *testing.F) {
	for _, s := range []string{"alice,198.18.0.2,2001:db8::1000\n", "bob,,\n", ",1.2.3.4\n", "a,b,c,d\n", "x,::ffff:1.2.3.4,fe80::1%eth0\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _ := parseLeases(data)
		again, bad := parseLeases(formatLeases(m))
		if bad != 0 || len(again) != len(m) {
			t.Fatalf("round trip of %q: %v, %d bad", data, again, bad)
		}
		for k, v := range m {
			if again[k] != v {
				t.Fatalf("%q: %+v became %+v", k, v, again[k])
			}
		}
	})
}

// TestPoolReserveTake: reserved (fixed) addresses are never handed out
// dynamically, Take hands out a specific free address once.
func TestPoolReserveTake(t *testing.T) {
	p, err := NewPool(netip.MustParsePrefix("198.18.5.0/29"), 10) // clients .2-.6
	if err != nil {
		t.Fatal(err)
	}
	fixed := netip.MustParseAddr("198.18.5.3")
	p.SetReserved([]netip.Addr{fixed})
	got := map[netip.Addr]bool{}
	for {
		a, err := p.Allocate()
		if err != nil {
			break
		}
		got[a] = true
	}
	if got[fixed] || len(got) != 4 {
		t.Fatalf("dynamic addresses %v: want the 4 unreserved ones", got)
	}
	if !p.Take(fixed) || p.Take(fixed) {
		t.Error("Take of the reserved address: want once")
	}
	if p.Take(netip.MustParseAddr("198.18.6.3")) || p.Take(netip.MustParseAddr("198.18.5.1")) {
		t.Error("Take outside the client range succeeded")
	}
	p.Free(fixed)
	if _, err := p.Allocate(); err == nil {
		t.Error("a freed reserved address went to the dynamic pool")
	}
}

// TestFixedOutsideRange: a fixed address in the prefix but outside the
// dynamic range (an IPv6 address below ::1000) is handed to one session
// at a time and released with it.
func TestFixedOutsideRange(t *testing.T) {
	p, err := NewPool(netip.MustParsePrefix("2001:db8:5::/64"), 4)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{pool6: p, fixedInUse: map[netip.Addr]bool{}}
	fixed := netip.MustParseAddr("2001:db8:5::50")
	if p.InRange(fixed) {
		t.Fatal("::50 counted as a dynamic address")
	}
	a, _, err := s.address(p, fixed, netip.Addr{})
	if err != nil || a != fixed {
		t.Fatalf("first: %v %v", a, err)
	}
	b, _, err := s.address(p, fixed, netip.Addr{})
	if err != nil || b == fixed || !p.InRange(b) {
		t.Fatalf("second session of the name: %v %v, want a pool address", b, err)
	}
	if p.Free(fixed) {
		t.Fatal("the pool freed an address it never handed out")
	}
}
