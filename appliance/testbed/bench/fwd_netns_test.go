package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// A short Fwd run measures both sides (something forwarded through each),
// reports queue modes and a ratio, and leaves no namespace behind. It
// asserts nothing about speed.
func TestFwdShort(t *testing.T) {
	nstest.RequireRoot(t)
	res := measureFwd(t, FwdOptions{Rounds: 1, Duration: time.Second, Warmup: 500 * time.Millisecond, MaxPackets: 5_000_000})
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(res.Runs))
	}
	for _, r := range res.Runs {
		if r.Sent == 0 || r.Forwarded == 0 {
			t.Errorf("%s: sent %d forwarded %d", r.Side, r.Sent, r.Forwarded)
		}
		if r.Forwarded > r.Sent+r.Sent/10+1000 {
			t.Errorf("%s: sink counted %d, more than the %d sent in the window", r.Side, r.Forwarded, r.Sent)
		}
	}
	if len(res.QueueModes) != 2 || res.Ratio == 0 {
		t.Errorf("queue modes %v, ratio %v", res.QueueModes, res.Ratio)
	}
	list, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(list), "-"+strconv.Itoa(os.Getpid())+"-") {
		t.Errorf("namespaces left behind:\n%s", list)
	}
}

// A short bridged run: both bridges pass the generator's frames to the
// sink, and ovfwd's did it in the fast path (the sink's and the
// generator's MACs learned and mirrored into its map). Nothing about speed.
func TestFwdBridgeShort(t *testing.T) {
	nstest.RequireRoot(t)
	res := measureFwd(t, FwdOptions{Bridge: true, Rounds: 1, Duration: time.Second, Warmup: 500 * time.Millisecond, MaxPackets: 5_000_000})
	for _, r := range res.Runs {
		if r.Sent == 0 || r.Forwarded == 0 {
			t.Errorf("%s: sent %d forwarded %d", r.Side, r.Sent, r.Forwarded)
		}
		if r.Side == "ovfwd" && r.Fast < r.Forwarded/2 {
			t.Errorf("ovfwd: the fast path forwarded %d frames of the %d the sink counted in the window", r.Fast, r.Forwarded)
		}
	}
}

// A short run with the default generator (XDP live frames where the
// kernel allows them, else a fallback TestFwdGenFallback covers) and the
// bare redirect: every side forwards something (with live frames Linux's
// bnA1 takes the generator's xdp_frames only with NAPI on, which it must
// have turned on: GRO, or an XDP_PASS program), ovfwd's in the fast path,
// and bpf_stats timed the bare and the steering program. Nothing about
// speed.
func TestFwdDefaultGenBare(t *testing.T) {
	nstest.RequireRoot(t)
	for _, pass := range []bool{false, true} {
		t.Run(fmt.Sprintf("linux_xdp_pass=%v", pass), func(t *testing.T) { testFwdXDPGenBare(t, pass) })
	}
}

func testFwdXDPGenBare(t *testing.T, linuxXDPPass bool) {
	res := measureFwd(t, FwdOptions{Bare: true, ProgStats: true, Rounds: 1, LinuxXDPPass: linuxXDPPass,
		Duration: time.Second, Warmup: 500 * time.Millisecond, MaxPackets: 20_000_000})
	t.Logf("generator %s %s", res.Gen, res.GenFallback)
	sides := map[string]bool{}
	for _, r := range res.Runs {
		sides[r.Side] = true
		if r.Sent == 0 || r.Forwarded == 0 {
			t.Errorf("%s: sent %d forwarded %d", r.Side, r.Sent, r.Forwarded)
		}
		if r.Side == "ovfwd" && r.Fast < r.Forwarded/2 {
			t.Errorf("ovfwd: the fast path forwarded %d frames of the %d the sink counted in the window", r.Fast, r.Forwarded)
		}
		if (r.Side == "ovfwd" || r.Side == "bare") && r.ProgNs <= 0 {
			t.Errorf("%s: no program run time from bpf_stats", r.Side)
		}
	}
	if len(sides) != 3 || res.BarePPS == 0 {
		t.Errorf("sides %v, bare %v pps", sides, res.BarePPS)
	}
}

// BenchmarkFwd is `ovfwd bench fwd` as a Go benchmark (root; run it with
// -benchtime 1x: one full A B A B run per iteration). Set
// OVFWD_BENCH_INGRESS_ON_GEN=1 to leave the ingress softirq on the
// generator's CPU, OVFWD_BENCH_GENERIC=1 to attach ovfwd's XDP program in
// generic mode, OVFWD_BENCH_BOOST=1 to renice ovfwd's threads.
func BenchmarkFwd(b *testing.B) {
	nstest.RequireRoot(b)
	o := FwdOptions{IngressOnGenCPU: os.Getenv("OVFWD_BENCH_INGRESS_ON_GEN") == "1"}
	o.Boost = os.Getenv("OVFWD_BENCH_BOOST") == "1"
	if os.Getenv("OVFWD_BENCH_GENERIC") == "1" {
		o.Attach = afxdp.ModeGeneric
	}
	for range b.N {
		res, err := Fwd(context.Background(), os.Stdout, o)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.OvfwdPPS, "ovfwd-pps")
		b.ReportMetric(res.LinuxPPS, "linux-pps")
		b.ReportMetric(res.Ratio, "ratio")
	}
}

// measureFwd runs Fwd with o, logging what it prints. A generator thread
// starved by other load can send nothing in a short window; that is a
// failed measurement, not a forwarding fault, so such a run is repeated
// (three attempts at most).
func measureFwd(t *testing.T, o FwdOptions) *FwdResult {
	t.Helper()
	for attempt := 1; ; attempt++ {
		var out bytes.Buffer
		res, err := Fwd(context.Background(), &out, o)
		t.Log("\n" + out.String())
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if attempt == 3 || !generatorStalled(res) {
			return res
		}
		t.Logf("attempt %d: a generator sent nothing in the window; measuring again", attempt)
	}
}

func generatorStalled(res *FwdResult) bool {
	for _, r := range res.Runs {
		if r.Sent == 0 {
			return true
		}
	}
	return false
}
