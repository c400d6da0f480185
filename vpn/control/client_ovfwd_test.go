package control_test

import (
	"context"
	"encoding/binary"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/control/controltest"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// echoServer is an in-process ovfwd server in kernel-socket mode whose
// "data plane" opens client packets with the keys the control plane
// installed and answers ICMP echo requests through the tunnel.
type echoServer struct {
	t    *testing.T
	srv  *control.Server
	dp   *controltest.DataPlane
	conn net.PacketConn
	log  *syncLog
	done chan error
	once sync.Once

	mu     sync.Mutex
	sent   map[[2]uint32]uint32 // (peer, key id) → last packet id sent
	keyIDs map[uint8]int        // data packets received per key id
	opened atomic.Int64
	failed atomic.Int64
}

func startEchoServer(t *testing.T, dir, listen string, tweak func(*control.Config)) *echoServer {
	t.Helper()
	ld, err := pki.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{t: t, dp: controltest.New(), sent: map[[2]uint32]uint32{}, keyIDs: map[uint8]int{}, done: make(chan error, 1)}
	log := newSyncLog(t)
	e.log = log
	cfg := control.Config{
		Certificate: ld.Certificate, ClientCAs: ld.ClientCAs,
		Wrap: control.WrapTLSCrypt, WrapKey: ld.StaticKey,
		Pool4: netip.MustParsePrefix("198.18.71.0/24"), Pool6: netip.MustParsePrefix("2001:db8:71::/64"),
		Routes: []netip.Prefix{netip.MustParsePrefix("198.18.72.0/24")},
		Ping:   time.Second, PingRestart: 5 * time.Second,
		Logf:       log.logf,
		DataPacket: e.data,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	if e.srv, err = control.NewServer(cfg, e.dp); err != nil {
		t.Fatal(err)
	}
	if e.conn, err = net.ListenPacket("udp", listen); err != nil {
		e.srv.Close()
		t.Fatal(err)
	}
	go func() { e.done <- e.srv.Serve(e.conn) }()
	t.Cleanup(e.close)
	return e
}

func (e *echoServer) addr() string { return e.conn.LocalAddr().String() }

func (e *echoServer) close() {
	e.once.Do(func() {
		e.srv.Close()
		select {
		case <-e.done:
		case <-time.After(5 * time.Second):
			e.t.Error("Serve did not return after Close")
		}
	})
}

func (e *echoServer) data(src netip.AddrPort, pkt []byte) {
	if len(pkt) < 4 {
		e.failed.Add(1)
		return
	}
	peerID := binary.BigEndian.Uint32(pkt) & 0xffffff
	kid := pkt[0] & 7
	ps, ok := e.dp.Peer(peerID)
	km, okKey := ps.Keys[kid]
	if !ok || !okKey {
		e.failed.Add(1)
		return
	}
	dk, err := vpn.NewDataKey(&km)
	if err != nil {
		e.failed.Add(1)
		return
	}
	plain, _, err := dk.Open(append(make([]byte, 0, len(pkt)+vpn.TagLen), pkt...))
	if err != nil {
		e.failed.Add(1)
		return
	}
	e.opened.Add(1)
	e.dp.Touch(peerID, time.Now(), time.Time{})
	e.mu.Lock()
	e.keyIDs[kid]++
	e.mu.Unlock()
	reply := echoReply(plain)
	if reply == nil {
		return
	}
	txKM := ps.Keys[ps.Primary]
	tx, err := vpn.NewDataKey(&txKM)
	if err != nil {
		e.failed.Add(1)
		return
	}
	e.mu.Lock()
	k := [2]uint32{peerID, uint32(ps.Primary)}
	e.sent[k]++
	id := e.sent[k]
	e.mu.Unlock()
	out := tx.Seal(nil, peerID, id, reply)
	_, _ = e.conn.WriteTo(out, net.UDPAddrFromAddrPort(src))
}

func (e *echoServer) packetsOnKey(kid uint8) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.keyIDs[kid]
}

// icmpEcho builds an IPv4 ICMP echo request.
func icmpEcho(src, dst netip.Addr, id, seq uint16, payload []byte) []byte {
	p := make([]byte, 28+len(payload))
	p[0], p[8], p[9] = 0x45, 64, 1
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	s4, d4 := src.As4(), dst.As4()
	copy(p[12:], s4[:])
	copy(p[16:], d4[:])
	binary.BigEndian.PutUint16(p[10:], ^netns.Checksum(p[:20]))
	p[20] = 8
	binary.BigEndian.PutUint16(p[24:], id)
	binary.BigEndian.PutUint16(p[26:], seq)
	copy(p[28:], payload)
	binary.BigEndian.PutUint16(p[22:], ^netns.Checksum(p[20:]))
	return p
}

// echoReply turns an IPv4 ICMP echo request into its reply, or returns nil.
func echoReply(req []byte) []byte {
	if len(req) < 28 || req[0] != 0x45 || req[9] != 1 || req[20] != 8 || netns.Checksum(req[:20]) != 0xffff || netns.Checksum(req[20:]) != 0xffff {
		return nil
	}
	p := append([]byte(nil), req...)
	copy(p[12:16], req[16:20])
	copy(p[16:20], req[12:16])
	p[20] = 0
	p[22], p[23] = 0, 0
	binary.BigEndian.PutUint16(p[22:], ^netns.Checksum(p[20:]))
	return p
}

// ping sends an echo request to dst through c and waits for the matching
// reply.
func ping(t *testing.T, c *control.Client, dst netip.Addr, seq uint16) {
	t.Helper()
	p := c.Pushed()
	if p == nil {
		t.Fatal("client not connected")
	}
	req := icmpEcho(p.IPv4.Addr(), dst, 0x4242, seq, []byte("ovfwd client echo"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for try := 0; try < 5; try++ {
		if err := c.Send(req); err != nil {
			t.Fatalf("send: %v", err)
		}
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		for {
			got, err := c.Recv(rctx)
			if err != nil {
				break
			}
			if len(got) >= 28 && got[20] == 0 && binary.BigEndian.Uint16(got[26:]) == seq &&
				netip.AddrFrom4([4]byte(got[12:16])) == dst && netip.AddrFrom4([4]byte(got[16:20])) == p.IPv4.Addr() {
				rcancel()
				return
			}
		}
		rcancel()
	}
	t.Fatalf("no echo reply from %v (client stats %+v)", dst, c.Stats())
}

// clientProfile issues a client certificate and parses its .ovpn.
func clientProfile(t *testing.T, dir, name, remote string) control.ClientConfig {
	t.Helper()
	path, err := pki.Client(dir, name, remote)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := control.ParseProfile(text)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newPKI(t *testing.T) string {
	dir := t.TempDir()
	if err := pki.Init(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestClientOvfwdServer connects the client role to the server role over
// loopback UDP: it must get the pushed addresses, routes and peer-id, and
// an ICMP echo must make the round trip through the tunnel.
// dialEcho starts an echo server on a fresh PKI and connects client name
// to it (closed when the test ends).
func dialEcho(t *testing.T, name string) (*echoServer, *control.Client) {
	t.Helper()
	dir := newPKI(t)
	e := startEchoServer(t, dir, "127.0.0.1:0", nil)
	cfg := clientProfile(t, dir, name, e.addr())
	cfg.Logf = newSyncLog(t).logf
	return e, dial(t, cfg)
}

// dial connects cfg's client within 20 s (closed when the test ends).
func dial(t *testing.T, cfg control.ClientConfig) *control.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := control.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestClientOvfwdServer(t *testing.T) {
	e, c := dialEcho(t, "alice")
	p := c.Pushed()
	if p.IPv4 != netip.MustParsePrefix("198.18.71.2/24") || p.IPv6 != netip.MustParsePrefix("2001:db8:71::1000/64") ||
		p.Gateway4 != netip.MustParseAddr("198.18.71.1") || p.Gateway6 != netip.MustParseAddr("2001:db8:71::1") {
		t.Errorf("pushed addresses %v %v gw %v %v", p.IPv4, p.IPv6, p.Gateway4, p.Gateway6)
	}
	if len(p.Routes) != 1 || p.Routes[0] != netip.MustParsePrefix("198.18.72.0/24") {
		t.Errorf("pushed routes %v", p.Routes)
	}
	if p.Cipher != vpn.AES256GCM || !p.EKM || p.Ping != time.Second || p.PingRestart != 5*time.Second {
		t.Errorf("pushed cipher %v ekm %v ping %v/%v", p.Cipher, p.EKM, p.Ping, p.PingRestart)
	}
	ids := e.dp.Peers()
	if len(ids) != 1 || ids[0] != p.PeerID {
		t.Fatalf("server peers %v, client peer-id %d", ids, p.PeerID)
	}
	for seq := uint16(1); seq <= 3; seq++ {
		ping(t, c, p.Gateway4, seq)
	}
	// Keepalive: with ping 1 the client pings when idle (two within 10 s,
	// not 2.5 s: a loaded machine delays the client's timer).
	before := e.opened.Load()
	if !waitFor(10*time.Second, func() bool { return e.opened.Load() >= before+2 }) {
		t.Errorf("server opened %d packets while the client was idle, want ≥ 2 keepalives", e.opened.Load()-before)
	}
	if e.failed.Load() != 0 {
		t.Errorf("server failed to open %d client packets", e.failed.Load())
	}
}

// TestClientRenegotiation renegotiates from both sides; traffic must keep
// flowing and move to the new key ids.
func TestClientRenegotiation(t *testing.T) {
	for _, tc := range []struct {
		name        string
		server, cli time.Duration
	}{{"server", 2 * time.Second, 0}, {"client", 0, 2 * time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newPKI(t)
			e := startEchoServer(t, dir, "127.0.0.1:0", func(c *control.Config) {
				c.RenegSec = tc.server
				if tc.server == 0 {
					c.RenegSec = -1
				}
			})
			cfg := clientProfile(t, dir, "bob", e.addr())
			cfg.RenegSec = tc.cli
			c := dial(t, cfg)
			gw := c.Pushed().Gateway4
			deadline := time.Now().Add(15 * time.Second)
			for c.Stats().Renegs < 2 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if n := c.Stats().Renegs; n < 2 {
				t.Fatalf("client completed %d renegotiations, want 2 (stats %+v)", n, c.Stats())
			}
			// The server moves its transmit key once the client acked KM2;
			// give it a tick, then echo on the newest keys.
			time.Sleep(300 * time.Millisecond)
			ping(t, c, gw, 7)
			if e.packetsOnKey(2) == 0 {
				t.Errorf("no client data on key id 2")
			}
			if e.failed.Load() != 0 {
				t.Errorf("server failed to open %d client packets", e.failed.Load())
			}
			if c.Stats().RxBad != 0 {
				t.Errorf("client failed to open %d server packets", c.Stats().RxBad)
			}
		})
	}
}

// TestClientReconnects restarts the server on the same port: the client
// sees RESTART, reconnects by itself and passes traffic again. In the
// stalled variant the new server answers the reconnecting client's reset
// and then loses everything it sends (as when a server restarts between
// its reset reply and the client's TLS data): the client must start over
// with a new reset after handshakeSilence, not wait out the 60-second
// hand-window.
func TestClientReconnects(t *testing.T) {
	for _, stalled := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stalled"}[stalled], func(t *testing.T) {
			defer control.SetHandshakeSilence(2 * time.Second)()
			dir := newPKI(t)
			e := startEchoServer(t, dir, "127.0.0.1:0", nil)
			addr := e.addr()
			// Once armed: let the next hard reset through, then lose
			// everything the client sends until its next hard reset.
			var armed, resets atomic.Int32
			relay := udpRelay(t, addr, func(pkt []byte) bool {
				if armed.Load() == 0 {
					return false
				}
				if pkt[0]>>3 == 7 { // P_CONTROL_HARD_RESET_CLIENT_V2
					resets.Add(1)
					return false
				}
				return resets.Load() == 1
			})
			c := dial(t, clientProfile(t, dir, "carol", relay))
			if stalled {
				armed.Store(1)
			}
			e.close()
			if !waitFor(5*time.Second, func() bool { return !c.Connected() }) {
				t.Fatal("client still connected after the server closed")
			}
			e2 := startEchoServer(t, dir, addr, nil)
			start := time.Now()
			if !waitFor(15*time.Second, func() bool { return c.Connected() }) {
				t.Fatalf("client did not reconnect within 15 s: %+v, %d resets seen", c.Stats(), resets.Load())
			}
			if stalled && resets.Load() < 2 {
				t.Fatalf("reconnected with %d hard resets; the stalled handshake was not what was tested", resets.Load())
			}
			t.Logf("reconnected %v after the restart", time.Since(start).Round(100*time.Millisecond))
			if n := c.Stats().Connects; n != 2 {
				t.Errorf("client connected %d times, want 2", n)
			}
			ping(t, c, c.Pushed().Gateway4, 9)
			if len(e2.dp.Peers()) != 1 {
				t.Errorf("new server has peers %v", e2.dp.Peers())
			}
		})
	}
}

// TestClientPingRestart: a server that goes silent (no RESTART) is
// detected by the pushed ping-restart and the client reconnects.
func TestClientPingRestart(t *testing.T) {
	dir := newPKI(t)
	// A UDP relay in front of the server that can black-hole traffic.
	e := startEchoServer(t, dir, "127.0.0.1:0", func(c *control.Config) { c.PingRestart = 2 * time.Second })
	relay, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	var blackhole atomic.Bool
	srvAddr, _ := net.ResolveUDPAddr("udp", e.addr())
	up, err := net.DialUDP("udp", nil, srvAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	var client atomic.Pointer[net.Addr]
	go func() {
		b := make([]byte, 65536)
		for {
			n, from, err := relay.ReadFrom(b)
			if err != nil {
				return
			}
			client.Store(&from)
			if !blackhole.Load() {
				_, _ = up.Write(b[:n])
			}
		}
	}()
	go func() {
		b := make([]byte, 65536)
		for {
			n, err := up.Read(b)
			if err != nil {
				return
			}
			if to := client.Load(); to != nil && !blackhole.Load() {
				_, _ = relay.WriteTo(b[:n], *to)
			}
		}
	}()
	cfg := clientProfile(t, dir, "dave", relay.LocalAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := control.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	blackhole.Store(true)
	if !waitFor(6*time.Second, func() bool { return !c.Connected() }) {
		t.Fatal("client still connected 6 s into a black hole with ping-restart 2")
	}
	if err := c.Err(); err == nil {
		t.Error("no reason recorded for the lost connection")
	}
	blackhole.Store(false)
	if !waitFor(20*time.Second, func() bool { return c.Connected() }) {
		t.Fatalf("client did not reconnect: %+v", c.Stats())
	}
	ping(t, c, c.Pushed().Gateway4, 11)
}

// udpRelay forwards between one client and the server; drop decides per
// client→server datagram whether to lose it.
func udpRelay(t *testing.T, server string, drop func(pkt []byte) bool) string {
	t.Helper()
	relay, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvAddr, _ := net.ResolveUDPAddr("udp", server)
	up, err := net.DialUDP("udp", nil, srvAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close(); up.Close() })
	var client atomic.Pointer[net.Addr]
	go func() {
		b := make([]byte, 65536)
		for {
			n, from, err := relay.ReadFrom(b)
			if err != nil {
				return
			}
			client.Store(&from)
			if !drop(b[:n]) {
				_, _ = up.Write(b[:n])
			}
		}
	}()
	go func() {
		b := make([]byte, 65536)
		for {
			n, err := up.Read(b)
			if err != nil {
				return
			}
			if to := client.Load(); to != nil {
				_, _ = relay.WriteTo(b[:n], *to)
			}
		}
	}()
	return relay.LocalAddr().String()
}

// TestClientFirstAckLost loses the client's first packet after the
// server's stateless reset (the one that acks it and would create the
// session): the retransmission must ack the reset again, or a 2.6-style
// stateless server never creates the session.
func TestClientFirstAckLost(t *testing.T) {
	dir := newPKI(t)
	e := startEchoServer(t, dir, "127.0.0.1:0", nil)
	var dropped atomic.Int32
	addr := udpRelay(t, e.addr(), func(pkt []byte) bool {
		// The client acks the reset at once in a P_ACK_V1: lose it.
		return pkt[0]>>3 == 5 && dropped.CompareAndSwap(0, 1)
	})
	cfg := clientProfile(t, dir, "frank", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := control.Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("dial with the first ack lost: %v (server drops %v)", err, e.srv.Drops())
	}
	defer c.Close()
	if dropped.Load() != 1 {
		t.Fatal("the relay dropped nothing; nothing was tested")
	}
	t.Logf("server drops %v", e.srv.Drops())
	ping(t, c, c.Pushed().Gateway4, 1)
}

// TestClientCloseDeliversExit loses the EXIT that Close sends: Close must
// wait for the server's ack and so retransmit it, or the server keeps the
// session until ping-restart. (It slept 10 ms and left.)
func TestClientCloseDeliversExit(t *testing.T) {
	dir := newPKI(t)
	e := startEchoServer(t, dir, "127.0.0.1:0", nil)
	var armed atomic.Bool
	var dropped atomic.Int32
	addr := udpRelay(t, e.addr(), func(pkt []byte) bool {
		return armed.Load() && pkt[0]>>3 == 4 && dropped.CompareAndSwap(0, 1) // P_CONTROL_V1: the EXIT
	})
	c := dial(t, clientProfile(t, dir, "gina", addr))
	ping(t, c, c.Pushed().Gateway4, 1)
	armed.Store(true)
	c.Close()
	if dropped.Load() != 1 {
		t.Fatal("the relay dropped nothing; nothing was tested")
	}
	// The server acks the EXIT before its session logs it: wait for the
	// line a little (a lost EXIT would leave it absent until ping-restart).
	for i := 0; i < 100 && e.log.count("client sent EXIT") == 0; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if n := e.log.count("client sent EXIT"); n != 1 {
		t.Fatalf("server logged EXIT %d times within 5 s of Close, want 1", n)
	}
}

// TestClientConfigFromFiles loads the files a [[vpn.client]] names (the
// server's own pair stands in for a client certificate here).
func TestClientConfigFromFiles(t *testing.T) {
	dir := newPKI(t)
	ld, err := pki.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	remote := netip.MustParseAddrPort("198.18.0.1:1194")
	cfg, err := control.ClientConfigFromFiles(remote, dir+"/"+pki.CACertFile, dir+"/"+pki.ServerCertFile, dir+"/"+pki.ServerKeyFile, dir+"/"+pki.TLSCryptFile)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Remote != remote || cfg.Wrap != control.WrapTLSCrypt || cfg.WrapKey != ld.StaticKey || cfg.RootCAs == nil || len(cfg.Certificate.Certificate) == 0 {
		t.Errorf("config %+v", cfg)
	}
	if _, err := control.ClientConfigFromFiles(remote, dir+"/"+pki.TLSCryptFile, dir+"/"+pki.ServerCertFile, dir+"/"+pki.ServerKeyFile, ""); err == nil {
		t.Error("a CA file without a certificate was accepted")
	}
}

// TestClientBatcher sends a batch of echo requests with one sendmmsg; the
// server must open every one and answer each.
func TestClientBatcher(t *testing.T) {
	e, c := dialEcho(t, "gina")
	p := c.Pushed()
	const n = 16
	var pkts [][]byte
	for i := range n {
		pkts = append(pkts, icmpEcho(p.IPv4.Addr(), p.Gateway4, 0x4243, uint16(1000+i), []byte("batch")))
	}
	b := c.NewBatcher(n, 1500)
	if sent, err := b.Send(pkts); sent != n || err != nil {
		t.Fatalf("batch send: %d of %d, %v", sent, n, err)
	}
	got := map[uint16]bool{}
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	for len(got) < n {
		r, err := c.Recv(rctx)
		if err != nil {
			t.Fatalf("got %d of %d echo replies: %v (server failed %d)", len(got), n, err, e.failed.Load())
		}
		if len(r) >= 28 && r[20] == 0 {
			got[binary.BigEndian.Uint16(r[26:])] = true
		}
	}
	if e.failed.Load() != 0 {
		t.Errorf("server failed to open %d packets", e.failed.Load())
	}
	if _, err := b.Send(make([][]byte, n+1)); err == nil {
		t.Error("an oversized batch was accepted")
	}
}

// TestClientRenegotiatesBeforeWrap: a transmit packet id past
// PACKET_ID_WRAP_TRIGGER (0xFF000000) starts a renegotiation, and traffic
// continues on the new key.
func TestClientRenegotiatesBeforeWrap(t *testing.T) {
	dir := newPKI(t)
	e := startEchoServer(t, dir, "127.0.0.1:0", func(c *control.Config) { c.RenegSec = -1 })
	cfg := clientProfile(t, dir, "hank", e.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := control.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ping(t, c, c.Pushed().Gateway4, 1)
	if c.Stats().Renegs != 0 {
		t.Fatal("renegotiated before the packet id moved")
	}
	c.SkipPacketIDs(0xFF000000)
	if !waitFor(10*time.Second, func() bool { return c.Stats().Renegs == 1 }) {
		t.Fatalf("no renegotiation near the packet-id wrap: %+v", c.Stats())
	}
	time.Sleep(300 * time.Millisecond)
	ping(t, c, c.Pushed().Gateway4, 2)
	if e.packetsOnKey(1) == 0 {
		t.Error("no data on the renegotiated key")
	}
}
