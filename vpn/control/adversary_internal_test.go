package control

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// openSession runs the stateless handshake for src with client session id
// sid on g and returns the session it created.
func (g *gateRig) openSession(t *testing.T, src netip.AddrPort, sid [8]byte) *session {
	t.Helper()
	g.reset(src, sid, 1<<32|uint64(time.Now().Unix()))
	cookie := g.serverSID(t, g.lastSent(), sid)
	g.complete(src, sid, cookie)
	g.srv.mu.Lock()
	defer g.srv.mu.Unlock()
	return g.srv.sessions[src]
}

// TestHalfOpenPerSource: one IPv4 address, or one IPv6 /64 however many
// addresses it uses, gets MaxHalfOpenPerSource half-open sessions; others
// still get in; sessions that never finish TLS end after HandshakeTimeout.
func TestHalfOpenPerSource(t *testing.T) {
	g := newGateRig(t, func(c *Config) { c.HandshakeRate, c.HandshakeBurst, c.MaxHalfOpen = 1000, 1000, 100 })
	open := func(src netip.AddrPort, i int) bool {
		return g.openSession(t, src, [8]byte{byte(i >> 8), byte(i), 1}) != nil
	}
	n4, n6 := 0, 0
	for i := range 30 {
		if open(netip.AddrPortFrom(netip.MustParseAddr("198.18.5.1"), uint16(2000+i)), i) {
			n4++
		}
		a := netip.MustParseAddr("2001:db8:5:1::").As16()
		binary.BigEndian.PutUint64(a[8:], uint64(i*7919+1))
		if open(netip.AddrPortFrom(netip.AddrFrom16(a), 3000), 100+i) {
			n6++
		}
	}
	if n4 != defaultHalfOpenPerSource || n6 != defaultHalfOpenPerSource {
		t.Fatalf("half-open sessions from one IPv4 address %d, from one IPv6 /64 %d; want %d each", n4, n6, defaultHalfOpenPerSource)
	}
	if !open(netip.MustParseAddrPort("198.18.5.2:2000"), 999) {
		t.Fatal("another address was refused")
	}
	if got := g.srv.Drop(DropHalfOpenSource); got != uint64(60-2*defaultHalfOpenPerSource) {
		t.Errorf("half_open_source = %d, want %d", got, 60-2*defaultHalfOpenPerSource)
	}
	// Nobody speaks TLS on them: they go after HandshakeTimeout.
	if !waitUntil(defaultHandshakeTimeout+5*time.Second, func() bool { return g.srv.Sessions() == 0 }) {
		t.Fatalf("%d silent half-open sessions left %v after they began", g.srv.Sessions(), defaultHandshakeTimeout+5*time.Second)
	}
	if got := g.srv.Drop(DropHandshakeTimeout); got != uint64(2*defaultHalfOpenPerSource+1) {
		t.Errorf("handshake_timeout = %d, want %d", got, 2*defaultHalfOpenPerSource+1)
	}
	g.srv.mu.Lock()
	left, leftBy := g.srv.halfOpen, len(g.srv.halfOpenBy)
	g.srv.mu.Unlock()
	if left != 0 || leftBy != 0 {
		t.Errorf("half-open counts after all left: %d, %d sources", left, leftBy)
	}
}

