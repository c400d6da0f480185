package control

import (
	"net/netip"
	"testing"
	"time"
)

// A V2Injector's packet, naming a live session's address and session id,
// is what the server must refuse: it unwraps under the injector's own key
// (so it is not garbage) and is dropped as v2_key_mismatch, the session
// untouched; under the session's own key the same message is taken.
func TestV2InjectorPacket(t *testing.T) {
	p := newTestPKI(t)
	sk, _ := GenerateTLSCryptV2ServerKey()
	var last []byte
	srv, err := NewServer(Config{Certificate: p.server, ClientCAs: p.pool, TLSCryptV2: &sk,
		Send: func(_ netip.AddrPort, b []byte) error { last = append([]byte(nil), b...); return nil }}, newMemDP())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	victimText, _ := sk.NewTLSCryptV2ClientKey(time.Now())
	attackerText, _ := sk.NewTLSCryptV2ClientKey(time.Now())
	victim, err := NewV2Injector(victimText)
	if err != nil {
		t.Fatal(err)
	}
	attacker, err := NewV2Injector(attackerText)
	if err != nil {
		t.Fatal(err)
	}
	sid := [8]byte{9, 8, 7, 6, 5, 4, 3, 2}
	src := netip.MustParseAddrPort("198.18.3.4:5000")
	now := uint32(time.Now().Unix())
	reset := (&packet{op: opControlHardResetClient2}).appendBody(nil)
	srv.HandlePacket(src, append(victim.w.wrap(nil, opControlHardResetClient3<<opShift, &sid, uint64(earlyNegStart|1)<<32|uint64(now), reset), victim.wkc...))
	if last == nil {
		t.Fatal("no reset reply")
	}
	var cookie [8]byte
	copy(cookie[:], last[1:])
	first := packet{op: opControlV1, nAcks: 1, peerSID: cookie, msgID: 1}
	victim.rid = 2 // the reset and this packet used replay ids 1 and 2
	srv.HandlePacket(src, append(victim.w.wrap(nil, opControlWKCV1<<opShift, &sid, replayID(2, now), first.appendBody(nil)), victim.wkc...))
	srv.mu.Lock()
	sess := srv.sessions[src]
	srv.mu.Unlock()
	if sess == nil {
		t.Fatalf("no session: %v", srv.Drops())
	}
	next := func() uint32 {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		return sess.primary.rel.recvNext
	}
	pkt, err := attacker.Control(sid, now, 2, []byte("not TLS"))
	if err != nil {
		t.Fatal(err)
	}
	srv.HandlePacket(src, pkt)
	if n := next(); n != 2 || srv.Drop(DropV2KeyMismatch) != 1 || srv.Drop(DropMalformed) != 0 {
		t.Fatalf("after the injection: next msg-id %d (want 2), v2_key_mismatch %d (want 1), drops %v", n, srv.Drop(DropV2KeyMismatch), srv.Drops())
	}
	// The same builder under the session's own key is taken: the packet
	// is well formed, only the key is wrong.
	pkt, _ = victim.Control(sid, now, 2, []byte("x"))
	srv.HandlePacket(src, pkt)
	if n := next(); n != 3 {
		t.Fatalf("the session's own key: next msg-id %d, want 3 (drops %v)", n, srv.Drops())
	}
}
