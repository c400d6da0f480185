package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
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
	noGroups := errors.New("injected: SO_PEERGROUPS refused")
	for _, c := range []struct {
		what   string
		cred   unix.Ucred
		groups []uint32
		gerr   error
		ok     bool
	}{
		{"root", unix.Ucred{Pid: 1, Uid: 0, Gid: 0}, nil, nil, true},
		{"the daemon's user", unix.Ucred{Pid: 2, Uid: daemonUID, Gid: 1000}, nil, nil, true},
		{"primary group ovfwd", unix.Ucred{Pid: 3, Uid: 1000, Gid: daemonGID}, nil, nil, true},
		{"supplementary group ovfwd", unix.Ucred{Pid: 7, Uid: 1000, Gid: 1000}, []uint32{100, daemonGID}, nil, true},
		{"anyone else", unix.Ucred{Pid: 8, Uid: 1000, Gid: 1000}, []uint32{100}, nil, false},
		// Without the peer's groups only what SO_PEERCRED shows passes.
		{"groups unknown: root", unix.Ucred{Pid: 1, Uid: 0, Gid: 0}, nil, noGroups, true},
		{"groups unknown: primary group ovfwd", unix.Ucred{Pid: 3, Uid: 1000, Gid: daemonGID}, nil, noGroups, true},
		{"groups unknown: anyone else", unix.Ucred{Pid: 7, Uid: 1000, Gid: 1000}, nil, noGroups, false},
	} {
		err := authorize(&c.cred, c.groups, c.gerr, daemonUID, daemonGID)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want allowed %v", c.what, err, c.ok)
		}
		if err != nil && c.gerr != nil && !strings.Contains(err.Error(), "SO_PEERGROUPS: injected") {
			t.Errorf("%s: the refusal does not say the groups were unknown: %v", c.what, err)
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

// TestPeerGroupsAtConnect: a write operation is judged by the groups the
// peer had when it connected (SO_PEERGROUPS), not by whatever /proc/PID
// says when the request arrives. Here the connecting process (nobody,
// primary group nogroup, supplementary group the daemon's) hands its
// connection to a child and exits; the child sends the kill once the
// parent's PID is gone, so /proc has nothing to say about it.
func TestPeerGroupsAtConnect(t *testing.T) {
	switch os.Getenv("OVFWD_PEER_HELPER") {
	case "connect":
		c, err := net.Dial("unix", os.Getenv("OVFWD_PEER_SOCK"))
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		f, err := c.(*net.UnixConn).File()
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		// The child waits for this process's PID to be gone, sends the
		// kill and keeps the reply. It is a shell: nobody cannot run this
		// test binary from go test's private directory.
		// It polls with builtins only: the server answers a connection
		// that has sent nothing for a second with the snapshot.
		child := exec.Command("sh", "-c", `i=0; while [ -e /proc/$1 ] && [ $i -lt 1000000 ]; do i=$((i+1)); done
[ -e /proc/$1 ] && { echo "parent still there" > "$2"; exit 1; }
printf 'kill alice\n' >&3 && timeout 5 cat <&3 > "$2"`, "sh", strconv.Itoa(os.Getpid()), os.Getenv("OVFWD_PEER_OUT"))
		child.ExtraFiles = []*os.File{f}
		child.Stdout, child.Stderr = os.Stdout, os.Stderr // the test waits for them to close
		if err := child.Start(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0) // without waiting: the child outlives this process
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
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(dir, "out")
	if err := os.WriteFile(outFile, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(outFile, 0o666); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ovfwd.sock")
	var calls atomic.Int32
	srv, err := ListenCommands(path, sample, func(Request) Reply { calls.Add(1); return Reply{Killed: 1} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	gid := strconv.Itoa(os.Getegid())
	var got []byte
	// A loaded machine may take over a second from the connect to the
	// request, which the server then answers with the snapshot: try again
	// (a refusal or the kill ends it).
	for attempt := 0; attempt < 5 && !bytes.Contains(got, []byte("killed")) && !bytes.Contains(got, []byte("permission denied")); attempt++ {
		if err := os.WriteFile(outFile, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--groups="+gid, os.Args[0], "-test.run=^TestPeerGroupsAtConnect$")
		// Under -race a process sleeps a second before it exits
		// (atexit_sleep_ms), past the server's wait for the request.
		cmd.Env = append(os.Environ(), "OVFWD_PEER_HELPER=connect", "OVFWD_PEER_SOCK="+path, "OVFWD_PEER_OUT="+outFile, "GORACE=atexit_sleep_ms=0")
		// Both helpers write to its pipes, so this returns once both ended.
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		got, _ = os.ReadFile(outFile)
		if len(got) > 0 && !bytes.Contains(got, []byte("killed")) {
			t.Logf("attempt %d: %.80q", attempt, got)
		}
	}
	if string(got) != "{\"killed\":1}\n" || calls.Load() != 1 {
		t.Fatalf("a member of the daemon's group (gid %s) whose connecting process has exited: handler called %d times, reply %q", gid, calls.Load(), got)
	}
}
