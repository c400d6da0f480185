package control

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
)

// gateRig is a server whose replies are captured, and a client-role
// wrapper to build packets for it.
type gateRig struct {
	srv  *Server
	cli  *wrapper
	mu   sync.Mutex
	sent [][]byte
}

func newGateRig(t *testing.T, tweak func(*Config)) *gateRig {
	p := newTestPKI(t)
	g := &gateRig{}
	cfg := Config{Certificate: p.server, ClientCAs: p.pool, Wrap: WrapTLSCrypt, WrapKey: *testStaticKey(),
		Send: func(_ netip.AddrPort, b []byte) error {
			g.mu.Lock()
			g.sent = append(g.sent, append([]byte(nil), b...))
			g.mu.Unlock()
			return nil
		}}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := NewServer(cfg, newMemDP())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	g.srv = srv
	g.cli, _ = newWrapper(WrapTLSCrypt, testStaticKey(), 0, KeyDirNone, false)
	return g
}

func (g *gateRig) reset(src netip.AddrPort, sid [8]byte, rid uint64) {
	p := packet{op: opControlHardResetClient2}
	g.srv.HandlePacket(src, g.cli.wrap(nil, opControlHardResetClient2<<opShift, &sid, rid, p.appendBody(nil)))
}

func (g *gateRig) lastSent() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.sent) == 0 {
		return nil
	}
	return g.sent[len(g.sent)-1]
}

// completes sends the packet that completes the three-way handshake:
// an ack of the server's msg 0 naming cookie.
func (g *gateRig) complete(src netip.AddrPort, sid, cookie [8]byte) {
	p := packet{op: opAckV1, nAcks: 1, peerSID: cookie}
	g.srv.HandlePacket(src, g.cli.wrap(nil, opAckV1<<opShift, &sid, 2|1<<40, p.appendBody(nil)))
}

// serverSID unwraps the server's reset reply and returns its session id.
func (g *gateRig) serverSID(t *testing.T, reply []byte, clientSID [8]byte) [8]byte {
	t.Helper()
	if reply == nil {
		t.Fatal("no reply")
	}
	_, body, err := g.cli.unwrap(reply)
	if err != nil {
		t.Fatal(err)
	}
	var p packet
	p.op = reply[0] >> opShift
	if err := p.parseBody(body); err != nil || p.op != opControlHardResetServer2 || !p.hasAck(0) || p.peerSID != clientSID || p.msgID != 0 {
		t.Fatalf("reply %+v %v", p, err)
	}
	var sid [8]byte
	copy(sid[:], reply[1:])
	return sid
}

func TestGatesBeforeState(t *testing.T) {
	g := newGateRig(t, nil)
	src := netip.MustParseAddrPort("198.18.0.2:5000")
	sid := [8]byte{9, 9, 9, 9, 9, 9, 9, 9}

	// Garbage and wrong-key packets: dropped, counted, no reply, no state.
	other := *testStaticKey()
	other[128] ^= 1 // the client sends with key[1]
	other[192] ^= 1
	bad, _ := newWrapper(WrapTLSCrypt, &other, 0, KeyDirNone, false)
	p := packet{op: opControlHardResetClient2}
	g.srv.HandlePacket(src, bad.wrap(nil, 0x38, &sid, 1<<32|1, p.appendBody(nil)))
	g.srv.HandlePacket(src, []byte{})
	g.srv.HandlePacket(src, []byte{0x08, 1, 2})       // key-method 1
	g.srv.HandlePacket(src, []byte{0x38, 1, 2})       // short
	g.srv.HandlePacket(src, []byte{0xf8, 1, 2, 3, 4}) // opcode 31
	g.srv.HandlePacket(src, []byte{0x48, 0, 0, 0, 1}) // data, no handler
	for r, want := range map[DropReason]uint64{DropWrapAuth: 1, DropShort: 2, DropUnsupported: 1, DropOpcode: 1, DropDataNoHandler: 1} {
		if got := g.srv.Drop(r); got != want {
			t.Errorf("drop %v = %d, want %d", r, got, want)
		}
	}
	if g.lastSent() != nil || g.srv.Sessions() != 0 {
		t.Fatal("invalid packets produced a reply or state")
	}

	// A valid reset gets a stateless reply.
	g.reset(src, sid, 1<<32|1)
	cookie := g.serverSID(t, g.lastSent(), sid)
	if g.srv.Sessions() != 0 {
		t.Fatal("reset created state")
	}
	// The same reset again gets the same cookie (retransmission).
	g.reset(src, sid, 1<<32|2)
	if c2 := g.serverSID(t, g.lastSent(), sid); c2 != cookie {
		t.Fatal("cookie not stable")
	}
	// A wrong cookie, or the right cookie from another address, is refused.
	wrong := cookie
	wrong[7] ^= 1
	g.complete(src, sid, wrong)
	g.complete(netip.MustParseAddrPort("198.18.0.3:5000"), sid, cookie)
	if g.srv.Drop(DropBadCookie) != 2 || g.srv.Sessions() != 0 {
		t.Fatalf("bad cookies: drops %v, sessions %d", g.srv.Drops(), g.srv.Sessions())
	}
	g.complete(src, sid, cookie)
	if g.srv.Sessions() != 1 {
		t.Fatalf("valid cookie did not create a session: %v", g.srv.Drops())
	}
	// Replaying the completing packet is a replay now.
	g.complete(src, sid, cookie)
	if g.srv.Drop(DropReplay) != 1 {
		t.Errorf("replay not dropped: %v", g.srv.Drops())
	}
}

