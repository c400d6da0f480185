package unit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The packaged unit parses to what the daemon is documented to get.
func TestParsePackaged(t *testing.T) {
	u, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if u.User != "ovfwd" || !u.NoNewPrivs || u.UMask != 0o027 {
		t.Errorf("user %q, no_new_privs %v, umask %04o", u.User, u.NoNewPrivs, u.UMask)
	}
	if Mask(u.Ambient)&(1<<capBits["sys_admin"]) != 0 || Mask(u.Ambient)&(1<<capBits["net_admin"]) == 0 {
		t.Errorf("ambient %v", u.Ambient)
	}
	if l, ok := u.Limit("nice"); !ok || l.Unit != 25 {
		t.Errorf("LimitNICE=-5 gives %+v, want the rlimit 25", l)
	}
	if l, ok := u.Limit("memlock"); !ok || l.Unit != Infinity {
		t.Errorf("LimitMEMLOCK=infinity gives %+v", l)
	}
	if u.UID == 0 || u.GID == 0 {
		t.Errorf("runs as %d:%d", u.UID, u.GID)
	}
}

// A unit line the wrapper cannot apply is an error, not ignored.
func TestParseRefuses(t *testing.T) {
	base := "[Service]\nUser=ovfwd\nAmbientCapabilities=CAP_NET_ADMIN\nCapabilityBoundingSet=CAP_NET_ADMIN\n"
	for _, extra := range []string{"LimitAS=1000\n", "LimitNOFILE=lots\n", "AmbientCapabilities=CAP_NEW_THING\n", "UMask=9\n"} {
		if _, err := Parse(base + extra); err == nil {
			t.Errorf("%q accepted", extra)
		}
	}
	if _, err := Parse("[Service]\nAmbientCapabilities=CAP_NET_ADMIN\n"); err == nil {
		t.Error("a unit without a user accepted")
	}
}

// Access follows the path: a 0700 directory stops the unit's user even
// where the file itself is world-readable.
func TestAccess(t *testing.T) {
	u := &Unit{UID: 65534, GID: 65534}
	dir, err := os.MkdirTemp("", "ovfwd-unit-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	inner := filepath.Join(dir, "closed")
	if err := os.Mkdir(inner, 0o700); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(inner, "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := u.Access(f, Read); err == nil || !strings.Contains(err.Error(), inner) {
		t.Errorf("Access through a 0700 directory: %v", err)
	}
	if err := os.Chmod(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := u.Access(f, Read); err != nil {
		t.Error(err)
	}
	if err := u.Access(f, Write); err == nil {
		t.Error("a 0644 file of another user is writable")
	}
}
