package vmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// fastPathTests are the afxdp tests that load the XDP fast path and run
// it with BPF_PROG_TEST_RUN against the engine: they need root and BPF,
// no network namespace.
const fastPathTests = `^(TestSteeringLoads|TestFastPath(MatchesEngine|Martians|FinishesPartialChecksums|RandomFrames|PuntsSYNWhenClamping|BridgeMatchesEngine|BridgeRandomFrames))$`

// TestFastPathGuest runs the XDP fast path's differential tests (the real
// program in the kernel against fwd.Engine, byte for byte) on Linux 6.1:
// its verifier refuses what later ones accept (bounds lost over a byte
// swap, nothing learnt from a JNE against 0), and the host runs a later
// kernel.
func TestFastPathGuest(t *testing.T) {
	nstest.RequireRoot(t)
	if _, err := QEMUVersion(); err != nil {
		t.Fatal(err)
	}
	k, err := GetKernel()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "afxdp.test")
	cmd := exec.Command("go", "test", "-c", "-o", bin, "github.com/ovfwd/ovfwd/appliance/afxdp")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./appliance/afxdp: %v\n%s", err, out)
	}
	if err := checkStatic(bin); err != nil {
		t.Fatal(err)
	}
	initrd := filepath.Join(dir, "initrd")
	script := `echo "KERNEL $(uname -r)"
OVFWD_REQUIRE_PRIV=1 /afxdp.test -test.v -test.count=1 -test.run '` + fastPathTests + `' >/tmp/out 2>&1
rc=$?
grep -E '^(--- |PASS|FAIL|ok)' /tmp/out
[ $rc = 0 ] || tail -n 60 /tmp/out
echo "VMTEST exit $rc"`
	if err := BusyboxInitramfs(initrd, k, nil, map[string]string{"/afxdp.test": bin}, script); err != nil {
		t.Fatal(err)
	}
	r := bootGuest(t, Machine{Kernel: k, Initrd: initrd, MemMB: 1024, Timeout: 5 * time.Minute})
	t.Logf("guest output:\n%s", r.Output)
	if !regexp.MustCompile(`(?m)^VMTEST exit 0\s*$`).MatchString(r.Output) {
		t.Fatal("the fast path's tests failed on the guest's kernel")
	}
	if n := len(regexp.MustCompile(`(?m)^--- PASS: `).FindAllString(r.Output, -1)); n < 7 {
		t.Fatalf("%d tests passed on the guest's kernel, want 7", n)
	}
}
