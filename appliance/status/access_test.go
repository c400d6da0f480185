package status

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadAndWriteRoles: with a read group and a write group, a process
// in neither can neither read nor kill, the read group's member reads but
// its kill is refused, and the write group's member does both; each is
// judged by its credentials at connect, through a socket any local user
// can open.
func TestReadAndWriteRoles(t *testing.T) {
	if p := os.Getenv("OVFWD_ROLE_HELPER"); p != "" {
		_, err := Fetch(p, 3*time.Second)
		fmt.Println("fetch:", err)
		_, err = Kill(p, "alice", false, 3*time.Second)
		fmt.Println("kill:", err)
		return
	}
	if os.Geteuid() != 0 {
		if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
			t.Fatal("needs root to run clients as another user")
		}
		t.Skip("needs root to run clients as another user")
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
	const readGID, writeGID = 64001, 64002 // numeric: setpriv needs no group entry
	path := filepath.Join(dir, "ovfwd.sock")
	var calls atomic.Int32
	srv, err := ListenAccess(path, sample, func(Request) Reply { calls.Add(1); return Reply{Killed: 1} },
		Access{ReadGID: readGID, WriteGID: writeGID})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("socket mode %v (%v), want 0666 with a read group", fi.Mode(), err)
	}
	for _, c := range []struct {
		who, groups      string
		read, write      bool
		callsAfterClient int32
	}{
		{"in neither group", "--clear-groups", false, false, 0},
		{"in the read group", fmt.Sprintf("--groups=%d", readGID), true, false, 0},
		{"in the write group", fmt.Sprintf("--groups=%d", writeGID), true, true, 1},
	} {
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", c.groups, os.Args[0], "-test.run=^TestReadAndWriteRoles$")
		cmd.Env = append(os.Environ(), "OVFWD_ROLE_HELPER="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: helper: %v\n%s", c.who, err, out)
		}
		s := string(out)
		if got := strings.Contains(s, "fetch: <nil>"); got != c.read {
			t.Errorf("%s: read allowed %v, want %v:\n%s", c.who, got, c.read, s)
		}
		if !c.read && !strings.Contains(s, "fetch: status: "+path+": permission denied") {
			t.Errorf("%s: the refused read does not say why:\n%s", c.who, s)
		}
		if got := strings.Contains(s, "kill: <nil>"); got != c.write {
			t.Errorf("%s: kill allowed %v, want %v:\n%s", c.who, got, c.write, s)
		}
		if n := calls.Load(); n != c.callsAfterClient {
			t.Errorf("%s: the kill handler ran %d times in all, want %d", c.who, n, c.callsAfterClient)
		}
	}
}

// Without a read group, reading is left to the socket's mode (0660) and
// anyone who can connect reads.
func TestDefaultAccessReadsByMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	srv, err := ListenCommands(path, sample, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v (%v), want 0660", fi.Mode(), err)
	}
	if DefaultAccess().ReadGID != -1 || DefaultAccess().WriteGID != os.Getegid() {
		t.Errorf("default access %+v", DefaultAccess())
	}
	if _, err := Fetch(path, 2*time.Second); err != nil {
		t.Error(err)
	}
}
