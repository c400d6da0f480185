package afxdp

import (
	"encoding/binary"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/fwd"
)

// The suite's fast-path switch, as appliance/testbed/vpne2e's
// (FastPathEnv): with OVFWD_TEST_FAST_PATH=xdp every port the suite opens
// has the XDP fast path in its program and on (routed and bridged), with
// tables where an engine forwards between ports (runBridge mirrors the
// learned MACs as the daemon does), and the hosts' veth ends run GRO, which
// the kernel needs to take a frame redirected into their peer. Tests whose
// traffic crosses the box then assert that the fast path carried some of
// it; the rest must simply pass as they do without it.
const suiteFastEnv = "OVFWD_TEST_FAST_PATH"

func suiteFastForced() bool { return os.Getenv(suiteFastEnv) == "xdp" }

var suiteFPs sync.Map // testing.TB -> *FastPath

// suiteFastPath is the test's shared fast path when the suite forces it
// (nil otherwise): one per test, so ports opened by one test share it.
func suiteFastPath(t testing.TB) *FastPath {
	if !suiteFastForced() {
		return nil
	}
	if v, ok := suiteFPs.Load(t); ok {
		return v.(*FastPath)
	}
	fp, err := NewFastPath()
	if err != nil {
		t.Fatal(err)
	}
	suiteFPs.Store(t, fp)
	t.Cleanup(func() { suiteFPs.Delete(t); fp.Close() })
	return fp
}

// suiteFastOn turns both fast paths on for a port the suite opened with
// its fast path: with no tables yet, everything is punted.
func suiteFastOn(t testing.TB, p *Port, index uint16) {
	if err := p.SetFast(true, false); err != nil {
		t.Fatal(err)
	}
	if err := p.SetFastBridge(true, int(index), 1); err != nil {
		t.Fatal(err)
	}
}

// suiteFastBridge, when the suite forces the fast path, mirrors e's
// learned MACs into the ports' fast path every 20 ms until the test ends
// and gives the hosts' veth ends GRO; it returns what the fast path
// forwarded so far on both ports' ingress (nil without it).
func suiteFastBridge(t *testing.T, tp *topo, e *fwd.Engine, pa, pb *Port) func() uint64 {
	fp := pa.fast
	if !suiteFastForced() || fp == nil || fp != pb.fast {
		return nil // not opened with the suite's fast path (openIn)
	}
	nstest.Run(t, tp.a, "ethtool", "-K", "h8a0", "gro", "on")
	nstest.Run(t, tp.b, "ethtool", "-K", "h8b0", "gro", "on")
	fs, err := NewFastSync(fp, []int{pa.Ifindex(), pb.Ifindex()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Port{pa, pb} {
		if err := p.SetFast(false, false); err != nil { // a bridge routes nothing
			t.Fatal(err)
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if err := fs.ApplyBridge(e.FastBridge()); err != nil {
					t.Errorf("fast path mirror: %v", err)
					return
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	// Both hosts learned and mirrored before the test's own traffic: a
	// short ping, then up to 5 s for their two MACs with a redirect target.
	if out, err := tp.a.Run("ping", "-c", "2", "-i", "0.2", "-W", "2", hostB); err != nil {
		t.Fatalf("warm-up ping: %v\n%s", err, out)
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n := 0
		var k [fastMACKeySize]byte
		var v [fastMACSize]byte
		for it := fp.macs.Iterate(); it.Next(&k, &v); {
			if binary.NativeEndian.Uint32(v[:]) != 0 {
				n++
			}
		}
		if n >= 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the hosts' MACs not in the fast path after 5 s (%d)", n)
		}
	}
	return func() uint64 {
		var n uint64
		for _, p := range []*Port{pa, pb} {
			st, err := p.FastStats()
			if err != nil {
				t.Fatal(err)
			}
			n += st[FastForwarded]
		}
		return n
	}
}
