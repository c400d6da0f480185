// Package unittest is the unit helpers (package unit) for tests: each fails
// its test on error. It is apart from unit so that nothing but tests links
// the testing package.
package unittest

import (
	"os"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/testbed/unit"
)

// Load is unit.Load for a test, which it fails on error.
func Load(t testing.TB) *unit.Unit {
	t.Helper()
	u, err := unit.Load()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TempDir is u.MkdirTemp for a test, removed when it ends.
func TempDir(t testing.TB, u *unit.Unit) string {
	t.Helper()
	dir, err := u.MkdirTemp("ovfwd-unit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Check is u.Report for a test, which it fails when pid does not run as
// the unit says.
func Check(t testing.TB, u *unit.Unit, pid int) {
	t.Helper()
	if err := u.Report(pid, t.Logf); err != nil {
		t.Fatal(err)
	}
}
