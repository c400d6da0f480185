package pki

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func profileCert(t *testing.T, profile string) []byte {
	t.Helper()
	b, err := os.ReadFile(profile)
	if err != nil {
		t.Fatal(err)
	}
	return inlineBlock(b, "cert")
}

// TestRevoke: ovfwd's own PKI. Revoking one client lists exactly its
// certificate; a second revocation keeps the first and bumps the number;
// revoking twice is an error; openssl verify agrees.
func TestRevoke(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	pa, err := ClientProfile(dir, Profile{Name: "alice", Remotes: []string{"198.18.0.1:1194"}})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := ClientProfile(dir, Profile{Name: "bob", Remotes: []string{"198.18.0.1:1194"}})
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := parseCerts(profileCert(t, pa))
	bob, _ := parseCerts(profileCert(t, pb))
	path, err := Revoke(dir, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(filepath.Join(dir, CACertFile))
	crl, err := LoadCRL(path, caPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !crl.Revoked(alice[0]) || crl.Revoked(bob[0]) || crl.Len() != 1 {
		t.Fatalf("after revoking alice: alice %v bob %v, %d entries", crl.Revoked(alice[0]), crl.Revoked(bob[0]), crl.Len())
	}
	if _, err := Revoke(dir, "bob", ""); err != nil {
		t.Fatal(err)
	}
	crl, err = LoadCRL(path, caPEM)
	if err != nil || !crl.Revoked(alice[0]) || !crl.Revoked(bob[0]) || crl.Number.Int64() != 2 {
		t.Fatalf("after revoking bob: %v %+v", err, crl)
	}
	if _, err := Revoke(dir, "alice", ""); err == nil || !strings.Contains(err.Error(), "already revoked") {
		t.Errorf("second revocation of alice: %v", err)
	}
	if _, err := Revoke(dir, "nobody", ""); err == nil {
		t.Error("revoked a name with no certificate")
	}
	// A list signed by another CA is refused.
	other := t.TempDir()
	if err := Init(other); err != nil {
		t.Fatal(err)
	}
	otherCA, _ := os.ReadFile(filepath.Join(other, CACertFile))
	if _, err := LoadCRL(path, otherCA); err == nil {
		t.Error("accepted a CRL signed by another CA")
	}
	if _, err := exec.LookPath("openssl"); err == nil {
		certFile := filepath.Join(dir, "alice.pem")
		os.WriteFile(certFile, profileCert(t, pa), 0o600)
		out, err := exec.Command("openssl", "verify", "-crl_check", "-CAfile", filepath.Join(dir, CACertFile), "-CRLfile", path, certFile).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "certificate revoked") {
			t.Errorf("openssl verify of a revoked certificate: %v\n%s", err, out)
		}
	}
}

// TestRevokeEasyRSA: a foreign CA made by easy-rsa (RSA, its own layout):
// ovfwd pki revoke writes a CRL that openssl accepts and that lists the
// client, and marks index.txt so `easyrsa gen-crl` keeps the entry.
func TestRevokeEasyRSA(t *testing.T) {
	easyrsa := "/usr/share/easy-rsa/easyrsa"
	if _, err := os.Stat(easyrsa); err != nil {
		if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
			t.Fatal("easy-rsa not installed (make deps installs it)")
		}
		t.Skip("easy-rsa not installed")
	}
	work := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(easyrsa, args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "EASYRSA_BATCH=1", "EASYRSA_PKI="+filepath.Join(work, "pki"))
		if args[0] == "build-ca" {
			cmd.Env = append(cmd.Env, "EASYRSA_REQ_CN=foreign-ca")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("easyrsa %v: %v\n%s", args, err, out)
		}
	}
	run("init-pki")
	run("build-ca", "nopass")
	run("build-client-full", "carol", "nopass")
	run("build-client-full", "dave", "nopass")
	dir := filepath.Join(work, "pki")
	crlPath, err := Revoke(dir, "carol", "")
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.crt")
	for name, want := range map[string]string{"carol": "certificate revoked", "dave": ": OK"} {
		out, _ := exec.Command("openssl", "verify", "-crl_check", "-CAfile", ca, "-CRLfile", crlPath, filepath.Join(dir, "issued", name+".crt")).CombinedOutput()
		if !strings.Contains(string(out), want) {
			t.Errorf("openssl verify %s: want %q:\n%s", name, want, out)
		}
	}
	// easy-rsa regenerates the list from its database: carol stays.
	run("gen-crl")
	caPEM, _ := os.ReadFile(ca)
	crl, err := LoadCRL(crlPath, caPEM)
	if err != nil {
		t.Fatal(err)
	}
	carol, _ := os.ReadFile(filepath.Join(dir, "issued", "carol.crt"))
	cs, _ := parseCerts(carol)
	if !crl.Revoked(cs[0]) {
		t.Error("easyrsa gen-crl dropped ovfwd's revocation (index.txt not marked)")
	}
}

// FuzzParseCRL: arbitrary bytes as a crl file never panic the parser.
func FuzzParseCRL(f *testing.F) {
	dir := f.TempDir()
	if err := Init(dir); err != nil {
		f.Fatal(err)
	}
	if _, err := ClientProfile(dir, Profile{Name: "a", Remotes: []string{"198.18.0.1:1194"}}); err != nil {
		f.Fatal(err)
	}
	path, err := Revoke(dir, "a", "")
	if err != nil {
		f.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	f.Add(good)
	f.Add([]byte("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n"))
	f.Add([]byte{0x30, 0x82, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		rl, err := ParseCRL(data)
		if err == nil && rl == nil {
			t.Fatal("nil list without an error")
		}
	})
}

// FuzzParseCerts: arbitrary bytes as a certificate file never panic the
// parser, and what it returns is certificates and no error, or an error.
func FuzzParseCerts(f *testing.F) {
	dir := f.TempDir()
	if err := Init(dir); err != nil {
		f.Fatal(err)
	}
	ca, _ := os.ReadFile(filepath.Join(dir, CACertFile))
	f.Add(ca)
	f.Add(append(append([]byte(nil), ca...), ca...))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := parseCerts(data)
		if err == nil {
			for _, c := range cs {
				if c == nil {
					t.Fatal("nil certificate without an error")
				}
			}
		}
	})
}
