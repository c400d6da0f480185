package vmtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// pkgVersion is the package the guest installs first; nextVersion the
// upgrade it installs over it (packaging/version.sh's shape past a tag).
const (
	pkgVersion  = "0.1.0"
	nextVersion = "0.1.1~git1.0123456789ab"
)

// repoRoot is the module root (this package is three levels down), or
// $OVFWD_VMTEST_SRC: another source tree to package and test (a branch
// checked out elsewhere).
func repoRoot(t *testing.T) string {
	t.Helper()
	if src := os.Getenv("OVFWD_VMTEST_SRC"); src != "" {
		return src
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// buildPackages runs packaging/build.sh (what `make package` runs) on a
// fresh build of ovfwd stamped with version and returns the .deb and .rpm.
func buildPackages(t *testing.T, version string) (deb, rpm string) {
	t.Helper()
	root, dir := repoRoot(t), t.TempDir()
	bin := buildBinary(t, dir, version)
	cmd := exec.Command("./packaging/build.sh", dir)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "OVFWD_BIN="+bin, "VERSION="+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("packaging/build.sh: %v\n%s", err, out)
	}
	return filepath.Join(dir, "ovfwd_"+version+"_amd64.deb"), filepath.Join(dir, "ovfwd_"+version+"_amd64.rpm")
}

// buildBinary builds ovfwd into dir, stamped with version, with the given
// build tags (test seams) if any.
func buildBinary(t *testing.T, dir, version string, tags ...string) string {
	t.Helper()
	bin := filepath.Join(dir, "ovfwd")
	args := []string{"build", "-ldflags", "-X github.com/ovfwd/ovfwd/cmd/ovfwd/version.Version=" + version, "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "./cmd/ovfwd")...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", tags, err, out)
	}
	return bin
}

// unitCaps is the capability mask the unit grants (AmbientCapabilities).
func unitCaps(t *testing.T) (uint64, []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "packaging/ovfwd.service"))
	if err != nil {
		t.Fatal(err)
	}
	bitsOf := map[string]uint{ // include/uapi/linux/capability.h
		"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3, "CAP_KILL": 5,
		"CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_NET_BIND_SERVICE": 10, "CAP_NET_BROADCAST": 11,
		"CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_IPC_LOCK": 14, "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17,
		"CAP_SYS_CHROOT": 18, "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21, "CAP_SYS_NICE": 23, "CAP_SYS_RESOURCE": 24,
		"CAP_PERFMON": 38, "CAP_BPF": 39,
	}
	var mask uint64
	var names []string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "AmbientCapabilities="); ok {
			for _, n := range strings.Fields(v) {
				bit, ok := bitsOf[n]
				if !ok {
					t.Fatalf("packaging/ovfwd.service grants %s, unknown to this test", n)
				}
				mask |= 1 << bit
				names = append(names, n)
			}
		}
	}
	if mask == 0 {
		t.Fatal("packaging/ovfwd.service has no AmbientCapabilities line")
	}
	return mask, names
}

// checkRPM checks what Debian's rpm can: the scriptlets are the packaging
// scripts, and an install into a scratch root (no scriptlets: the root has
// no shell) puts the files where the .deb puts them.
func checkRPM(t *testing.T, rpm string) {
	t.Helper()
	out, err := exec.Command("rpm", "-qp", "--scripts", rpm).CombinedOutput()
	if err != nil {
		t.Fatalf("rpm -qp --scripts: %v\n%s", err, out)
	}
	for scriptlet, file := range map[string]string{"postinstall": "postinstall.sh", "preuninstall": "preremove.sh", "postuninstall": "postremove.sh"} {
		body, err := os.ReadFile(filepath.Join(repoRoot(t), "packaging/scripts", file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), scriptlet+" scriptlet") || !strings.Contains(string(out), strings.TrimSpace(string(body))) {
			t.Errorf("rpm %s scriptlet is not packaging/scripts/%s:\n%s", scriptlet, file, out)
		}
	}
	root := t.TempDir()
	out, err = exec.Command("rpm", "--root", root, "--dbpath", "/rpmdb", "-i", "--nodeps", "--noscripts", rpm).CombinedOutput()
	if err != nil {
		t.Errorf("rpm --root SCRATCH -i --noscripts: %v\n%s", err, out)
		return
	}
	for _, f := range []string{"usr/bin/ovfwd", "usr/lib/systemd/system/ovfwd.service", "etc/ovfwd/ovfwd.toml", "usr/lib/udev/rules.d/60-ovfwd-vfio.rules"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("rpm scratch install: %v", err)
		}
	}
	out, err = exec.Command("rpm", "--root", root, "--dbpath", "/rpmdb", "-e", "--noscripts", "ovfwd").CombinedOutput()
	if err != nil {
		t.Errorf("rpm --root SCRATCH -e: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "usr/bin/ovfwd")); err == nil {
		t.Error("rpm -e left /usr/bin/ovfwd in the scratch root")
	}
}

const vmtestUnit = `[Unit]
Description=ovfwd vmtest driver (appliance/testbed/vmtest)
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/bin/bash /vmtest/appliance.sh
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
`