func waitUntil(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestV2SessionKeyBound: a packet authenticated with another client's
// tls-crypt-v2 key, naming a session's (cleartext) address and session
// id, is dropped, not taken by that session.
func TestV2SessionKeyBound(t *testing.T) {
	p := newTestPKI(t)
	sk, _ := GenerateTLSCryptV2ServerKey()
	var last []byte
	srv, err := NewServer(Config{Certificate: p.server, ClientCAs: p.pool, TLSCryptV2: &sk,
		Send: func(_ netip.AddrPort, b []byte) error { last = append([]byte(nil), b...); return nil }}, newMemDP())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	key := func() (*wrapper, []byte) {
		text, _ := sk.NewTLSCryptV2ClientKey(time.Now())
		kc, wkc, _ := ParseTLSCryptV2ClientKey(text)
		w, _ := newWrapper(WrapTLSCrypt, &kc, 0, 0, false)
		return w, wkc
	}
	victim, victimWKc := key()
	attacker, attackerWKc := key()
	sid := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	src := netip.MustParseAddrPort("198.18.3.3:5000")
	now := uint64(time.Now().Unix())
	reset := (&packet{op: opControlHardResetClient2}).appendBody(nil)
	srv.HandlePacket(src, append(victim.wrap(nil, opControlHardResetClient3<<opShift, &sid, uint64(earlyNegStart|1)<<32|now, reset), victimWKc...))
	if last == nil {
		t.Fatal("no reset reply")
	}
	var cookie [8]byte
	copy(cookie[:], last[1:])
	wkcPacket := func(w *wrapper, wkc []byte, rid uint64, msgID uint32, payload []byte) []byte {
		pk := packet{op: opControlV1, nAcks: 1, peerSID: cookie, msgID: msgID, payload: payload}
		return append(w.wrap(nil, opControlWKCV1<<opShift, &sid, rid, pk.appendBody(nil)), wkc...)
	}
	srv.HandlePacket(src, wkcPacket(victim, victimWKc, 2<<32|now, 1, nil))
	srv.mu.Lock()
	sess := srv.sessions[src]
	srv.mu.Unlock()
	if sess == nil {
		t.Fatalf("no session: %v", srv.Drops())
	}
	srv.HandlePacket(src, wkcPacket(attacker, attackerWKc, 3<<32|now, 2, []byte("not TLS")))
	sess.mu.Lock()
	next := sess.primary.rel.recvNext
	sess.mu.Unlock()
	if next != 2 {
		t.Fatalf("the session took the other key's message (next msg-id %d, want 2)", next)
	}
	if srv.Drop(DropV2KeyMismatch) != 1 {
		t.Errorf("v2_key_mismatch = %d, want 1", srv.Drop(DropV2KeyMismatch))
	}
}

// TestHandshakeBytesCap: a client whose TLS handshake keeps going (one
// 65000-byte ClientHello, in 1000-byte records) is cut off once it has sent
// handshakeByteLimit.
func TestHandshakeBytesCap(t *testing.T) {
	g := newGateRig(t, nil)
	src := netip.MustParseAddrPort("198.18.6.1:4000")
	sid := [8]byte{7}
	sess := g.openSession(t, src, sid)
	if sess == nil {
		t.Fatal("no session")
	}
	hello := []byte{1, 0, 0xfd, 0xe8} // ClientHello, 65000 bytes
	pending := func(id uint32) bool {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		return sess.primary.rel.recvNext <= id
	}
	rid := uint64(1000) // above the completing packet's
	for id := uint32(1); id <= 80 && g.srv.Drop(DropHandshakeBytes) == 0; id++ {
		rec := []byte{0x16, 3, 3, 0x03, 0xe8}
		body := make([]byte, 1000)
		if id == 1 {
			copy(body, hello)
		}
		rec = append(rec, body...)
		for try := 0; pending(id) && try < 100 && g.srv.Drop(DropHandshakeBytes) == 0; try++ {
			rid++
			pk := packet{op: opControlV1, msgID: id, payload: rec}
			g.srv.HandlePacket(src, g.cli.wrap(nil, opControlV1<<opShift, &sid, rid<<32|2, pk.appendBody(nil)))
			if pending(id) {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	if g.srv.Drop(DropHandshakeBytes) != 1 {
		t.Fatalf("handshake_bytes = %d after %d bytes, want 1 (drops %v)", g.srv.Drop(DropHandshakeBytes), 80*1005, g.srv.Drops())
	}
	if !waitUntil(2*time.Second, func() bool { return g.srv.Sessions() == 0 }) {
		t.Fatal("the session was not closed")
	}
}

// TestSendQueueBound: a client that never acknowledges cannot make the
// server queue its writes without bound.
func TestSendQueueBound(t *testing.T) {
	g := newGateRig(t, nil)
	src := netip.MustParseAddrPort("198.18.6.2:4000")
	sess := g.openSession(t, src, [8]byte{8})
	var err error
	n := 0
	for ; n < 1000 && err == nil; n++ {
		err = sess.writeTLS(sess.primary, make([]byte, 1000))
	}
	if err == nil {
		t.Fatal("1000 unacknowledged writes were all queued")
	}
	if n > sendQueueLimit+1 || g.srv.Drop(DropSendQueue) != 1 {
		t.Errorf("refused after %d writes (limit %d), send_queue %d", n, sendQueueLimit, g.srv.Drop(DropSendQueue))
	}
}

// TestLeaseNameInjection: a common name with a newline or a comma cannot
// add a line to the lease file.
func TestLeaseNameInjection(t *testing.T) {
	a := lease{v4: netip.MustParseAddr("198.18.71.9")}
	m := map[string]lease{"evil\nmallory": a, "x,198.18.71.10": a, "ok": a}
	got, bad := parseLeases(formatLeases(m))
	if len(got) != 1 || got["ok"] != a || bad != 0 {
		t.Fatalf("lease file read back as %v (%d bad lines)", got, bad)
	}
}

// TestFailLimiter: failures and logins in flight count per IPv4 address
// and per IPv6 /64, and the table stays within its size.
func TestFailLimiter(t *testing.T) {
	var f failLimiter
	now := time.Now()
	ip := func(i int) netip.Addr {
		a := netip.MustParseAddr("2001:db8:7:7::").As16()
		binary.BigEndian.PutUint64(a[8:], uint64(i))
		return netip.AddrFrom16(a)
	}
	for i := range 3 {
		if !f.begin(ip(i), 3, time.Minute, now) {
			t.Fatalf("login %d refused", i)
		}
	}
	if f.begin(ip(99), 3, time.Minute, now) {
		t.Fatal("a 4th login in flight from the same /64 passed")
	}
	for i := range 3 {
		f.end(ip(i), true, time.Minute, now)
	}
	if f.begin(ip(100), 3, time.Minute, now) {
		t.Fatal("the /64 is past its failures and was not refused")
	}
	if f.begin(ip(100), 3, time.Minute, now.Add(2*time.Minute)) {
		f.end(ip(100), false, time.Minute, now)
	} else {
		t.Fatal("refused after the window passed")
	}
	for i := range 2 * failLimiterSize {
		src := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		if f.begin(src, 3, time.Minute, now) {
			f.end(src, true, time.Minute, now)
		}
	}
	if n := f.size(); n > failLimiterSize {
		t.Fatalf("limiter holds %d sources, bound %d", n, failLimiterSize)
	}
}

// FuzzAuthFile: whatever a client puts in its username, password, common
// name or peer info, the credentials file has exactly two lines and every
// environment entry is one printable NAME=value.
func FuzzAuthFile(f *testing.F) {
	f.Add("alice", "secret", "cn", "IV_VER=2.6.14\nIV_PLAT=linux\n")
	f.Add("u", "pa\ns\rs\x00", "evil\nname", "IV_X=a\rb\nUV_Y=\x00\n=\nIV_=\n")
	f.Fuzz(func(t *testing.T, user, pass, cn, peerInfo string) {
		r := AuthRequest{Username: user, Password: pass, CommonName: cn, PeerInfo: peerInfo, Source: netip.MustParseAddrPort("198.18.0.1:1194")}
		file := authFile(r)
		if n := bytes.Count(file, []byte{'\n'}); n != 2 || bytes.ContainsFunc(file[:len(file)-1], func(c rune) bool { return c != '\n' && isControl(c) }) {
			t.Fatalf("credentials file %q", file)
		}
		for _, kv := range authEnv(r, "/run/x/auth_control") {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || k == "" || strings.ContainsFunc(kv, isControl) {
				t.Fatalf("environment entry %q", kv)
			}
		}
	})
}
