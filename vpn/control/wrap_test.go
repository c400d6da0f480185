package control

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn/statickey"
)

func testStaticKey() *statickey.Key {
	var k statickey.Key
	for i := range k {
		k[i] = byte(i*7 + 3)
	}
	return &k
}

// The tls-crypt layout of tls_crypt.c tls_crypt_wrap, built here straight from the
// spec with the file offsets verified on the wire: server→client Ke =
// file[0:32], Ka = file[64:96].
func TestTLSCryptVector(t *testing.T) {
	k := testStaticKey()
	srv, err := newWrapper(WrapTLSCrypt, k, 0, KeyDirNone, true)
	if err != nil {
		t.Fatal(err)
	}
	sid := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	body := []byte{1, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9, 0, 0, 0, 0}
	rid := uint64(0x5f000000)<<32 | 1
	got := srv.wrap(nil, opControlHardResetServer2<<opShift, &sid, rid, body)

	hdr := []byte{opControlHardResetServer2 << 3}
	hdr = append(hdr, sid[:]...)
	hdr = binary.BigEndian.AppendUint64(hdr, rid)
	m := hmac.New(sha256.New, k[64:96])
	m.Write(hdr)
	m.Write(body)
	tag := m.Sum(nil)
	blk, _ := aes.NewCipher(k[0:32])
	ct := make([]byte, len(body))
	cipher.NewCTR(blk, tag[:16]).XORKeyStream(ct, body)
	want := append(append(hdr, tag...), ct...)
	if !bytes.Equal(got, want) {
		t.Fatalf("tls-crypt wrap\n got %x\nwant %x", got, want)
	}
	if len(got) != 49+len(body) {
		t.Fatalf("overhead %d, want 49", len(got)-len(body))
	}

	// The client unwraps with the same key[0] halves.
	cli, _ := newWrapper(WrapTLSCrypt, k, 0, KeyDirNone, false)
	r, b, err := cli.unwrap(got)
	if err != nil || r != rid || !bytes.Equal(b, body) {
		t.Fatalf("client unwrap: %v rid %x body %x", err, r, b)
	}
	// …and the server must not accept its own direction back.
	if _, _, err := srv.unwrap(got); err != errAuth {
		t.Fatalf("server accepted a server→client packet: %v", err)
	}
}

// tls-auth per ssl_pkt.c swap_hmac / crypto.c openvpn_encrypt_v1: HMAC over pid ‖ time ‖ op ‖ sid ‖ body,
// placed between sid and pid. Direction 0 sends with key[0]'s HMAC half
// (file bytes 64..), direction 1 with key[1]'s (file bytes 192..).
func TestTLSAuthVector(t *testing.T) {
	k := testStaticKey()
	srv, _ := newWrapper(WrapTLSAuth, k, DigestSHA1, KeyDir0, true)
	cli, _ := newWrapper(WrapTLSAuth, k, DigestSHA1, KeyDir1, false)
	sid := [8]byte{8, 7, 6, 5, 4, 3, 2, 1}
	body := []byte{0, 0, 0, 0, 0}
	rid := uint64(0x60000000)<<32 | 7
	got := cli.wrap(nil, opControlHardResetClient2<<opShift, &sid, rid, body)

	var ridb [8]byte
	binary.BigEndian.PutUint64(ridb[:], rid)
	m := hmac.New(sha1.New, k[192:212])
	m.Write(ridb[:])
	m.Write([]byte{opControlHardResetClient2 << 3})
	m.Write(sid[:])
	m.Write(body)
	want := []byte{opControlHardResetClient2 << 3}
	want = append(want, sid[:]...)
	want = append(want, m.Sum(nil)...)
	want = append(want, ridb[:]...)
	want = append(want, body...)
	if !bytes.Equal(got, want) {
		t.Fatalf("tls-auth wrap\n got %x\nwant %x", got, want)
	}
	r, b, err := srv.unwrap(got)
	if err != nil || r != rid || !bytes.Equal(b, body) {
		t.Fatalf("server unwrap: %v", err)
	}
	// Wrong direction or digest fails.
	wrongDir, _ := newWrapper(WrapTLSAuth, k, DigestSHA1, KeyDir1, true)
	if _, _, err := wrongDir.unwrap(got); err != errAuth {
		t.Errorf("same key-direction on both ends accepted: %v", err)
	}
	sha256w, _ := newWrapper(WrapTLSAuth, k, DigestSHA256, KeyDir0, true)
	if _, _, err := sha256w.unwrap(got); err == nil {
		t.Errorf("SHA256 accepted a SHA1 packet")
	}
	// No direction: both ends use key[0].
	a, _ := newWrapper(WrapTLSAuth, k, DigestSHA256, KeyDirNone, true)
	c, _ := newWrapper(WrapTLSAuth, k, DigestSHA256, KeyDirNone, false)
	if _, _, err := a.unwrap(c.wrap(nil, 0x20, &sid, 1, body)); err != nil {
		t.Errorf("keydir none: %v", err)
	}
}

