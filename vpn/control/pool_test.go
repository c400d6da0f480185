package control

import (
	"net/netip"
	"testing"
)

func TestPoolIPv4(t *testing.T) {
	p, err := NewPool(netip.MustParsePrefix("198.18.8.0/24"), 10000)
	if err != nil {
		t.Fatal(err)
	}
	if p.ServerAddr() != netip.MustParseAddr("198.18.8.1") {
		t.Fatalf("server %v", p.ServerAddr())
	}
	if p.Available() != 253 { // .2 … .254
		t.Fatalf("available %d", p.Available())
	}
	seen := map[netip.Addr]bool{}
	for i := 0; i < 253; i++ {
		a, err := p.Allocate()
		if err != nil {
			t.Fatalf("alloc %d: %v", i, err)
		}
		if seen[a] || !p.Prefix().Contains(a) || a == p.ServerAddr() || a.As4()[3] == 255 || a.As4()[3] == 0 {
			t.Fatalf("bad or duplicate address %v", a)
		}
		seen[a] = true
	}
	if _, err := p.Allocate(); err == nil {
		t.Fatal("allocated beyond the pool")
	}
	a := netip.MustParseAddr("198.18.8.77")
	if !p.Free(a) || p.Free(a) {
		t.Fatal("free / double free")
	}
	if p.Free(netip.MustParseAddr("198.18.9.2")) || p.Free(netip.MustParseAddr("198.18.8.1")) {
		t.Fatal("freed an address the pool never gave out")
	}
	if got, _ := p.Allocate(); got != a {
		t.Fatalf("reuse got %v, want %v", got, a)
	}
}

func TestPoolIPv6Large(t *testing.T) {
	const n = 5000
	p, err := NewPool(netip.MustParsePrefix("2001:db8:1::/64"), n)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := p.Allocate()
	if first != netip.MustParseAddr("2001:db8:1::1000") || p.ServerAddr() != netip.MustParseAddr("2001:db8:1::1") {
		t.Fatalf("first %v server %v", first, p.ServerAddr())
	}
	all := []netip.Addr{first}
	for i := 1; i < n; i++ {
		a, err := p.Allocate()
		if err != nil {
			t.Fatalf("alloc %d: %v", i, err)
		}
		all = append(all, a)
	}
	if _, err := p.Allocate(); err == nil {
		t.Fatal("pool larger than max")
	}
	for _, a := range all {
		if !p.Free(a) {
			t.Fatalf("free %v", a)
		}
	}
	if p.Available() != n {
		t.Fatalf("available %d", p.Available())
	}
}

func TestPoolAllocsO1(t *testing.T) {
	p, _ := NewPool(netip.MustParsePrefix("198.18.0.0/16"), 65000)
	allocs := testing.AllocsPerRun(1000, func() {
		a, _ := p.Allocate()
		p.Free(a)
	})
	if allocs != 0 {
		t.Fatalf("allocate+free allocates %v times", allocs)
	}
}

func BenchmarkPoolAllocateFree(b *testing.B) {
	p, _ := NewPool(netip.MustParsePrefix("2001:db8::/64"), 100000)
	for i := 0; i < 50000; i++ {
		p.Allocate()
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		a, _ := p.Allocate()
		p.Free(a)
	}
}

func TestPoolRejectsTinyPrefixes(t *testing.T) {
	for _, s := range []string{"198.18.0.0/31", "2001:db8::/120"} {
		if _, err := NewPool(netip.MustParsePrefix(s), 10); err == nil {
			t.Errorf("%s accepted", s)
		}
	}
}