func TestGatesRateAndBounds(t *testing.T) {
	g := newGateRig(t, func(c *Config) {
		c.HandshakeRate, c.HandshakeBurst = 0.001, 3
		c.MaxHalfOpen = 2
	})
	var cookies [][8]byte
	var srcs []netip.AddrPort
	for i := 0; i < 4; i++ {
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 1, byte(i)}), 1000)
		sid := [8]byte{byte(i + 1)}
		g.mu.Lock()
		n := len(g.sent)
		g.mu.Unlock()
		g.reset(src, sid, 1<<32|1)
		g.mu.Lock()
		replied := len(g.sent) > n
		g.mu.Unlock()
		if replied != (i < 3) {
			t.Fatalf("reset %d: replied=%v", i, replied)
		}
		if replied {
			cookies = append(cookies, g.serverSID(t, g.lastSent(), sid))
			srcs = append(srcs, src)
		}
	}
	if g.srv.Drop(DropRateLimit) != 1 {
		t.Errorf("rate limit drops %d", g.srv.Drop(DropRateLimit))
	}
	for i := range cookies {
		g.complete(srcs[i], [8]byte{byte(i + 1)}, cookies[i])
	}
	if g.srv.Sessions() != 2 || g.srv.Drop(DropHalfOpen) != 1 {
		t.Errorf("half-open bound: %d sessions, drops %v", g.srv.Sessions(), g.srv.Drops())
	}
}

// TestMaxPeers: established peers are bounded by MaxPeers at admission,
// after TLS, where the client can be told why (AUTH_FAILED; the stock
// client's view is in TestRealClientRefused).
func TestMaxPeers(t *testing.T) {
	g := newGateRig(t, func(c *Config) { c.MaxPeers = 1 })
	var sess []*session
	for i := 0; i < 2; i++ {
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 2, byte(i)}), 1000)
		sid := [8]byte{byte(i + 1)}
		g.reset(src, sid, 1<<32|1)
		g.complete(src, sid, g.serverSID(t, g.lastSent(), sid))
		g.srv.mu.Lock()
		sess = append(sess, g.srv.sessions[src])
		g.srv.mu.Unlock()
	}
	if g.srv.Sessions() != 2 {
		t.Fatalf("%d sessions before TLS, want 2 (half-open ones are bounded by MaxHalfOpen)", g.srv.Sessions())
	}
	if _, _, _, err := g.srv.admit(sess[0], "a", nil); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := g.srv.admit(sess[1], "b", nil)
	if err == nil || !strings.Contains(err.Error(), "max_peers") || g.srv.Drop(DropMaxPeers) != 1 {
		t.Errorf("second admission: %v, drops %v", err, g.srv.Drops())
	}
}

