package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/vpn/statickey"
)

func block(t *testing.T, profile, tag string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<` + tag + `>\n(.*?)</` + tag + `>`).FindStringSubmatch(profile)
	if m == nil {
		t.Fatalf("profile has no <%s> block", tag)
	}
	return m[1]
}

func parseCert(t *testing.T, s string) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode([]byte(s))
	if b == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestInitAndClient(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	if err := Init(dir); err == nil {
		t.Fatal("Init overwrote an existing CA")
	}
	for _, f := range []string{CAKeyFile, ServerKeyFile, TLSCryptFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v mode %v", f, err, st.Mode())
		}
	}
	srv, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(srv.Certificate.Certificate[0])
	// remote-cert-tls server: keyUsage present, EKU serverAuth.
	if leaf.KeyUsage == 0 || len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("server cert KU %v EKU %v", leaf.KeyUsage, leaf.ExtKeyUsage)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: srv.ClientCAs, DNSName: ServerName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("server cert does not verify: %v", err)
	}

	path, err := Client(dir, "alice", "198.18.0.1:1194", "[2001:db8::1]:1194")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	p := string(b)
	for _, line := range []string{"client", "dev tun", "proto udp", "remote 198.18.0.1 1194", "remote 2001:db8::1 1194", "nobind", "remote-cert-tls server", "data-ciphers AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305"} {
		if !strings.Contains(p, "\n"+line+"\n") {
			t.Errorf("profile lacks line %q", line)
		}
	}
	if strings.Contains(p, "comp-lzo") || strings.Contains(p, "compress") || strings.Contains(p, "<tls-auth>") {
		t.Error("profile has compression or tls-auth")
	}
	cert := parseCert(t, block(t, p, "cert"))
	if cert.Subject.CommonName != "alice" {
		t.Errorf("CN %q", cert.Subject.CommonName)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: srv.ClientCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client cert does not verify for clientAuth: %v", err)
	}
	if ca := parseCert(t, block(t, p, "ca")); !ca.IsCA {
		t.Error("<ca> is not the CA")
	}
	if kb, _ := pem.Decode([]byte(block(t, p, "key"))); kb == nil || kb.Type != "PRIVATE KEY" {
		t.Error("<key> is not a private key")
	}
	k, err := statickey.Parse([]byte(block(t, p, "tls-crypt")))
	if err != nil || k != srv.StaticKey {
		t.Errorf("<tls-crypt> key differs from the server's: %v", err)
	}

	ta, err := ClientProfile(dir, Profile{Name: "bob", Remotes: []string{"vpn.example:1194"}, TLSAuth: true, Auth: "SHA256"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(ta)
	for _, s := range []string{"\nkey-direction 1\n", "\nauth SHA256\n", "<tls-auth>"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("tls-auth profile lacks %q", s)
		}
	}
	for _, bad := range []string{"", "../x", "a b", strings.Repeat("x", 70)} {
		if _, err := Client(dir, bad, "h:1"); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	if _, err := Client(dir, "carol"); err == nil {
		t.Error("profile without remote accepted")
	}
	if _, err := Client(t.TempDir(), "dave", "h:1"); err == nil {
		t.Error("client issued without a CA")
	}
}

// ClientFiles writes a client certificate and key that the CA verifies for
// client authentication under the requested name.
func TestClientFiles(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	certPath, keyPath, err := ClientFiles(dir, "site-a")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatalf("cert and key do not pair: %v", err)
	}
	ld, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ld.ClientCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("CA does not verify the client certificate: %v", err)
	}
	if leaf.Subject.CommonName != "site-a" {
		t.Fatalf("CN %q", leaf.Subject.CommonName)
	}
	if _, _, err := ClientFiles(dir, "../escape"); err == nil {
		t.Fatal("a name with a path was accepted")
	}
}

// Init into an existing directory others can write takes that away (the
// CA key must not sit where anyone can replace it).
func TestInitFixesWritableDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		t.Fatalf("pki dir left mode %#o", m)
	}
	old, now, err := PrepareDir(dir)
	if err != nil || old != now {
		t.Fatalf("second PrepareDir: %#o → %#o, %v", old, now, err)
	}
}
