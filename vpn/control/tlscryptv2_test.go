package control

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestTLSCryptV2ForeignKeys: keys made by openvpn itself (`--genkey
// tls-crypt-v2-server`, then `tls-crypt-v2-client` wrapped with it)
// parse, and the wrapped client key unwraps to the very Kc in the file,
// with openvpn's timestamp metadata.
func TestTLSCryptV2ForeignKeys(t *testing.T) {
	if _, err := exec.LookPath("openvpn"); err != nil {
		if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
			t.Fatal("openvpn not installed (make deps installs it)")
		}
		t.Skip("openvpn not installed")
	}
	dir := t.TempDir()
	srvPath, cliPath := filepath.Join(dir, "srv.key"), filepath.Join(dir, "cli.key")
	for _, args := range [][]string{
		{"--genkey", "tls-crypt-v2-server", srvPath},
		{"--tls-crypt-v2", srvPath, "--genkey", "tls-crypt-v2-client", cliPath},
	} {
		if out, err := exec.Command("openvpn", args...).CombinedOutput(); err != nil {
			t.Fatalf("openvpn %v: %v\n%s", args, err, out)
		}
	}
	srvText, _ := os.ReadFile(srvPath)
	cliText, _ := os.ReadFile(cliPath)
	sk, err := ParseTLSCryptV2ServerKey(srvText)
	if err != nil {
		t.Fatal(err)
	}
	kc, wkc, err := ParseTLSCryptV2ClientKey(cliText)
	if err != nil {
		t.Fatal(err)
	}
	got, meta, err := sk.unwrapClientKey(wkc)
	if err != nil {
		t.Fatalf("unwrapping openvpn's WKc: %v", err)
	}
	if got != kc {
		t.Fatal("unwrapped Kc differs from the client key file's")
	}
	if len(meta) != 9 || meta[0] != tlsCryptV2MetaTime {
		t.Errorf("metadata %x, want a timestamp", meta)
	}
	// Our wrapping of the same Kc and metadata is byte for byte openvpn's.
	if again := sk.wrapClientKey(&kc, meta); !bytes.Equal(again, wkc) {
		t.Errorf("re-wrapped WKc differs:\n got %x\nwant %x", again, wkc)
	}
}

// TestTLSCryptV2OwnKeys: a client key we make unwraps with our server key;
// a flipped bit, a truncation or another server key is refused.
func TestTLSCryptV2OwnKeys(t *testing.T) {
	sk, _ := GenerateTLSCryptV2ServerKey()
	text, err := sk.NewTLSCryptV2ClientKey(time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	kc, wkc, err := ParseTLSCryptV2ClientKey(text)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := sk.unwrapClientKey(wkc); err != nil || got != kc {
		t.Fatalf("own key: %v", err)
	}
	bad := append([]byte(nil), wkc...)
	bad[40] ^= 1
	other, _ := GenerateTLSCryptV2ServerKey()
	for name, w := range map[string][]byte{"flipped": bad, "short": wkc[:len(wkc)-3]} {
		if _, _, err := sk.unwrapClientKey(w); err == nil {
			t.Errorf("%s WKc accepted", name)
		}
	}
	if _, _, err := other.unwrapClientKey(wkc); err == nil {
		t.Error("another server key unwrapped the client key")
	}
	skText, _ := sk.MarshalText()
	if back, err := ParseTLSCryptV2ServerKey(skText); err != nil || back != sk {
		t.Errorf("server key round trip: %v", err)
	}
}

// FuzzTLSCryptV2 feeds arbitrary packets to the WKc split and unwrap and
// arbitrary text to the client key parser: nothing panics, and nothing
// unauthenticated unwraps.
func FuzzTLSCryptV2(f *testing.F) {
	sk, _ := GenerateTLSCryptV2ServerKey()
	text, _ := sk.NewTLSCryptV2ClientKey(time.Unix(1700000000, 0))
	_, wkc, _ := ParseTLSCryptV2ClientKey(text)
	pkt := append(make([]byte, tlsCryptHeaderLen+5), wkc...)
	pkt[0] = opControlHardResetClient3 << opShift
	f.Add(pkt)
	f.Add(text)
	f.Add([]byte{0x50, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _ = ParseTLSCryptV2ClientKey(data)
		_, _ = ParseTLSCryptV2ServerKey(data)
		if _, w, ok := splitWKc(data); ok {
			if _, _, err := sk.unwrapClientKey(w); err == nil && !bytes.Equal(w, wkc) {
				t.Fatalf("a WKc we never made unwrapped: %x", w)
			}
		}
	})
}

// TestTLSCryptV2Reset: a V3 reset with a valid WKc from a 2.6 client
// (early-negotiation packet id) is answered statelessly, wrapped in the
// client's own key, asking it to resend the WKc; one without early
// negotiation, or with a WKc the server key did not make, gets nothing and
// leaves no session.
func TestTLSCryptV2Reset(t *testing.T) {
	p := newTestPKI(t)
	sk, _ := GenerateTLSCryptV2ServerKey()
	var sent [][]byte
	srv, err := NewServer(Config{Certificate: p.server, ClientCAs: p.pool, TLSCryptV2: &sk,
		Send: func(_ netip.AddrPort, b []byte) error { sent = append(sent, append([]byte(nil), b...)); return nil }}, newMemDP())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	text, _ := sk.NewTLSCryptV2ClientKey(time.Now())
	kc, wkc, _ := ParseTLSCryptV2ClientKey(text)
	cli, _ := newWrapper(WrapTLSCrypt, &kc, 0, 0, false)
	sid := [8]byte{9, 8, 7, 6, 5, 4, 3, 2}
	reset := func(pid uint32, w []byte) []byte {
		body := (&packet{op: opControlHardResetClient2}).appendBody(nil)
		rid := uint64(pid)<<32 | uint64(time.Now().Unix())
		return append(cli.wrap(nil, opControlHardResetClient3<<opShift, &sid, rid, body), w...)
	}
	src := netip.MustParseAddrPort("198.18.3.3:5000")

	srv.HandlePacket(src, reset(1, wkc)) // no early negotiation
	other, _ := GenerateTLSCryptV2ServerKey()
	otherText, _ := other.NewTLSCryptV2ClientKey(time.Now())
	_, otherWKc, _ := ParseTLSCryptV2ClientKey(otherText)
	srv.HandlePacket(src, reset(earlyNegStart|1, otherWKc)) // another server's key
	if len(sent) != 0 || srv.Drop(DropUnsupported) != 1 || srv.Drop(DropWrapAuth) != 1 {
		t.Fatalf("sent %d replies, drops %v", len(sent), srv.Drops())
	}
	srv.HandlePacket(src, reset(earlyNegStart|1, wkc))
	if len(sent) != 1 || srv.Sessions() != 0 {
		t.Fatalf("sent %d replies, %d sessions: want one reply and no state", len(sent), srv.Sessions())
	}
	_, body, err := cli.unwrap(sent[0])
	if err != nil {
		t.Fatalf("the reply is not wrapped in the client's key: %v", err)
	}
	var rp packet
	rp.op = sent[0][0] >> opShift
	if err := rp.parseBody(body); err != nil || rp.op != opControlHardResetServer2 || !bytes.Equal(rp.payload, earlyNegTLV) || !rp.hasAck(0) {
		t.Fatalf("reply op %d payload %x acks %d (%v), want a server reset with the resend-WKc TLV", rp.op, rp.payload, rp.nAcks, err)
	}
}