// applianceInitrd is the cached image followed by a second archive with
// this run's packages (N and the upgrade N+1), the stall-seam build,
// scripts and driver unit (the kernel unpacks both).
func applianceInitrd(t *testing.T, img *Image, deb, next, seam string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "initrd")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	base, err := os.Open(img.CPIO)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(f, base)
	base.Close()
	if err != nil {
		t.Fatal(err)
	}
	c := newCPIO(f)
	c.Dir("vmtest", 0o755)
	c.Copy("vmtest/ovfwd.deb", deb, 0o644)
	c.Copy("vmtest/ovfwd-next.deb", next, 0o644)
	c.File("vmtest/next-version", 0o644, []byte(nextVersion+"\n"))
	c.Copy("vmtest/ovfwd-stallseam", seam, 0o755)
	c.Copy("vmtest/appliance.sh", "testdata/appliance.sh", 0o755)
	c.Copy("vmtest/lifecycle.sh", "testdata/lifecycle.sh", 0o644)
	c.File("etc/systemd/system/vmtest.service", 0o644, []byte(vmtestUnit))
	c.Dir("etc/systemd/system/multi-user.target.wants", 0o755)
	c.Symlink("etc/systemd/system/multi-user.target.wants/vmtest.service", "/etc/systemd/system/vmtest.service")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// scriptStepRE finds the script's steps: every one must be reported.
var scriptStepRE = regexp.MustCompile(`(?m)^(?:step|stepup|came_up) "([^"$]+)"`)

// TestApplianceGuest installs the .deb in a Debian guest with a real
// systemd and drives the service the way an operator does (the steps are
// in testdata/appliance.sh).
func TestApplianceGuest(t *testing.T) {
	nstest.RequireRoot(t)
	qv, err := QEMUVersion()
	if err != nil {
		t.Fatal(err)
	}
	k, err := GetKernel()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var buildLog strings.Builder
	img, err := GetImage(k, &buildLog)
	if err != nil {
		t.Fatalf("%v\n%s", err, buildLog.String())
	}
	if img.Built > 0 {
		t.Logf("guest image %s built in %v", img.Key, img.Built.Round(time.Second))
	} else {
		t.Logf("guest image %s from the cache (%v)", img.Key, time.Since(start).Round(time.Millisecond))
	}
	deb, rpm := buildPackages(t, pkgVersion)
	checkRPM(t, rpm)
	next, _ := buildPackages(t, nextVersion)
	seam := buildBinary(t, t.TempDir(), nextVersion, "ovfwd_stallseam")
	initrd := applianceInitrd(t, img, deb, next, seam)

	r, err := Boot(context.Background(), t.TempDir(), Machine{
		Kernel: k, Initrd: initrd, IntRemap: true, MemMB: 2048, Timeout: 15 * time.Minute,
		Append: "rdinit=/sbin/init systemd.show_status=0",
	})
	t.Logf("%s: guest ran %v; %s", qv, r.Elapsed.Round(time.Millisecond), uptimes(r.Output))
	if err != nil {
		dumpGuest(t, r)
		t.Fatal(err)
	}
	var want []string
	for _, f := range []string{"testdata/appliance.sh", "testdata/lifecycle.sh"} {
		script, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range scriptStepRE.FindAllStringSubmatch(string(script), -1) {
			want = append(want, m[1])
		}
	}
	checkSteps(t, r, want)

	facts := map[string]string{}
	for _, l := range strings.Split(r.Output, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), "FACT "); ok {
			k, v, _ := strings.Cut(rest, " ")
			facts[k] = v
		}
	}
	t.Logf("upgrade from %q to %s: clients back after %s s", facts["upgrade.from"], nextVersion, facts["upgrade.reconnect_s"])
	if facts["unit_user"] != "ovfwd" {
		t.Errorf("unit User=%q, want ovfwd", facts["unit_user"])
	}
	// The main process as phase 1 started it, and as it runs while it
	// translates (phase 2, after the NAT steps).
	mask, names := unitCaps(t)
	for _, pre := range []string{"", "nat."} {
		if facts[pre+"user"] != "ovfwd" {
			t.Errorf("%smain process runs as %q, want ovfwd", pre, facts[pre+"user"])
		}
		for _, set := range []string{"CapPrm", "CapEff", "CapAmb", "CapBnd"} {
			got, err := strconv.ParseUint(facts[pre+"status."+set], 16, 64)
			if err != nil || got != mask {
				t.Errorf("%s/proc/<pid>/status %s = %q, want %016x (%s)", pre, set, facts[pre+"status."+set], mask, strings.Join(names, " "))
			}
		}
		if inh := facts[pre+"status.CapInh"]; inh != fmt.Sprintf("%016x", mask) && inh != "0000000000000000" {
			t.Errorf("%sCapInh = %q", pre, inh)
		}
		if facts[pre+"status.NoNewPrivs"] != "1" {
			t.Errorf("%sNoNewPrivs = %q, the unit sets NoNewPrivileges=yes", pre, facts[pre+"status.NoNewPrivs"])
		}
	}
}