// Every single-bit flip of a wrapped packet is rejected.
func TestWrapTamper(t *testing.T) {
	k := testStaticKey()
	for _, mode := range []WrapMode{WrapTLSCrypt, WrapTLSAuth} {
		cli, _ := newWrapper(mode, k, DigestSHA256, KeyDir1, false)
		srv, _ := newWrapper(mode, k, DigestSHA256, KeyDir0, true)
		sid := [8]byte{1}
		pkt := cli.wrap(nil, opControlV1<<opShift, &sid, 5, []byte("0123456789abcdef"))
		for i := 0; i < len(pkt)*8; i++ {
			bad := append([]byte(nil), pkt...)
			bad[i/8] ^= 1 << (i % 8)
			if _, _, err := srv.unwrap(bad); err == nil {
				t.Fatalf("mode %d: flip of bit %d accepted", mode, i)
			}
		}
		for n := 0; n < len(pkt); n++ {
			if _, _, err := srv.unwrap(pkt[:n]); err == nil {
				t.Fatalf("mode %d: truncation to %d accepted", mode, n)
			}
		}
	}
}

func TestReplayState(t *testing.T) {
	var r replayState
	now := testTime
	const t0 = 1000
	steps := []struct {
		rid  uint64
		ok   bool
		what string
	}{
		{replayID(0, t0), false, "id 0"},
		{replayID(1, t0), true, "first"},
		{replayID(1, t0), false, "duplicate"},
		{replayID(5, t0), true, "jump"},
		{replayID(3, t0), true, "late in window"},
		{replayID(3, t0), false, "late duplicate"},
		{replayID(100, t0), true, "far jump"},
		{replayID(30, t0), false, "older than window"},
		{replayID(500, t0-1), false, "time went back"},
		{replayID(1, t0+1), true, "time moved on"},
	}
	for _, s := range steps {
		if got := r.check(s.rid, now); got != s.ok {
			t.Errorf("%s: check = %v, want %v", s.what, got, s.ok)
		}
	}
	r.check(replayID(10, t0+1), now)
	if r.check(replayID(9, t0+1), now.Add(replayBacktrackTime+1)) {
		t.Error("late packet accepted after the backtrack time")
	}
	var s replaySender
	a, b := s.nextID(now), s.nextID(now)
	if a != replayID(1, uint32(now.Unix())) || b != replayID(2, uint32(now.Unix())) {
		t.Errorf("sender ids %x %x", a, b)
	}
}

// TestReplayIDWireOrder: the long-form packet-id goes on the wire as
// openvpn writes and reads it (packet_id.c packet_id_write/packet_id_read):
// the 32-bit counter, then the 32-bit time. With the two swapped, openvpn
// saw every packet as a new "time" and dropped reordered ones as going
// back in time; here a reordered openvpn packet must be accepted.
func TestReplayIDWireOrder(t *testing.T) {
	k := testStaticKey()
	srv, _ := newWrapper(WrapTLSAuth, k, 0, KeyDir0, true)
	var s replaySender
	now := time.Unix(0x61000000, 0)
	sid := [8]byte{1}
	pkt := srv.wrap(nil, opAckV1<<opShift, &sid, s.nextID(now), nil)
	pid := pkt[1+8+20 : 1+8+20+8] // op, sid, SHA1 HMAC, then the packet-id
	if want := []byte{0, 0, 0, 1, 0x61, 0, 0, 0}; !bytes.Equal(pid, want) {
		t.Fatalf("packet-id on the wire % x, want % x (counter, then time)", pid, want)
	}
	// What openvpn sends: counter 1, 3, 2 (reordered) at one time.
	var r replayState
	wire := func(id uint32) uint64 {
		var b [8]byte
		binary.BigEndian.PutUint32(b[:], id)
		binary.BigEndian.PutUint32(b[4:], 0x61000000)
		return binary.BigEndian.Uint64(b[:])
	}
	for _, id := range []uint32{1, 3, 2} {
		if !r.check(wire(id), now) {
			t.Errorf("openvpn packet-id %d refused after a reordering", id)
		}
	}
	if r.check(wire(2), now) {
		t.Error("a replayed packet-id was accepted")
	}
}
