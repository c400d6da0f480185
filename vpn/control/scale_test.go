package control

import (
	"context"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn/statickey"
)

// multiRig is one server and many in-process clients, each at its own
// address, over lossless asynchronous links.
type multiRig struct {
	srv  *Server
	dp   *memDP
	p    *testPKI
	key  *statickey.Key
	mu   sync.Mutex
	cli  map[netip.AddrPort]*testClient
	stop chan struct{}

	upSend func(from netip.AddrPort) func([]byte)
}

func newMultiRig(tb testing.TB, maxPeers int) *multiRig {
	m := &multiRig{dp: newMemDP(), p: newTestPKI(tb), key: testStaticKey(), cli: map[netip.AddrPort]*testClient{}, stop: make(chan struct{})}
	type addressed struct {
		to  netip.AddrPort
		pkt []byte
	}
	downCh := make(chan addressed, 4096)
	upCh := make(chan addressed, 4096)
	srv, err := NewServer(Config{
		Certificate: m.p.server, ClientCAs: m.p.pool, Wrap: WrapTLSCrypt, WrapKey: *m.key,
		Pool4: netip.MustParsePrefix("198.18.64.0/18"), Pool6: netip.MustParsePrefix("2001:db8:64::/64"),
		MaxPeers: maxPeers, MaxHalfOpen: maxPeers, HandshakeRate: 1e6, HandshakeBurst: 1e6,
		DuplicateCN: true, // every client here shares one certificate
		Send: func(dst netip.AddrPort, pkt []byte) error {
			downCh <- addressed{dst, append([]byte(nil), pkt...)}
			return nil
		},
	}, m.dp)
	if err != nil {
		tb.Fatal(err)
	}
	m.srv = srv
	go func() {
		for a := range downCh {
			m.mu.Lock()
			c := m.cli[a.to]
			m.mu.Unlock()
			if c != nil {
				c.handle(a.pkt)
			}
		}
	}()
	go func() {
		for a := range upCh {
			srv.HandlePacket(a.to, a.pkt)
		}
	}()
	tb.Cleanup(func() {
		close(m.stop)
		srv.Close()
		close(downCh)
		close(upCh)
	})
	m.upSend = func(from netip.AddrPort) func([]byte) {
		return func(b []byte) { upCh <- addressed{from, append([]byte(nil), b...)} }
	}
	return m
}

// connect brings up client i and returns once it has its PUSH_REPLY.
func (m *multiRig) connect(tb testing.TB, i int) *testClient {
	addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 1194)
	c := newTestClient(tb, WrapTLSCrypt, m.key, m.p)
	c.send = m.upSend(addr)
	m.mu.Lock()
	m.cli[addr] = c
	m.mu.Unlock()
	go c.tick(m.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.mu.Lock()
	k := c.newKey(0, opControlHardResetClient2)
	c.flush(time.Now())
	c.mu.Unlock()
	if err := c.negotiate(ctx, k, 0); err != nil {
		tb.Fatalf("client %d: %v", i, err)
	}
	if _, err := k.readText("PUSH_REPLY"); err != nil {
		tb.Fatalf("client %d: %v", i, err)
	}
	return c
}

// 300 clients established at once: distinct peer ids and addresses, all
// installed in the data plane.
func TestManyPeers(t *testing.T) {
	const n = 300
	m := newMultiRig(t, 1000)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			m.connect(t, i)
		}(i)
	}
	wg.Wait()
	if m.srv.Sessions() != n {
		t.Fatalf("%d sessions", m.srv.Sessions())
	}
	m.dp.mu.Lock()
	defer m.dp.mu.Unlock()
	v4 := map[netip.Addr]bool{}
	for id, p := range m.dp.peers {
		if id != p.PeerID || v4[p.VPNIPv4] || len(m.dp.keys[id]) != 1 {
			t.Fatalf("peer %d: %+v", id, p)
		}
		v4[p.VPNIPv4] = true
	}
	if len(m.dp.peers) != n {
		t.Fatalf("%d data-plane peers", len(m.dp.peers))
	}
}

// BenchmarkHandshake measures complete handshakes (reset, TLS 1.3 with
// ECDSA client certificates, key method 2, EKM, push) per second with
// the client in the same process (so it also pays the client's half),
// and the server's heap per established idle session.
func BenchmarkHandshake(b *testing.B) {
	m := newMultiRig(b, b.N+16)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.connect(b, i)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "handshakes/s")
	if b.N >= 100 {
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		// Includes the in-process clients' state too: an upper bound.
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "heapB/session-both-ends")
	}
}