// A client that goes silent is reaped after twice the pushed
// ping-restart, and its peer, peer id and addresses are released.
func TestPingRestartReaps(t *testing.T) {
	r := newRig(t, WrapTLSCrypt, 21, 0, 0, 0, func(c *Config) { c.PingRestart = 300 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r.connect(t, ctx)
	deadline := time.Now().Add(5 * time.Second)
	for r.srv.Sessions() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if r.srv.Sessions() != 0 {
		t.Fatal("silent client not reaped")
	}
	r.dp.mu.Lock()
	removed := r.dp.removed
	r.dp.mu.Unlock()
	if removed != 1 {
		t.Fatalf("RemovePeer called %d times", removed)
	}
	if r.srv.pool4.Available() != 253 || r.srv.peerIDs.available() != r.srv.cfg.MaxPeers {
		t.Fatal("addresses or peer id not released")
	}
}

// Close tells connected clients to reconnect.
func TestCloseSendsRestart(t *testing.T) {
	r := newRig(t, WrapTLSCrypt, 23, 0, 0, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, k := r.connect(t, ctx)
	go r.srv.Close()
	msg, err := k.readText("RESTART")
	if err != nil || msg != "RESTART" {
		t.Fatalf("got %q, %v", msg, err)
	}
}

// EXIT from the client tears the session down after the grace period.
func TestClientExit(t *testing.T) {
	r := newRig(t, WrapTLSCrypt, 25, 0, 0, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, k := r.connect(t, ctx)
	k.tls.Write(append([]byte(msgExit), 0))
	time.Sleep(time.Second)
	if r.srv.Sessions() != 1 {
		t.Fatal("session gone before the grace period")
	}
	deadline := time.Now().Add(20 * time.Second)
	for r.srv.Sessions() != 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if r.srv.Sessions() != 0 {
		t.Fatal("session not removed after EXIT")
	}
}

// The server asks the data plane for a ping when it has sent nothing for
// the ping interval.
func TestSendPingHook(t *testing.T) {
	var mu sync.Mutex
	pings := 0
	r := newRig(t, WrapTLSCrypt, 27, 0, 0, 0, func(c *Config) {
		c.Ping = 300 * time.Millisecond
		c.SendPing = func(peerID uint32) {
			mu.Lock()
			pings++
			mu.Unlock()
			if peerID != 0 {
				t.Errorf("ping for peer %d", peerID)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r.connect(t, ctx)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return pings
	}
	// At least two pings (within 10 s: the server's tick may run late on a
	// loaded machine), and never more than one an interval.
	start, n0 := time.Now(), count()
	for count() < n0+2 && time.Since(start) < 10*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	took, n := time.Since(start), count()-n0
	if n < 2 || n > int(took/(300*time.Millisecond))+1 {
		t.Fatalf("%d pings in %v at a 300 ms interval", n, took.Round(time.Millisecond))
	}
}

func TestNextKeyID(t *testing.T) {
	id := uint8(0)
	var seq []uint8
	for i := 0; i < 9; i++ {
		id = nextKeyID(id)
		seq = append(seq, id)
	}
	want := []uint8{1, 2, 3, 4, 5, 6, 7, 1, 2}
	for i := range want {
		if seq[i] != want[i] {
			t.Fatalf("key ids %v, want %v", seq, want)
		}
	}
}

// After a data-plane float, control packets from the new address reach
// the session and the server answers there.
func TestPeerFloated(t *testing.T) {
	r := newRig(t, WrapTLSCrypt, 33, 0, 0, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, k := r.connect(t, ctx)
	if r.srv.PeerFloated(7, netip.MustParseAddrPort("198.18.0.5:1")) {
		t.Fatal("float of an unknown peer id accepted")
	}
	if r.srv.PeerFloated(0, clientAddr) {
		t.Fatal("float onto an address a session owns accepted")
	}
	moved := netip.MustParseAddrPort("198.18.0.66:4242")
	if !r.srv.PeerFloated(0, moved) {
		t.Fatal("float refused")
	}
	r.srv.mu.Lock()
	_, atNew := r.srv.sessions[moved]
	_, atOld := r.srv.sessions[clientAddr]
	r.srv.mu.Unlock()
	if !atNew || atOld {
		t.Fatalf("session map after float: new %v old %v", atNew, atOld)
	}
	_ = k
}

// The data plane's events map onto Renegotiate and Disconnect.
func TestRenegotiateAndDisconnect(t *testing.T) {
	r := newRig(t, WrapTLSCrypt, 35, 0, 0, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r.connect(t, ctx)
	if r.srv.Renegotiate(9) || r.srv.Disconnect(9) {
		t.Fatal("unknown peer accepted")
	}
	if !r.srv.Renegotiate(0) {
		t.Fatal("renegotiation refused")
	}
	if r.srv.Renegotiate(0) {
		t.Fatal("second renegotiation while one is in flight")
	}
	// The test client answers the server's soft reset with a new key.
	c := r.client()
	deadline := time.Now().Add(10 * time.Second)
	var k1 *clientKey
	for k1 == nil && time.Now().Before(deadline) {
		c.mu.Lock()
		k1 = c.keys[1]
		c.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	if k1 == nil {
		t.Fatal("client never saw the server's soft reset")
	}
	if err := c.negotiate(ctx, k1, vpn.AES256GCM); err != nil {
		t.Fatal(err)
	}
	checkKeys(t, r.dp, 0, k1, vpn.AES256GCM)
	if !r.srv.Disconnect(0) || r.srv.Sessions() != 0 {
		t.Fatal("disconnect failed")
	}
	r.dp.mu.Lock()
	defer r.dp.mu.Unlock()
	if r.dp.removed != 1 {
		t.Fatalf("RemovePeer called %d times", r.dp.removed)
	}
}
