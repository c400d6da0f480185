package acl

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// naive is the reference matcher: the rules of the list in order, each
// field tested as the Rule's comment says.
func naive(l *List, k *Key) (Action, int) {
	addr := func(ps []netip.Prefix, a [16]byte) bool {
		if len(ps) == 0 {
			return true
		}
		var ad netip.Addr
		if k.V6 {
			ad = netip.AddrFrom16(a)
		} else {
			ad = netip.AddrFrom4([4]byte(a[:4]))
		}
		for _, p := range ps {
			if p.Contains(ad) {
				return true
			}
		}
		return false
	}
	port := func(rs []PortRange, v uint16) bool {
		if len(rs) == 0 {
			return true
		}
		for _, r := range rs {
			if r.Lo <= v && v <= r.Hi {
				return true
			}
		}
		return false
	}
	for i := range l.Rules {
		r := &l.Rules[i]
		if !addr(r.Src, k.Src) || !addr(r.Dst, k.Dst) {
			continue
		}
		if len(r.Protos) > 0 && !slices.Contains(r.Protos, k.Proto) {
			continue
		}
		if !k.HasL4 {
			if r.hasL4() {
				continue
			}
			return r.Action, i
		}
		dst := r.DstPorts
		if len(r.ICMPTypes) > 0 {
			dst = r.ICMPTypes
		}
		if !port(r.SrcPorts, k.SPort) || !port(dst, k.DPort) {
			continue
		}
		if k.Flags&r.FlagsMask != r.FlagsValue || r.FlagsAny != 0 && k.Flags&r.FlagsAny == 0 {
			continue
		}
		return r.Action, i
	}
	return l.Default, len(l.Rules)
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func key4(src, dst string, proto uint8, sp, dp uint16, flags uint8) *Key {
	k := &Key{Proto: proto, SPort: sp, DPort: dp, Flags: flags, HasL4: true}
	a, b := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(k.Src[:], a[:])
	copy(k.Dst[:], b[:])
	return k
}

func key6(src, dst string, proto uint8, sp, dp uint16, flags uint8) *Key {
	return &Key{V6: true, Src: netip.MustParseAddr(src).As16(), Dst: netip.MustParseAddr(dst).As16(),
		Proto: proto, SPort: sp, DPort: dp, Flags: flags, HasL4: true}
}

func TestMatchExamples(t *testing.T) {
	l := List{Name: "staff", Default: Deny, Rules: []Rule{
		{Name: "web", Dst: []netip.Prefix{pfx("198.18.10.0/24"), pfx("2001:db8:10::/48")}, Protos: []uint8{6}, DstPorts: []PortRange{{80, 80}, {443, 443}}},
		{Name: "dns", Dst: []netip.Prefix{pfx("198.18.10.53/32")}, Protos: []uint8{17}, DstPorts: []PortRange{{53, 53}}},
		{Name: "ping", Protos: []uint8{1, 58}, ICMPTypes: []PortRange{{8, 8}, {128, 128}}},
		{Name: "ret", Protos: []uint8{6}, FlagsAny: Established},
		{Name: "nossh", Dst: []netip.Prefix{pfx("198.18.0.0/15")}, Protos: []uint8{6}, DstPorts: []PortRange{{22, 22}}, Action: Reject},
	}}
	r := Compile([]List{{Name: "empty", Default: Allow}, l})
	for _, c := range []struct {
		k    *Key
		act  Action
		rule int
	}{
		{key4("198.18.1.2", "198.18.10.7", 6, 40000, 443, TCPSyn), Allow, 0},
		{key6("2001:db8:1::2", "2001:db8:10::7", 6, 40000, 80, TCPSyn), Allow, 0},
		{key6("2001:db8:1::2", "2001:db8:11::7", 6, 40000, 80, TCPSyn), Deny, 5},
		{key4("198.18.1.2", "198.18.10.53", 17, 40000, 53, 0), Allow, 1},
		{key4("198.18.1.2", "198.18.10.54", 17, 40000, 53, 0), Deny, 5},
		{key4("198.18.1.2", "198.18.10.54", 1, 0, 8, 0), Allow, 2},
		{key4("198.18.1.2", "198.18.10.54", 1, 0, 13, 0), Deny, 5},
		{key4("198.18.1.2", "198.18.10.54", 6, 22, 40000, TCPAck), Allow, 3},
		{key4("198.18.1.2", "198.18.10.54", 6, 40000, 22, TCPSyn), Reject, 4},
	} {
		act, id := r.Match(1, c.k)
		if act != c.act || id != c.rule+1 { // list 0 has only its default (number 0); list 1 starts at 1
			t.Errorf("%+v: got %v rule %d, want %v rule %d", c.k, act, id, c.act, c.rule+1)
		}
	}
	if act, id := r.Match(0, key4("198.18.1.2", "198.18.10.7", 6, 1, 2, 0)); act != Allow || id != 0 {
		t.Errorf("empty list: %v %d", act, id)
	}
	if info := r.Info(6); !info.Default || info.List != "staff" {
		t.Errorf("default info %+v", info)
	}
}

// randList builds a list of n rules from few distinct bounds, so that
// rules overlap and packets hit them.
func randList(rng *rand.Rand, n int) List {
	v4 := []string{"198.18.0.0/15", "198.18.1.0/24", "198.18.1.128/25", "198.18.1.7/32", "198.19.0.0/16", "0.0.0.0/0", "198.18.2.0/23"}
	v6 := []string{"2001:db8::/32", "2001:db8:1::/48", "2001:db8:1::7/128", "::/0", "2001:db8:1:0:8000::/65", "2001:db8:2::/47"}
	pick := func() []netip.Prefix {
		var ps []netip.Prefix
		for range rng.IntN(3) {
			if rng.IntN(2) == 0 {
				ps = append(ps, pfx(v4[rng.IntN(len(v4))]))
			} else {
				ps = append(ps, pfx(v6[rng.IntN(len(v6))]))
			}
		}
		return ps
	}
	ports := func() []PortRange {
		var rs []PortRange
		for range rng.IntN(3) {
			lo := uint16(rng.IntN(6) * 20)
			rs = append(rs, PortRange{lo, lo + uint16(rng.IntN(30))})
		}
		if rng.IntN(8) == 0 {
			rs = append(rs, PortRange{65530, 65535})
		}
		return rs
	}
	l := List{Name: "r", Default: Action(rng.IntN(3))}
	for range n {
		r := Rule{Src: pick(), Dst: pick(), Action: Action(rng.IntN(3))}
		switch rng.IntN(5) {
		case 0:
		case 1:
			r.Protos = []uint8{6}
			r.SrcPorts, r.DstPorts = ports(), ports()
			if rng.IntN(2) == 0 {
				r.FlagsAny = Established
			} else {
				r.FlagsMask, r.FlagsValue = TCPSyn|TCPAck, uint8(rng.IntN(2))*TCPSyn
			}
		case 2:
			r.Protos = []uint8{17}
			r.SrcPorts, r.DstPorts = ports(), ports()
		case 3:
			r.Protos = []uint8{1, 58}
			r.ICMPTypes = ports()
		default:
			r.Protos = []uint8{uint8(rng.IntN(3)), 47}
		}
		l.Rules = append(l.Rules, r)
	}
	return l
}

func randKey(rng *rand.Rand) *Key {
	k := &Key{V6: rng.IntN(2) == 0, Proto: []uint8{1, 6, 17, 47, 58, 0, 2}[rng.IntN(7)], HasL4: rng.IntN(6) != 0}
	if k.V6 {
		for _, a := range []*[16]byte{&k.Src, &k.Dst} {
			*a = netip.MustParseAddr("2001:db8::").As16()
			a[5] = byte(rng.IntN(3))
			a[8] = byte(rng.IntN(2)) << 7
			a[15] = byte(rng.IntN(9))
			if rng.IntN(10) == 0 {
				binary.BigEndian.PutUint64(a[:8], rng.Uint64())
			}
		}
	} else {
		for _, a := range []*[16]byte{&k.Src, &k.Dst} {
			binary.BigEndian.PutUint32(a[:4], 198<<24|uint32(18+rng.IntN(2))<<16|uint32(rng.IntN(4))<<8|uint32(rng.IntN(256)))
			if rng.IntN(10) == 0 {
				binary.BigEndian.PutUint32(a[:4], rng.Uint32())
			}
		}
	}
	k.SPort, k.DPort = uint16(rng.IntN(130)), uint16(rng.IntN(130))
	if rng.IntN(10) == 0 {
		k.DPort = uint16(65530 + rng.IntN(6))
	}
	k.Flags = uint8(rng.IntN(64))
	return k
}

func checkAgainstNaive(t *testing.T, seed1, seed2 uint64, rules, keys int) {
	rng := rand.New(rand.NewPCG(seed1, seed2))
	lists := []List{randList(rng, rules), randList(rng, rng.IntN(rules+1)), randList(rng, 70+rng.IntN(70))}
	r := Compile(lists)
	var c Cache
	c.Reset(r)
	seen := make([]*Key, 0, keys)
	for j := range keys {
		k := randKey(rng)
		if j%3 == 2 { // a key again: answered by the cache, unless evicted
			k = seen[rng.IntN(len(seen))]
		}
		seen = append(seen, k)
		for li := range lists {
			wa, wi := naive(&lists[li], k)
			ga, gi := r.Match(li, k)
			wi += r.first[li]
			if ga != wa || gi != wi {
				t.Fatalf("list %d key %+v: got %v rule %d, naive %v rule %d", li, k, ga, gi, wa, wi)
			}
			ca, ci := cachedMatch(&c, li, k)
			if ca != wa || ci != wi {
				t.Fatalf("list %d key %+v: cache %v rule %d, naive %v rule %d", li, k, ca, ci, wa, wi)
			}
		}
	}
	if c.Hits == 0 {
		t.Fatal("the cache answered nothing")
	}
}

func TestMatchAgainstNaive(t *testing.T) {
	for s := range uint64(20) {
		checkAgainstNaive(t, s, 7, 30, 2000)
	}
}

func FuzzMatchAgainstNaive(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint8(10))
	f.Add(uint64(3), uint64(4), uint8(200))
	f.Fuzz(func(t *testing.T, a, b uint64, n uint8) {
		checkAgainstNaive(t, a, b, int(n), 300)
	})
}

func TestMatchAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := Compile([]List{randList(rng, 100)})
	k := randKey(rng)
	if n := testing.AllocsPerRun(1000, func() { r.Match(0, k) }); n != 0 {
		t.Fatalf("%v allocs per match", n)
	}
}

func cachedMatch(c *Cache, li int, k *Key) (Action, int) {
	var sp, dp uint16
	var fl uint8
	if k.HasL4 {
		sp, dp, fl = k.SPort, k.DPort, k.Flags
	}
	if k.V6 {
		return c.Match6(li, &k.Src, &k.Dst, k.Proto, k.HasL4, sp, dp, fl)
	}
	return c.Match4(li, binary.BigEndian.Uint32(k.Src[:4]), binary.BigEndian.Uint32(k.Dst[:4]), k.Proto, k.HasL4, sp, dp, fl)
}

// TestCacheEmptiedOnReset: a decision of the old rules is not an answer
// for the new ones.
func TestCacheEmptiedOnReset(t *testing.T) {
	allow := Compile([]List{{Default: Allow}})
	deny := Compile([]List{{Default: Deny}})
	var c Cache
	c.Reset(allow)
	k := key4("198.18.0.1", "198.18.1.1", 17, 1, 2, 0)
	if a, _ := cachedMatch(&c, 0, k); a != Allow {
		t.Fatal(a)
	}
	c.Reset(deny)
	if a, _ := cachedMatch(&c, 0, k); a != Deny {
		t.Fatalf("after Reset: %v", a)
	}
}
