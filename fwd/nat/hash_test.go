package nat

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// TestHashSpread: the flows of many clients to many remote hosts (what a
// NAT sees: the addresses' last octets vary together) spread over the
// session index about as well as random hashes would (linear probing at
// load 0.38: a mean displacement of ~0.3 slots; these seeds give
// 0.27-0.53, a hash that folds the last octets together ~4).
func TestHashSpread(t *testing.T) {
	for _, seed := range []uint64{0, 7, 0x1234567890abcdef, 0xdeadbeefcafebabe} {
		tb := &Table{seed: seed}
		x := newIndex(1 << 17)
		total, worst := 0, 0
		for h := range 100 {
			for sp := range 10 {
				for d := range 100 {
					k := skey{0xc6120000 | uint32(10+h), 0xc6130000 | uint32(1+d), uint16(5000 + sp), 53, protoUDP}
					v := tb.hashS(k)
					n := 0
					for i := v & x.mask; x.s[i] != 0; i = (i + 1) & x.mask {
						n++
					}
					x.insert(v, 0)
					total += n
					worst = max(worst, n)
				}
			}
		}
		if mean := float64(total) / 1e5; mean > 1 || worst > 64 {
			t.Errorf("seed %#x: mean displacement %.2f slots, worst %d", seed, mean, worst)
		}
	}
}

// TestTouchSessions: touchSessions (assembly on amd64, its Go definition
// elsewhere) and the Go definition both leave the hints worked out here
// from the sessions themselves, for hits, misses (empty slots and other
// tags after a probe), map probes and no probe, over a crowded index: a
// session's own probe names a session with its hash, a miss names none.
func TestTouchSessions(t *testing.T) {
	c := testConfig()
	c.MaxSessions, c.BlockSize, c.MaxBlocks = 1<<12, 64, 1
	c.Rules[0].PortHi = 65535
	tb := newTestTable(t, c)
	fill(t, tb, 2000)
	rng := rand.New(rand.NewPCG(1, 2))
	hs := make([]uint64, 0, 4096)
	own := make([]bool, 0, 4096) // the probe is a live session's
	for i := range tb.sess {
		if s := &tb.sess[i]; s.m != 0 {
			hs = append(hs, uint64(tb.hashS(s.key()))|probeSess)
			own = append(own, true)
		}
		switch i % 4 {
		case 0:
			hs = append(hs, uint64(rng.Uint32())|probeSess) // almost always a miss
		case 1:
			hs = append(hs, uint64(rng.Uint32())|probeMap)
		case 2:
			hs = append(hs, 0)
		}
		for len(own) < len(hs) {
			own = append(own, false)
		}
	}
	want := slices.Clone(hs)
	wantMaps := touchSessionsGo(tb.sidx.s, tb.sidx.mask, tb.sess, want)
	hits, maps := 0, 0
	for i, h := range hs {
		w := want[i]
		switch {
		case h&probeSess != 0:
			id := uint32(w)
			if w>>32 != (probeSess|probeDone)>>32 || own[i] && id == 0 ||
				id != 0 && (int(id) > len(tb.sess) || tb.hashS(tb.sess[id-1].key()) != uint32(h)) {
				t.Fatalf("probe %#x: the Go definition's hint %#x", h, w)
			}
			if id != 0 {
				hits++
			}
		case h&probeMap != 0:
			maps++
			fallthrough
		default:
			if w != h {
				t.Fatalf("probe %#x: the Go definition changed it to %#x", h, w)
			}
		}
	}
	if hits < 2000 || wantMaps != maps {
		t.Fatalf("the Go definition found %d sessions of 2000, %d map probes of %d", hits, wantMaps, maps)
	}
	for _, n := range []int{0, 1, 7, 64, len(hs)} {
		got := slices.Clone(hs[:n])
		if maps := touchSessions(tb.sidx.s, tb.sidx.mask, tb.sess, got); !slices.Equal(got, want[:n]) ||
			n == len(hs) && maps != wantMaps {
			t.Fatalf("%d probes: hints differ (maps %d, want %d)", n, maps, wantMaps)
		}
	}
}

// TestPrefetchIPv4: PrefetchIPv4 (assembly on amd64, PrefetchIP elsewhere)
// and PrefetchIP (its definition) both return the hint hintOf works out
// from the header and the rules, for packets from the first rule's
// sources of every protocol, to its outside address (map probes), and
// random ones, with NAT on and off (src0 matches nothing, no index).
func TestPrefetchIPv4(t *testing.T) {
	c := testConfig()
	c.Rules = append(c.Rules, Rule{Name: "lan", Sources: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")},
		Port: 2, Outside: []netip.Addr{netip.MustParseAddr("198.18.1.2")}, PortLo: 2048, PortHi: 4095})
	c.MaxBlocks = 4
	tb := newTestTable(t, c)
	rng := rand.New(rand.NewPCG(3, 4))
	kinds := map[uint64]int{}
	for _, tab := range []*Table{tb, NewTable(0, 1)} {
		rules := c.Rules
		if tab.k == nil {
			rules = nil
		}
		for i := range 100000 {
			var h [PrefetchLen]byte
			for j := range h {
				h[j] = byte(rng.Uint32())
			}
			src := rng.Uint32()
			switch i % 4 {
			case 0: // the first rule's sources
				src = src&0xff000000 | 0x00080a // 10.8.0.x, wire order
			case 1: // the second rule's
				src = src&0xffff0000 | 0x090a
			case 2: // to the outside address
				copy(h[16:], out1.AsSlice())
			}
			h[12], h[13], h[14], h[15] = byte(src), byte(src>>8), byte(src>>16), byte(src>>24)
			h[9] = [...]byte{protoTCP, protoUDP, 1, byte(rng.Uint32())}[i/4%4]
			want := hintOf(tab, rules, &h)
			if got := tab.PrefetchIP(&h); got != want {
				t.Fatalf("header % x: PrefetchIP's hint %#x, want %#x", h, got, want)
			}
			if got := PrefetchIPv4(tab, &h); got != want {
				t.Fatalf("header % x: hint %#x, want %#x", h, got, want)
			}
			kinds[want&(probeSess|probeMap)]++
		}
	}
	if kinds[probeSess] < 10000 || kinds[probeMap] < 5000 || kinds[0] < 100000 {
		t.Fatalf("hints of each kind: %v", kinds)
	}
}

// hintOf is the hint of an option-less IPv4 header worked out from its
// fields and the rules (nil: NAT off), not from the wire-order words
// PrefetchIP loads: a TCP or UDP packet from a rule's sources probes the
// session index by its 5-tuple, one to an outside address the mapping
// index by the outside endpoint, any other nothing.
func hintOf(tab *Table, rules []Rule, h *[PrefetchLen]byte) uint64 {
	proto := h[9]
	if proto != protoTCP && proto != protoUDP {
		return 0
	}
	src, dst := netip.AddrFrom4([4]byte(h[12:16])), netip.AddrFrom4([4]byte(h[16:20]))
	sport, dport := binary.BigEndian.Uint16(h[20:]), binary.BigEndian.Uint16(h[22:])
	for _, r := range rules {
		for _, p := range r.Sources {
			if p.Contains(src) {
				return uint64(tab.hashS(skey{a4(src), a4(dst), sport, dport, proto})) | probeSess
			}
		}
	}
	for _, r := range rules {
		if slices.Contains(r.Outside, dst) {
			return uint64(hashO(okey{a4(dst), dport, proto})) | probeMap
		}
	}
	return 0
}
