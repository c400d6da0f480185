package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestTemplateIsTheUnit: ovfwd@.service differs from ovfwd.service only in
// what makes an instance (its config, run and state directories, its
// description and header), so hardening added to one is not missed in
// the other.
func TestTemplateIsTheUnit(t *testing.T) {
	settings := func(path string) map[string]string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, l := range strings.Split(string(b), "\n") {
			if l == "" || l[0] == '#' || l[0] == '[' {
				continue
			}
			k, v, _ := strings.Cut(l, "=")
			m[k] += v + "\n"
		}
		return m
	}
	unit, tmpl := settings("ovfwd.service"), settings("ovfwd@.service")
	want := map[string]string{
		"Description":      "ovfwd VPN concentrator and router (%i)\n",
		"ExecStart":        "/usr/bin/ovfwd run -c /etc/ovfwd/%i.toml\n",
		"ExecReload":       "/usr/bin/ovfwd reload -c /etc/ovfwd/%i.toml -pid $MAINPID\n",
		"RuntimeDirectory": "ovfwd-%i\n",
		"StateDirectory":   "ovfwd/%i\n",
	}
	for k, v := range unit {
		w, special := want[k]
		if !special {
			w = v
		}
		if tmpl[k] != w {
			t.Errorf("ovfwd@.service %s=%q, want %q", k, tmpl[k], w)
		}
	}
	for k := range tmpl {
		if _, ok := unit[k]; !ok {
			t.Errorf("ovfwd@.service sets %s, ovfwd.service does not", k)
		}
	}
}

// TestUnitsVerify: systemd-analyze verify finds nothing to say about
// either unit (run on copies, with the binary they name stood in for).
func TestUnitsVerify(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatalf("systemd-analyze is needed: %v", err)
	}
	dir := t.TempDir()
	for _, u := range []string{"ovfwd.service", "ovfwd@.service"} {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		// verify wants the binary to exist; point it at one that does.
		text := strings.ReplaceAll(string(b), "/usr/bin/ovfwd", "/bin/true")
		if err := os.WriteFile(filepath.Join(dir, u), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("systemd-analyze", "verify", filepath.Join(dir, "ovfwd.service"), filepath.Join(dir, "ovfwd@a.service"))
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=notice")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "ovfwd") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestUnitExposure holds systemd-analyze security's exposure score for
// the unit at 2.6 or below (what its sandboxing reaches; the score left
// is the NIC access, capabilities and address families the data plane
// needs, see the unit's comments).
func TestUnitExposure(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatalf("systemd-analyze is needed: %v", err)
	}
	for _, u := range []string{"ovfwd.service", "ovfwd@.service"} {
		out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager", u).CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-analyze security %s: %v\n%s", u, err, out)
		}
		m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("no exposure level in:\n%s", out)
		}
		score, _ := strconv.ParseFloat(string(m[1]), 64)
		t.Logf("%s: exposure %.1f", u, score)
		if score > 2.6 {
			t.Errorf("%s: exposure %.1f, above 2.6:\n%s", u, score, out)
		}
	}
}
