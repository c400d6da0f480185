package nat

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"
	"unsafe"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

// fill creates n UDP sessions: 1000 inside endpoints (100 clients × 10
// ports) × n/1000 remotes, the shape of busy clients talking to many hosts.
func fill(tb testing.TB, t *Table, n int) {
	pkt := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
	clean := append([]byte(nil), pkt...)
	for i := range n {
		copy(pkt, clean)
		binary.BigEndian.PutUint32(pkt[12:], a4(inA)&^0xff|uint32(2+i%100))
		binary.BigEndian.PutUint16(pkt[20:], uint16(5000+(i/100)%10))
		binary.BigEndian.PutUint32(pkt[16:], 0xc6130000|uint32(i/1000)) // 198.19.x.y
		pkt[10], pkt[11] = 0, 0
		c := csum.Checksum(pkt[:20])
		pkt[10], pkt[11] = byte(c>>8), byte(c)
		if v, _ := t.Out(pkt, 20, 1); v != Done {
			tb.Fatalf("session %d: %v", i, v)
		}
	}
}

// TestMillionSessionsFitTheDefault: the default bound holds 1 M sessions
// on one worker, at the documented memory per session.
func TestMillionSessionsFitTheDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("1 M sessions")
	}
	c := testConfig()
	c.MaxSessions = 0 // the default
	// fill's clients hold ~10,500 sessions each, ~1,050 a mapping: past
	// the per-client bounds, which this test is not about.
	c.MaxSessionsPerClient, c.MaxSessionsPerMapping = 1<<20, 1<<20
	c.BlockSize, c.MaxBlocks = 64, 1
	c.Rules[0].PortHi = 65535
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	tb := newTestTable(t, c)
	fill(t, tb, DefaultMaxSessions)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	// The large tables live outside the Go heap (hugeSlice): count
	// both.
	per := float64(m1.HeapAlloc-m0.HeapAlloc+uint64(tb.mapped)) / DefaultMaxSessions
	t.Logf("%d sessions: %.0f bytes/session (%d MiB of heap, %d MiB of huge-page tables; session %d B, mapping %d B, index slot %d B)",
		DefaultMaxSessions, per, (m1.HeapAlloc-m0.HeapAlloc)>>20, tb.mapped>>20, unsafe.Sizeof(session{}), unsafe.Sizeof(mapping{}), 8)
	if runtime.GOOS == "linux" && tb.mapped == 0 {
		t.Errorf("the tables are not on huge-page mappings")
	}
	if per > 200 {
		t.Fatalf("%.0f bytes per session, want at most 200", per)
	}
	tb.Refresh(tb.k, 1000e9)
	tb.Publish()
	if s := tb.Stats(); s.Sessions[SessionsUDP] != DefaultMaxSessions {
		t.Fatalf("%d sessions", s.Sessions[SessionsUDP])
	}
	p := ipPacket(netip.MustParseAddr("10.8.0.200"), remote, protoUDP, udp(1, 2, "x"))
	if v, _ := tb.Out(p, 20, 1); v != DropTableFull {
		t.Fatalf("session past the bound: %v", v)
	}
}

// TestSessionLayout: a session is 32 bytes, two to a cache line (an
// established flow's outbound packet reads one line), and each carries
// the checksum difference of its own address change.
func TestSessionLayout(t *testing.T) {
	if n := unsafe.Sizeof(session{}); n != 32 {
		t.Fatalf("session is %d bytes, want 32", n)
	}
	c := testConfig()
	c.MaxSessions, c.BlockSize, c.MaxBlocks = 1<<12, 64, 1
	c.Rules[0].PortHi = 65535
	tb := newTestTable(t, c)
	fill(t, tb, 2000)
	n := 0
	for i := range tb.sess {
		if s := &tb.sess[i]; s.m != 0 {
			n++
			if in, out := uint32(s.addrs), s.out; s.dOut != csum.Fold16(csum.Diff32(in, out)) || out == in {
				t.Fatalf("session %d: %+v: dOut %#x", i, *s, s.dOut)
			}
		}
	}
	if n != 2000 {
		t.Fatalf("%d live sessions, want 2000", n)
	}
}

// BenchmarkOut100k: the translation of a packet of one of 100,000 live
// sessions, in arrival order (what the table alone costs, without the
// engine around it); bytes/session is the table's heap per session.
func BenchmarkOut100k(b *testing.B) {
	c := testConfig()
	c.MaxSessions, c.BlockSize, c.MaxBlocks = 1<<17, 64, 1
	c.Rules[0].PortHi = 65535
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	tb := newTestTable(b, c)
	const n = 100_000
	fill(b, tb, n)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	pkts := make([][]byte, 4096)
	for i := range pkts {
		j := (i * 7919) % n
		p := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
		binary.BigEndian.PutUint32(p[12:], a4(inA)&^0xff|uint32(2+j%100))
		binary.BigEndian.PutUint16(p[20:], uint16(5000+(j/100)%10))
		binary.BigEndian.PutUint32(p[16:], 0xc6130000|uint32(j/1000))
		pkts[i] = p
	}
	clean := make([][]byte, len(pkts))
	for i, p := range pkts {
		clean[i] = append([]byte(nil), p...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		k := i & (len(pkts) - 1)
		copy(pkts[k], clean[k])
		if v, _ := tb.Out(pkts[k], 20, 1); v != Done {
			b.Fatal(v)
		}
		i++
	}
	b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc+uint64(tb.mapped))/float64(c.MaxSessions), "bytes/session")
}

// BenchmarkOut100kBatched is BenchmarkOut100k the way the worker runs it:
// 64 packets probed and their index slots prefetched, their records found
// and prefetched together, then
// translated with the hints (ns/op is per packet).
func BenchmarkOut100kBatched(b *testing.B) {
	c := testConfig()
	c.MaxSessions, c.BlockSize, c.MaxBlocks = 1<<17, 64, 1
	c.Rules[0].PortHi = 65535
	tb := newTestTable(b, c)
	const n = 100_000
	fill(b, tb, n)
	pkts := make([][]byte, 4096)
	clean := make([][]byte, len(pkts))
	for i := range pkts {
		j := (i * 7919) % n
		p := ipPacket(inA, remote, protoUDP, udp(5000, 53, "x"))
		binary.BigEndian.PutUint32(p[12:], a4(inA)&^0xff|uint32(2+j%100))
		binary.BigEndian.PutUint16(p[20:], uint16(5000+(j/100)%10))
		binary.BigEndian.PutUint32(p[16:], 0xc6130000|uint32(j/1000))
		pkts[i], clean[i] = p, append([]byte(nil), p...)
	}
	var probes, slots [64]uint64
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		base := (i * 64) & (len(pkts) - 1)
		for k := range 64 {
			copy(pkts[base+k], clean[base+k])
			probes[k] = tb.Prefetch(pkts[base+k], 20)
		}
		slots = probes
		tb.Touch(slots[:])
		for k := range 64 {
			if v, _ := tb.OutHint(pkts[base+k], 20, 1, slots[k]); v != Done {
				b.Fatal(v)
			}
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/pkt")
}
