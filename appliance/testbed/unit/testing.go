package unit

import (
	"os"
	"testing"
)

// ForTest is Load for a test, which it fails on error.
func ForTest(t testing.TB) *Unit {
	t.Helper()
	u, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TempDir is MkdirTemp for a test, removed when it ends.
func (u *Unit) TempDir(t testing.TB) string {
	t.Helper()
	dir, err := u.MkdirTemp("ovfwd-unit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Check is Report for a test, which it fails when pid does not run as the
// unit says.
func (u *Unit) Check(t testing.TB, pid int) {
	t.Helper()
	if err := u.Report(pid, t.Logf); err != nil {
		t.Fatal(err)
	}
}
