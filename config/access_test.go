package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// As root every permission passes (root's DAC override), so the fixes are
// exercised as another user by cmd/ovfwd's and the migration suite's
// tests; here: a path root reaches needs no fix, a missing one none either.
func TestPermissionFixNothingInTheWay(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if fix := PermissionFix(p, AccessRead); fix != "" {
			t.Errorf("fix %q for a file root can read", fix)
		}
	}
	if fix := PermissionFix(filepath.Join(p, "missing"), AccessRead); strings.Contains(fix, "chmod") && os.Geteuid() == 0 {
		t.Errorf("fix %q for a missing file", fix)
	}
}
