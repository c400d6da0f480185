package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"golang.org/x/sys/unix"
)

// refuseLiveFrames makes BPF_PROG_TEST_RUN with live frames fail as a
// kernel that refuses it does (EPERM, even to root) for the rest of t.
func refuseLiveFrames(t *testing.T) {
	run := liveFramesRun
	liveFramesRun = func(p *ebpf.Program, o *ebpf.RunOptions) (uint32, error) {
		if o.Flags&unix.BPF_F_TEST_XDP_LIVE_FRAMES != 0 {
			return 0, unix.EPERM
		}
		return run(p, o)
	}
	t.Cleanup(func() { liveFramesRun = run })
}

// refuseAFXDP makes AF_XDP sockets fail as on a kernel built without them.
func refuseAFXDP(t *testing.T) {
	open := xdpSocket
	xdpSocket = func() (int, error) { return -1, unix.EAFNOSUPPORT }
	t.Cleanup(func() { xdpSocket = open })
}

// A refused live-frames run is an error, with nothing left open and no
// panic in the cleanup of what was opened before the refusal.
func TestLiveGenRefused(t *testing.T) {
	nstest.RequireRoot(t)
	refuseLiveFrames(t)
	frames := flowFrames([]byte{2, 0, 0, 0, 0, 1}, []byte{2, 0, 0, 0, 0, 2}, 4)
	g, err := newLiveGen(1, frames)
	if !errors.Is(err, unix.EPERM) || g != nil {
		t.Fatalf("newLiveGen with live frames refused: %v, %v; want nil and EPERM", g, err)
	}
}

// The default generator falls back when the kernel refuses live frames
// (to AF_XDP), and AF_XDP too (to AF_PACKET); the generator that ran then
// sends, and the result and the report name it and why it was chosen.
func TestFwdGenFallback(t *testing.T) {
	nstest.RequireRoot(t)
	for _, c := range []struct {
		name   string
		refuse []func(*testing.T)
		gen    string
		why    []string
	}{
		{"live-frames-refused", []func(*testing.T){refuseLiveFrames}, genAFXDP,
			[]string{"XDP live frames refused", "operation not permitted"}},
		{"live-frames-and-afxdp-refused", []func(*testing.T){refuseLiveFrames, refuseAFXDP}, genAFPacket,
			[]string{"XDP live frames refused", "operation not permitted", "AF_XDP refused", "address family not supported"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range c.refuse {
				r(t)
			}
			var out bytes.Buffer
			res, err := Fwd(context.Background(), &out, FwdOptions{GenOnly: true, Rounds: 1, Duration: time.Second, Warmup: 300 * time.Millisecond, MaxPackets: 2_000_000})
			t.Log("\n" + out.String())
			if err != nil {
				t.Fatal(err)
			}
			if res.Gen != c.gen {
				t.Errorf("generator %q, want %q", res.Gen, c.gen)
			}
			for _, w := range c.why {
				if !strings.Contains(res.GenFallback, w) {
					t.Errorf("fallback reason %q does not say %q", res.GenFallback, w)
				}
			}
			if line := "generator: default generator fell back to " + c.gen + ": "; !strings.Contains(out.String(), line) {
				t.Errorf("report does not say %q", line)
			}
			if !strings.Contains(out.String(), "; generator: "+c.gen+": ") {
				t.Errorf("report does not name generator %s", c.gen)
			}
			if len(res.Runs) != 1 || res.Runs[0].Sent == 0 || res.Runs[0].Forwarded == 0 {
				t.Errorf("the %s generator sent nothing counted: %+v", c.gen, res.Runs)
			}
		})
	}
}

// A kernel that refuses to move the appliance's ingress work to its CPU
// (threaded NAPI for the native-XDP side, RPS for Linux's): the routed run
// still forwards on every side, the ingress stays in softirq on the
// generator's CPU, and the result and the report say so and leave the CPU
// costs out.
func TestFwdIngressMoveRefused(t *testing.T) {
	nstest.RequireRoot(t)
	for _, c := range []struct {
		name   string
		refuse func(*testing.T)
		why    string
	}{
		{"threaded-napi", func(t *testing.T) {
			orig := setThreaded
			setThreaded = func(ns *netns.NS, ifname string, on bool) error {
				if on {
					return unix.EOPNOTSUPP
				}
				return orig(ns, ifname, on)
			}
			t.Cleanup(func() { setThreaded = orig })
		}, "threaded NAPI refused (operation not supported)"},
		{"rps", func(t *testing.T) {
			orig := setRPS
			setRPS = func(ns *netns.NS, ifname string, mask int) error {
				if mask != 0 {
					return unix.ENOENT
				}
				return orig(ns, ifname, mask)
			}
			t.Cleanup(func() { setRPS = orig })
		}, "RPS refused (no such file or directory)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.refuse(t)
			var out bytes.Buffer
			res, err := Fwd(context.Background(), &out, FwdOptions{Gen: genAFXDP, Rounds: 1, Duration: time.Second, Warmup: 300 * time.Millisecond, MaxPackets: 5_000_000})
			t.Log("\n" + out.String())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.IngressFallback, c.why) || !strings.Contains(out.String(), "ingress: "+c.why) {
				t.Errorf("ingress fallback %q; the result and the report must say %q", res.IngressFallback, c.why)
			}
			if !strings.Contains(out.String(), "appliance-CPU cost: not comparable") || res.CostRatio != 0 {
				t.Errorf("CPU costs reported (ratio %v) although the ingress ran on the generator's CPU", res.CostRatio)
			}
			for _, r := range res.Runs {
				if r.Sent == 0 || r.Forwarded == 0 {
					t.Errorf("%s: sent %d forwarded %d", r.Side, r.Sent, r.Forwarded)
				}
			}
		})
	}
}
