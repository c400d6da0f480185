package vpnload

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestIngressOnServer: -ingress-on-server makes ovfwd's p0 NAPI a thread
// pinned to the server's CPU (and undoes it), and points openvpn's p0
// RPS at that CPU.
func TestIngressOnServer(t *testing.T) {
	l := newLab(t, 1, Options{})
	l.startOvfwd()
	read := func(path string) string {
		t.Helper()
		out, err := l.topo.srv.Run("cat", path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	napi, undo, err := l.topo.ingressOnServer(TargetOvfwd, 1)
	if err != nil {
		t.Fatal(err)
	}
	if napi == 0 {
		t.Fatal("no NAPI thread for ovfwd's native XDP port")
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(napi, &set); err != nil {
		t.Fatal(err)
	}
	if set.Count() != 1 || !set.IsSet(1) {
		t.Errorf("napi/p0 thread %d on %d CPUs (cpu 1: %v); want cpu 1 only", napi, set.Count(), set.IsSet(1))
	}
	if got := read("/sys/class/net/p0/threaded"); got != "1" {
		t.Errorf("p0 threaded = %q; want 1", got)
	}
	undo()
	if got := read("/sys/class/net/p0/threaded"); got != "0" {
		t.Errorf("after undo, p0 threaded = %q; want 0", got)
	}

	pid, undo, err := l.topo.ingressOnServer(TargetOpenVPN, 1)
	if err != nil {
		t.Fatal(err)
	}
	if pid != 0 {
		t.Errorf("RPS placement returned thread %d; want none", pid)
	}
	if got := read("/sys/class/net/p0/queues/rx-0/rps_cpus"); strings.TrimLeft(got, "0,") != "2" {
		t.Errorf("p0 rps_cpus = %q; want CPU 1's mask, 2", got)
	}
	undo()
	if got := read("/sys/class/net/p0/queues/rx-0/rps_cpus"); strings.Trim(got, "0,") != "" {
		t.Errorf("after undo, p0 rps_cpus = %q; want 0", got)
	}
}

// TestRunAB runs the bench briefly as an A/B of one ovfwd build against
// itself, its receive work on the server's CPU: both sides run, and the
// CPU split and the B/A ratios are printed.
func TestRunAB(t *testing.T) {
	l := newLab(t, 1, Options{}) // builds the daemon once for the package
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, &out, Options{Target: TargetOvfwd, OvfwdBin: l.o.OvfwdBin, OvfwdBinB: l.o.OvfwdBin,
		IngressOnServer: true, Clients: 4, Duration: time.Second, Runs: 1, PerClientPPS: 2000, Logf: t.Logf})
	t.Logf("\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Target != TargetOvfwd || res[1].Target != TargetOvfwdB {
		t.Fatalf("%d results; want ovfwd then ovfwd-b", len(res))
	}
	for _, r := range res {
		// Traffic must get through each side; how much depends on the
		// machine's other load (a starved generator offered 714 pkt/s of
		// the 8000 asked, a starved NAPI thread refused a fifth of them).
		if r.Delivered == 0 || r.Offered == 0 {
			t.Errorf("%s: delivered %d of %d offered packets", r.Target, r.Delivered, r.Offered)
		}
		if s := r.ServerSplit; s.ProcUser+s.ProcSystem <= 0 || s.ProcUser+s.ProcSystem > 1.5 {
			t.Errorf("%s: server CPU split %+v; want the server's share of its CPU", r.Target, s)
		}
	}
	for _, want := range []string{"ovfwd-b/ovfwd:", "where cpu 1 went", "receive work on cpu 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
