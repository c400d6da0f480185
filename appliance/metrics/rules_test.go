package metrics

import (
	"os/exec"
	"testing"
)

const alertRules = "../../packaging/prometheus/ovfwd-alerts.yml"

func promtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatal("promtool is not installed (.ci/install-deps installs Debian's prometheus, which has it)")
	}
	cmd := exec.Command("promtool", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
	t.Logf("promtool %v:\n%s", args, out)
}

// The shipped alert rules load, and promtool's unit tests
// (testdata/alerts_test.yml) see each alert fire on the series that
// should raise it and only there.
func TestAlertRules(t *testing.T) {
	promtool(t, ".", "check", "rules", alertRules)
	promtool(t, "testdata", "test", "rules", "alerts_test.yml")
}
