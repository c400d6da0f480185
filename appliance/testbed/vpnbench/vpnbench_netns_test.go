package vpnbench_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpnbench"
)

// TestRunShort runs the comparison with one short round: both servers
// carry traffic both ways through the tunnel and are charged CPU for it.
func TestRunShort(t *testing.T) {
	nstest.RequireRoot(t)
	for _, tool := range []string{"openvpn", "iperf3", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make deps installs it)", tool)
		}
	}
	bin := ovfwdBinary(t)
	var out bytes.Buffer
	dir := unittest.TempDir(t, unittest.Load(t)) // the daemon's tree: its parents let the unit's user through
	res, err := vpnbench.Run(context.Background(), &out, vpnbench.Options{Binary: bin, Rounds: 1, Duration: 2 * time.Second, Tag: "vpbt", Dir: dir})
	t.Logf("\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Samples) != 2 || res.Samples[0].Server != vpnbench.Ovfwd || res.Samples[1].Server != vpnbench.OpenVPN {
		t.Fatalf("samples %+v, want ovfwd then openvpn", res.Samples)
	}
	for _, s := range res.Samples {
		if s.UpMbps <= 0 || s.DownMbps <= 0 || s.Bytes <= 0 {
			t.Errorf("%s moved nothing: %+v", s.Server, s)
		}
		// Encrypting and decrypting ≥ some MB costs CPU: a zero means the
		// wrong process was measured.
		if s.CPUSeconds <= 0 {
			t.Errorf("%s charged no CPU for %d bytes", s.Server, s.Bytes)
		}
	}
	// Both servers leave the MSS to the client's mssfix: the same segments.
	if a, b := res.Samples[0], res.Samples[1]; a.UpMSS == 0 || a.UpMSS != b.UpMSS || a.DownMSS != b.DownMSS {
		t.Errorf("MSS up/down: ovfwd %d/%d, openvpn %d/%d: not the same TCP segments", a.UpMSS, a.DownMSS, b.UpMSS, b.DownMSS)
	}
	if !strings.Contains(out.String(), "ratio ovfwd/openvpn") {
		t.Error("no ratio line in the report")
	}
}

// BenchmarkVPN is the full comparison (ovfwd bench vpn -tcp):
// go test -run '^$' -bench VPN -benchtime 1x ./appliance/testbed/vpnbench/
func BenchmarkVPN(b *testing.B) {
	nstest.RequireRoot(b)
	bin := ovfwdBinary(b)
	for i := 0; i < b.N; i++ {
		var out bytes.Buffer
		res, err := vpnbench.Run(context.Background(), &out, vpnbench.Options{Binary: bin})
		b.Logf("\n%s", out.String())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.Ovfwd.UpMbps, "ovfwd-up-Mb/s")
		b.ReportMetric(res.Ovfwd.DownMbps, "ovfwd-down-Mb/s")
		b.ReportMetric(res.Ovfwd.CPUPerGB, "ovfwd-CPU-s/GB")
		b.ReportMetric(res.OpenVPN.UpMbps, "openvpn-up-Mb/s")
		b.ReportMetric(res.OpenVPN.DownMbps, "openvpn-down-Mb/s")
		b.ReportMetric(res.OpenVPN.CPUPerGB, "openvpn-CPU-s/GB")
	}
}

// ovfwdBinary is the binary under test: $OVFWD_BIN (make test) or a fresh build.
func ovfwdBinary(tb testing.TB) string {
	tb.Helper()
	if bin := os.Getenv("OVFWD_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(tb.TempDir(), "ovfwd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ovfwd/ovfwd/cmd/ovfwd").CombinedOutput(); err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
