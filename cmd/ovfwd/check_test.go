package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/vpn/pki"
)

// checkLab is a world-searchable directory holding a copy of the binary
// (so another user can run it), a PKI as `ovfwd pki init` run as root
// leaves it (directory 0700, keys 0600 root) and a config over it.
func checkLab(t *testing.T, extra string) (bin, dir, cfg string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
			t.Fatal("needs root (OVFWD_REQUIRE_PRIV=1)")
		}
		t.Skip("needs root: checks run as another user")
	}
	dir, err := os.MkdirTemp("", "ovfwd-check")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "ovfwd")
	copyFile(t, binary(t), bin, 0o755)
	if err := pki.Init(filepath.Join(dir, "pki")); err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(dir, "ovfwd.toml")
	text := "[[port]]\nname = \"p0\"\nifname = \"p0\"\naddresses = [\"198.18.0.1/24\"]\n[vpn]\nenabled = true\nport = 1194\n" +
		"pool_v4 = \"198.18.8.0/24\"\nmax_peers = 250\nca = \"pki/ca.crt\"\ncert = \"pki/server.crt\"\nkey = \"pki/server.key\"\ntls_crypt = \"pki/tls-crypt.key\"\n" + extra
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return bin, dir, cfg
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

var fixCommand = regexp.MustCompile(`as root: (chgrp \S+ [^\s);]+ && chmod \S+ [^\s);]+)`)

// Run as root, check checks as the unit's user (here nobody/nogroup): a
// PKI only root can read is refused with the chgrp/chmod step that fixes
// it, and after the operator runs exactly those steps the check passes.
func TestCheckAsUnitUser(t *testing.T) {
	bin, dir, cfg := checkLab(t, "")
	var ran []string
	for i := 0; i < 8; i++ {
		out, errOut, code := run(t, bin, "check", "-user", "nobody", cfg)
		if !strings.Contains(errOut, "checking as user nobody") {
			t.Fatalf("did not check as nobody: %q", errOut)
		}
		if code == 0 {
			if !strings.HasPrefix(out, "ok: ") {
				t.Fatalf("exit 0 without ok: %q", out)
			}
			break
		}
		cmds := fixCommand.FindAllStringSubmatch(errOut, -1)
		if len(cmds) == 0 {
			t.Fatalf("check failed without a chgrp step to follow:\n%s", errOut)
		}
		for _, m := range cmds {
			if o, err := exec.Command("sh", "-c", m[1]).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v %s", m[1], err, o)
			}
			ran = append(ran, m[1])
		}
	}
	key := filepath.Join(dir, "pki", pki.ServerKeyFile)
	want := "chgrp nogroup " + key + " && chmod 0640 " + key
	if len(ran) == 0 || !strings.Contains(strings.Join(ran, "\n"), want) {
		t.Fatalf("the steps run were %q, want among them %q", ran, want)
	}
	if _, errOut, code := run(t, bin, "check", "-user", "nobody", cfg); code != 0 {
		t.Fatalf("still failing after %q:\n%s", ran, errOut)
	}
	t.Logf("steps check named: %q", ran)
}

// Paths that exist but hold the wrong contents (the cases config.Load
// alone accepted) are refused, each at its key, with a fix.
func TestCheckContents(t *testing.T) {
	bin, dir, cfg := checkLab(t, "")
	if err := pki.Init(filepath.Join(dir, "other")); err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, from, to, key, msg string
	}{
		{"key of another certificate", "pki/server.key", "other/server.key", "vpn.key", "does not match the certificate"},
		{"ca is a key", `ca = "pki/ca.crt"`, `ca = "pki/server.key"`, "vpn.ca", "no certificate"},
		{"cert is the CA", `cert = "pki/server.crt"`, `cert = "pki/ca.crt"`, "vpn.key", "does not match the certificate"},
		{"tls_crypt is a certificate", `tls_crypt = "pki/tls-crypt.key"`, `tls_crypt = "pki/ca.crt"`, "vpn.tls_crypt", "not an OpenVPN static key"},
		{"auth program missing", "max_peers = 250\n", "max_peers = 250\nauth_user_pass_verify = [\"/nonexistent/check-login\"]\n", "vpn.auth_user_pass_verify", "no such file"},
		{"pool_persist directory missing", "max_peers = 250\n", "max_peers = 250\npool_persist = \"/nonexistent/ipp.txt\"\n", "vpn.pool_persist", "no such file"},
		{"default max_peers with a /24", "max_peers = 250\n", "", "vpn.pool_v4", "more than pool_v4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(string(base), c.from, c.to, 1)
			if text == string(base) {
				t.Fatalf("%q not in the config", c.from)
			}
			if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			// As root: contents, not permissions.
			_, errOut, code := run(t, bin, "check", "-user", "root", cfg)
			if code != 1 || !strings.Contains(errOut, ": "+c.key+": ") || !strings.Contains(errOut, c.msg) || !strings.Contains(errOut, "(fix: ") {
				t.Fatalf("exit %d, want 1 with %s: %q and a fix; stderr:\n%s", code, c.key, c.msg, errOut)
			}
		})
	}
}
