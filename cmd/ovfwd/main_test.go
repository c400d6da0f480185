package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binary builds ovfwd once per test run (or uses $OVFWD_BIN from make build).
func binary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("OVFWD_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "ovfwd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// run returns stdout, stderr and the exit status.
func run(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr strings.Builder
	c := exec.Command(bin, args...)
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func TestCommand(t *testing.T) {
	bin := binary(t)

	t.Run("check packaged config", func(t *testing.T) {
		for _, args := range [][]string{{"check", "../../packaging/ovfwd.toml"}, {"check", "-c", "../../packaging/ovfwd.toml"}} {
			out, errOut, code := run(t, bin, args...)
			if code != 0 || !strings.HasPrefix(out, "ok: ") || !strings.Contains(out, "2 ports") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
			}
		}
	})

	t.Run("check broken config", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "broken.toml")
		text := "[appliance]\nbatch = 64\nmode = \"routr\"\n\n[[port]]\nname = \"p0\"\nifname = \"eth0\"\ndriver = \"dpdk\"\n"
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := run(t, bin, "check", "-user", "root", path) // syntax, not permissions: the file is in a 0700 TempDir
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		if out != "" {
			t.Errorf("stdout %q on a broken config", out)
		}
		// Every error at once, each with file:line and key.
		for _, want := range []string{path + ":3: appliance.mode", path + ":8: port[0].driver"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr lacks %q:\n%s", want, errOut)
			}
		}
		// run refuses the same file the same way, before touching anything.
		_, errOut, code = run(t, bin, "run", "-c", path)
		if code != 1 || !strings.Contains(errOut, path+":3: appliance.mode") {
			t.Errorf("run -c broken: exit %d\n%s", code, errOut)
		}
	})

	t.Run("version", func(t *testing.T) {
		out, _, code := run(t, bin, "version")
		if code != 0 || !strings.HasPrefix(out, "ovfwd ") || len(strings.Fields(out)) != 2 {
			t.Errorf("exit %d, %q", code, out)
		}
	})

	t.Run("probe", func(t *testing.T) {
		out, errOut, code := run(t, bin, "probe")
		if _, err := os.Stat("/dev/vfio/vfio"); err == nil {
			t.Skip("this machine has VFIO; the no-VFIO explanation does not apply")
		}
		if !strings.Contains(out+errOut, "VFIO is not available") || !strings.Contains(out+errOut, "fix:") {
			t.Errorf("exit %d; no explanation of the missing VFIO and its fix:\n%s%s", code, out, errOut)
		}
	})

	t.Run("help", func(t *testing.T) {
		for _, cmd := range []string{"run", "check", "status", "lab", "probe", "version"} {
			_, errOut, code := run(t, bin, cmd, "-h")
			if code != 0 || !strings.Contains(errOut, "usage: ovfwd "+cmd) {
				t.Errorf("%s -h: exit %d, %q", cmd, code, errOut)
			}
		}
		for _, args := range [][]string{{"pki", "client", "-h"}, {"bench", "fwd", "-h"}, {"bench", "mlx5", "-h"}} {
			_, errOut, code := run(t, bin, args...)
			if code != 0 || !strings.Contains(errOut, "usage: ovfwd "+args[0]+" "+args[1]) {
				t.Errorf("%v: exit %d, %q", args, code, errOut)
			}
		}
		if _, _, code := run(t, bin, "frobnicate"); code != 2 {
			t.Errorf("unknown command: exit %d, want 2", code)
		}
		if _, _, code := run(t, bin, "check", "a", "b"); code != 2 {
			t.Errorf("two config files: exit %d, want 2", code)
		}
	})

	t.Run("pki", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "pki")
		if _, errOut, code := run(t, bin, "pki", "init", dir); code != 0 {
			t.Fatalf("pki init: exit %d: %s", code, errOut)
		}
		out, errOut, code := run(t, bin, "pki", "client", dir, "alice", "--remote", "198.18.0.1:1194")
		if code != 0 {
			t.Fatalf("pki client: exit %d: %s", code, errOut)
		}
		profile, err := os.ReadFile(strings.TrimSpace(out))
		if err != nil || !strings.Contains(string(profile), "remote 198.18.0.1 1194") {
			t.Errorf("profile %q: %v\n%s", out, err, profile)
		}
		if _, _, code := run(t, bin, "pki", "client", dir, "bob"); code != 2 {
			t.Errorf("pki client without -remote: exit %d, want 2", code)
		}
	})
}
