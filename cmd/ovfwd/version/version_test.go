package version

import (
	"os/exec"
	"runtime/debug"
	"testing"
)

// TestFallbackSortsBelowReleases: an unstamped build still has a version
// dpkg accepts, and it sorts below the first release.
func TestFallbackSortsBelowReleases(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Fatalf("dpkg is needed to compare versions: %v", err)
	}
	for _, info := range []*debug.BuildInfo{nil, {Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "98f25f3dc6ba1234567890abcdef"}, {Key: "vcs.modified", Value: "true"}}}} {
		v := fallback(info)
		if out, err := exec.Command("dpkg", "--compare-versions", v, "lt", "0.0.1").CombinedOutput(); err != nil {
			t.Errorf("fallback version %q is not below 0.0.1: %v %s", v, err, out)
		}
		if out, err := exec.Command("dpkg", "--validate-version", v).CombinedOutput(); err != nil {
			t.Errorf("fallback version %q is not a valid Debian version: %v %s", v, err, out)
		}
	}
	if v := fallback(nil); v != "0.0.0~dev" {
		t.Errorf("fallback(nil) = %q", v)
	}
}
