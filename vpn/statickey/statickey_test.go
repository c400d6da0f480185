package statickey

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func testKey() Key {
	var k Key
	for i := range k {
		k[i] = byte(i*7 + 3)
	}
	return k
}

func TestText(t *testing.T) {
	k := testKey()
	text, _ := k.MarshalText()
	got, err := Parse(text)
	if err != nil || got != k {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{"", Begin + "\nabcd\n" + End, string(text[:len(text)-60])} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// The parts are where openvpn's struct key2 puts them: key[i] is 128
// bytes, cipher first.
func TestParts(t *testing.T) {
	k := testKey()
	for i := range 2 {
		if c := k.Cipher(i); len(c) != 64 || &c[0] != &k[128*i] {
			t.Errorf("cipher part %d", i)
		}
		if h := k.HMAC(i); len(h) != 64 || &h[0] != &k[128*i+64] {
			t.Errorf("HMAC part %d", i)
		}
	}
}

// A key written by openvpn itself parses. The privileged suite installs
// openvpn; there (OVFWD_REQUIRE_PRIV=1) its absence is a failure.
func TestFromOpenVPN(t *testing.T) {
	if _, err := exec.LookPath("openvpn"); err != nil {
		if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
			t.Fatal("openvpn not installed (make deps installs it)")
		}
		t.Skip("openvpn not installed")
	}
	path := filepath.Join(t.TempDir(), "k")
	if out, err := exec.Command("openvpn", "--genkey", "secret", path).CombinedOutput(); err != nil {
		t.Fatalf("openvpn --genkey: %v %s", err, out)
	}
	b, _ := os.ReadFile(path)
	if _, err := Parse(b); err != nil {
		t.Fatalf("openvpn key: %v", err)
	}
}

// FuzzParse checks the static key file parser.
func FuzzParse(f *testing.F) {
	text, _ := testKey().MarshalText()
	f.Add(text)
	f.Add([]byte(Begin + "\n" + End))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := Parse(b)
		if err != nil {
			return
		}
		out, _ := k.MarshalText()
		if k2, err := Parse(out); err != nil || k2 != k {
			t.Fatal("static key does not round-trip")
		}
	})
}
