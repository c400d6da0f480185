package unit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
)

// TestWrapperApplies starts a program through Argv in a namespace, as the
// suites start ovfwd, and checks in /proc that it runs as the unit says
// (Verify): its user, exactly its capabilities, no_new_privs, its limits.
// It also checks the umask, that the program can open /dev/net/tun (the
// export and exception devices) while this machine's node stays as it was,
// and that Verify fails for a process that does not run that way (this
// test's own, root with every capability).
func TestWrapperApplies(t *testing.T) {
	nstest.RequireRoot(t)
	u := unittest.Load(t)
	ns := nstest.New(t, "unt")
	dir := unittest.TempDir(t, u)
	mark := filepath.Join(dir, "run", "mark")
	hostTun, err := os.Stat("/dev/net/tun")
	if err != nil {
		t.Fatal(err)
	}
	// The program makes a file (to show the umask), opens the TUN device
	// and says so, then waits.
	script := `: > "$0" && exec 3<>/dev/net/tun && : > "$0.tun" && exec sleep 60`
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name}, u.Argv("sh", "-c", script, mark)...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	if err := u.Report(cmd.Process.Pid, t.Logf); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(mark)
	if err != nil {
		t.Fatal(err)
	}
	if want := os.FileMode(0o666 &^ u.UMask); fi.Mode().Perm() != want {
		t.Errorf("a file the program made is %v, want %v (umask %04o)", fi.Mode().Perm(), want, u.UMask)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != u.UID {
		t.Errorf("the program's file belongs to uid %d, want %d", st.Uid, u.UID)
	}
	if _, err := os.Stat(mark + ".tun"); err != nil {
		t.Errorf("the program could not open /dev/net/tun: %v", err)
	}
	if fi, err := os.Stat("/dev/net/tun"); err != nil || fi.Mode() != hostTun.Mode() || !os.SameFile(fi, hostTun) {
		t.Errorf("this machine's /dev/net/tun changed: %v, was %v (%v)", fi.Mode(), hostTun.Mode(), err)
	}
	if u.TunNode != 0 {
		t.Logf("/dev/net/tun is %v here: the program got a 0666 node in its own mount namespace", hostTun.Mode())
	}
	for _, l := range u.Limits {
		if l.Capped {
			t.Logf("applied at this machine's hard limit: %s", l)
		}
	}
	if err := u.Verify(os.Getpid()); err == nil || !strings.Contains(err.Error(), "CapEff") {
		t.Errorf("Verify accepts the test's own root process: %v", err)
	}
}
