package status

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseRequest(t *testing.T) {
	for line, want := range map[string]Request{
		"":                  {Op: OpStatus},
		"status":            {Op: OpStatus},
		"kill alice":        {Op: OpKill, Target: "alice"},
		"kill 1.2.3.4 halt": {Op: OpKill, Target: "1.2.3.4", Halt: true},
		"kill x restart":    {Op: OpKill, Target: "x"},
	} {
		got, err := ParseRequest(line)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", line, got, err, want)
		}
	}
	for _, bad := range []string{"kill", "kill a b c d", "kill a maybe", "reboot", "status now"} {
		if _, err := ParseRequest(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestKillCommand: a write operation reaches the handler for a permitted
// peer (the test runs as the daemon's own user), its reply comes back,
// and a client that writes nothing still gets the snapshot.
func TestKillCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ovfwd.sock")
	var got Request
	srv, err := ListenCommands(path, sample, func(r Request) Reply { got = r; return Reply{Killed: 2} })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	n, err := Kill(path, "alice", true, 2*time.Second)
	if err != nil || n != 2 || got != (Request{Op: OpKill, Target: "alice", Halt: true}) {
		t.Fatalf("kill: %d %v, handler saw %+v", n, err, got)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var s Snapshot
	if err := json.NewDecoder(c).Decode(&s); err != nil || s.PID != 42 {
		t.Fatalf("silent client: %v %+v", err, s)
	}
	ro, err := Listen(filepath.Join(t.TempDir(), "ro.sock"), sample)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := Kill(ro.Path(), "alice", false, 2*time.Second); err == nil {
		t.Error("a read-only socket took a kill")
	}
}

// TestAllowed is the permission rule for write operations.
func TestAllowed(t *testing.T) {
	const daemonUID, daemonGID = 990, 985
	groups := func(pid int32) []int {
		if pid == 7 {
			return []int{100, daemonGID}
		}
		return []int{100}
	}
	for _, c := range []struct {
		what string
		cred unix.Ucred
		ok   bool
	}{
		{"root", unix.Ucred{Pid: 1, Uid: 0, Gid: 0}, true},
		{"the daemon's user", unix.Ucred{Pid: 2, Uid: daemonUID, Gid: 1000}, true},
		{"primary group ovfwd", unix.Ucred{Pid: 3, Uid: 1000, Gid: daemonGID}, true},
		{"supplementary group ovfwd", unix.Ucred{Pid: 7, Uid: 1000, Gid: 1000}, true},
		{"anyone else", unix.Ucred{Pid: 8, Uid: 1000, Gid: 1000}, false},
	} {
		if got := allowed(&c.cred, daemonUID, daemonGID, groups); got != c.ok {
			t.Errorf("%s: allowed %v, want %v", c.what, got, c.ok)
		}
	}
}

// TestKillRefusedToOthers: with the socket opened to everyone (mode
// 0666, as an operator might for a monitoring user), a process that is
// not root, the daemon's user or in its group can read the status but
// its kill is refused by the peer-credential check.
func TestKillRefusedToOthers(t *testing.T) {
	if os.Getenv("OVFWD_STATUS_HELPER") != "" {
		_, err := Fetch(os.Getenv("OVFWD_STATUS_HELPER"), 3*time.Second)
		fmt.Println("fetch:", err)
		_, err = Kill(os.Getenv("OVFWD_STATUS_HELPER"), "alice", false, 3*time.Second)
		fmt.Println("kill:", err)
		return
	}
	if os.Geteuid() != 0 {
		if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
			t.Fatal("needs root to run a client as another user")
		}
		t.Skip("needs root to run a client as another user")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatal("setpriv (util-linux) not installed")
	}
	dir, err := os.MkdirTemp("", "ovfwd-status-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "ovfwd.sock")
	calls := 0
	srv, err := ListenCommands(path, sample, func(Request) Reply { calls++; return Reply{Killed: 1} })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	os.Chmod(path, 0o666)
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", os.Args[0], "-test.run=^TestKillRefusedToOthers$")
	cmd.Env = append(os.Environ(), "OVFWD_STATUS_HELPER="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "fetch: <nil>") || !strings.Contains(string(out), "kill: permission denied") || calls != 0 {
		t.Fatalf("as nobody: handler called %d times, output:\n%s", calls, out)
	}
}
