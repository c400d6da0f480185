package preflight

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// pkis are two independent CAs with their server certificates, made once.
var pkis = sync.OnceValues(func() ([2]string, error) {
	base, err := os.MkdirTemp("", "preflight-pki")
	if err != nil {
		return [2]string{}, err
	}
	var dirs [2]string
	for i := range dirs {
		dirs[i] = filepath.Join(base, []string{"a", "b"}[i])
		if err := pki.Init(dirs[i]); err != nil {
			return dirs, err
		}
	}
	return dirs, nil
})

// vpnConfig is a valid server config over PKI a, with extra [vpn] lines.
func vpnConfig(t *testing.T, files map[string]string, extra string) *config.Config {
	t.Helper()
	dirs, err := pkis()
	if err != nil {
		t.Fatal(err)
	}
	a := dirs[0]
	paths := map[string]string{"ca": pki.CACertFile, "cert": pki.ServerCertFile, "key": pki.ServerKeyFile, "tls_crypt": pki.TLSCryptFile}
	for k, f := range paths {
		paths[k] = filepath.Join(a, f)
	}
	for k, v := range files {
		paths[k] = v
	}
	text := "[[port]]\nname = \"p0\"\nifname = \"p0\"\naddresses = [\"198.18.0.1/24\"]\n[vpn]\nenabled = true\nport = 1194\npool_v4 = \"198.18.8.0/22\"\n"
	for _, k := range []string{"ca", "cert", "key", "tls_crypt"} {
		text += k + " = \"" + paths[k] + "\"\n"
	}
	text += extra
	path := filepath.Join(t.TempDir(), "ovfwd.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGoodConfig(t *testing.T) {
	rep := Check(vpnConfig(t, nil, "max_peers = 1021\n"))
	if len(rep.Errors)+len(rep.Warnings) > 0 {
		t.Fatalf("%v %v", rep.Errors, rep.Warnings)
	}
}

// Each case is a config whose paths all exist (config.Load accepts it)
// but whose contents the daemon cannot use: Check refuses each one, at the
// key concerned, with a fix.
func TestMismatchedContents(t *testing.T) {
	dirs, err := pkis()
	if err != nil {
		t.Fatal(err)
	}
	a, b := dirs[0], dirs[1]
	tmp := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	script := write("not-executable", "#!/bin/sh\nexit 0\n", 0o644)
	roDir := filepath.Join(tmp, "ro")
	if err := os.Mkdir(roDir, 0o555); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		extra string
		key   string // where the error must be
		msg   string
	}{
		{"ca is a key", map[string]string{"ca": filepath.Join(a, pki.ServerKeyFile)}, "", "vpn.ca", "no certificate"},
		{"ca is the server certificate", map[string]string{"ca": filepath.Join(a, pki.ServerCertFile)}, "", "vpn.ca", "no CA certificate"},
		{"cert is the CA", map[string]string{"cert": filepath.Join(a, pki.CACertFile), "key": filepath.Join(a, pki.CAKeyFile)}, "", "vpn.cert", "does not allow TLS server authentication"},
		{"key of another certificate", map[string]string{"key": filepath.Join(b, pki.ServerKeyFile)}, "", "vpn.key", "does not match"},
		{"key is the CA key", map[string]string{"key": filepath.Join(a, pki.CAKeyFile)}, "", "vpn.key", "does not match"},
		{"key is a static key", map[string]string{"key": filepath.Join(a, pki.TLSCryptFile)}, "", "vpn.key", "static key"},
		{"cert of another CA", map[string]string{"cert": filepath.Join(b, pki.ServerCertFile), "key": filepath.Join(b, pki.ServerKeyFile)}, "", "vpn.cert", "not verified by the CA"},
		{"tls_crypt is a certificate", map[string]string{"tls_crypt": filepath.Join(a, pki.CACertFile)}, "", "vpn.tls_crypt", "not an OpenVPN static key"},
		{"encrypted key", map[string]string{"key": write("enc.key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n", 0o600)}, "", "vpn.key", "encrypted"},
		{"auth program missing", nil, "auth_user_pass_verify = [\"" + filepath.Join(tmp, "nope") + "\"]\n", "vpn.auth_user_pass_verify", "no such file"},
		{"auth program not executable", nil, "auth_user_pass_verify = [\"" + script + "\"]\n", "vpn.auth_user_pass_verify", "not executable"},
		{"client-connect program missing", nil, "client_connect = [\"" + filepath.Join(tmp, "nope") + "\"]\n", "vpn.client_connect", "no such file"},
		{"learn-address program not executable", nil, "learn_address = [\"" + script + "\"]\n", "vpn.learn_address", "not executable"},
		{"pool_persist in a missing directory", nil, "pool_persist = \"" + filepath.Join(tmp, "gone", "ipp.txt") + "\"\n", "vpn.pool_persist", "no such file"},
		{"max_peers above the pool", nil, "max_peers = 1024\n", "vpn.max_peers", "more than pool_v4"},
		{"default max_peers above the pool", nil, "", "vpn.pool_v4", "more than pool_v4"},
		{"crl of another CA", nil, "", "vpn.crl", "signed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			extra := c.extra
			switch c.name {
			case "default max_peers above the pool":
				// The /22 holds 1021 clients, fewer than the default 1024.
				check(t, Check(vpnConfig(t, c.files, "")), c.key, c.msg)
				return
			case "crl of another CA":
				if _, _, err := pki.ClientFiles(b, "gone"); err != nil {
					t.Fatal(err)
				}
				if _, err := pki.Revoke(b, "gone", ""); err != nil {
					t.Fatal(err)
				}
				extra = "crl = \"" + filepath.Join(b, "crl.pem") + "\"\nmax_peers = 100\n"
			}
			if !strings.Contains(extra, "max_peers") && c.name != "default max_peers above the pool" {
				extra += "max_peers = 100\n"
			}
			check(t, Check(vpnConfig(t, c.files, extra)), c.key, c.msg)
		})
	}
}

func check(t *testing.T, rep Report, key, msg string) {
	t.Helper()
	for _, e := range rep.Errors {
		if e.Key == key && strings.Contains(e.Msg, msg) {
			if e.Fix == "" || e.Line == 0 {
				t.Errorf("no fix or line: %v", e)
			}
			return
		}
	}
	t.Errorf("no error at %s saying %q: %v", key, msg, rep.Errors)
}

// A port below the kernel's unprivileged start is a warning naming the
// capability the packaged unit lacks.
func TestPrivilegedPort(t *testing.T) {
	old := unprivilegedPortStart
	t.Cleanup(func() { unprivilegedPortStart = old })
	unprivilegedPortStart = filepath.Join(t.TempDir(), "start")
	if err := os.WriteFile(unprivilegedPortStart, []byte("1024\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := vpnConfig(t, nil, "max_peers = 100\n")
	c.VPN.Port = 443
	rep := Check(c)
	if len(rep.Errors) > 0 || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0].Fix, "CAP_NET_BIND_SERVICE") {
		t.Fatalf("errors %v warnings %v", rep.Errors, rep.Warnings)
	}
}
