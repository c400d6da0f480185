package fwd

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

func heapLive() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// An engine's frame rings (punt, inject, uplink: ~7 MiB a worker) are
// not Go heap: counted as live data they doubled the collector's target
// and let ~7 MiB of garbage become resident in a neighbour storm (the
// hostile-LAN soak's RSS step).
func TestFrameRingsOffHeap(t *testing.T) {
	before := heapLive()
	r := newSPSCRing[puntSlot](UplinkRingSlots)
	after := heapLive()
	if grew := int64(after) - int64(before); grew > 64<<10 {
		t.Errorf("a %d-slot frame ring grew the live heap by %d KiB", UplinkRingSlots, grew>>10)
	}
	// It works as a ring.
	s := r.slot()
	s.port, s.n, s.data[2047] = 7, 1, 0xaa
	r.publish()
	if n := r.drain(func(s *puntSlot) {
		if s.port != 7 || s.data[2047] != 0xaa {
			t.Errorf("slot %+v", s.port)
		}
	}); n != 1 {
		t.Errorf("drained %d", n)
	}
	runtime.KeepAlive(r)
}

// Unreachable rings give their mappings back.
func TestFrameRingsUnmapped(t *testing.T) {
	vm := func() int {
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Fatal("no /proc/self/status")
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmSize:"); ok {
				var kb int
				fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
				return kb
			}
		}
		return 0
	}
	v0 := vm()
	for range 200 { // 4 MiB each
		_ = newSPSCRing[puntSlot](UplinkRingSlots)
	}
	var v1 int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		runtime.GC()
		if v1 = vm(); v1-v0 < 100<<10 {
			return
		}
	}
	t.Fatalf("VmSize %d → %d KiB after 200 dropped 4 MiB rings", v0, v1)
}
