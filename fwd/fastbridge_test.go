package fwd_test

import (
	"net"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

// FastBridge lists what the workers learned, with the ports' untagged
// VLANs, and leaves out a MAC in its last seconds before ageing (so its
// frames reach the workers, which refresh it) and one that aged.
func TestFastBridgeViewLearnsAndAges(t *testing.T) {
	r := newRig(t, rigOpt{mode: fwd.ModeBridge, nports: 3})
	must(t, r.e.SetPortVLAN(2, fwd.PortVLAN{Untagged: 7}))
	r.inject(0, l2(macB, macA))
	r.inject(1, l2(macA, macB))
	r.poll()
	r.drain(0)
	r.drain(1)
	r.drain(2)
	find := func(v fwd.FastBridgeView, mac net.HardwareAddr) (fwd.FastMAC, bool) {
		for _, m := range v.MACs {
			if net.HardwareAddr(m.MAC[:]).String() == mac.String() {
				return m, true
			}
		}
		return fwd.FastMAC{}, false
	}
	v := r.e.FastBridge()
	if len(v.Ports) != 3 || v.Ports[0].PVID != 1 || v.Ports[2].PVID != 7 || v.Ports[1].MTU == 0 {
		t.Fatalf("ports %+v", v.Ports)
	}
	if m, ok := find(v, macA); !ok || m.Port != 0 || m.VLAN != 1 {
		t.Fatalf("A: %+v %v in %+v", m, ok, v.MACs)
	}
	if m, ok := find(v, macB); !ok || m.Port != 1 {
		t.Fatalf("B: %+v %v", m, ok)
	}
	// The generation moves when a station is learned or moves, not when
	// it is refreshed.
	g0 := r.e.FastBridgeGen()
	r.inject(0, l2(macB, macA)) // A again, same port, a second later
	r.advance(time.Second)
	r.poll()
	r.drain(1)
	if g := r.e.FastBridgeGen(); g != g0 {
		t.Fatalf("generation moved on a refresh: %d → %d", g0, g)
	}
	r.inject(2, l2(macB, macA)) // A moves to port 2
	r.poll()
	r.drain(1)
	if g := r.e.FastBridgeGen(); g == g0 {
		t.Fatal("generation did not move when A moved")
	}
	g1 := r.e.FastBridgeGen()
	r.inject(0, l2(macB, macC)) // C is new
	r.poll()
	r.drain(1)
	if g := r.e.FastBridgeGen(); g == g1 {
		t.Fatal("generation did not move when C was learned")
	}
	r.inject(0, l2(macB, macA)) // A back on port 0
	r.poll()
	r.drain(1)
	r.drain(2)

	// A keeps talking, B falls silent: 296 s later (default ageing 300 s)
	// B is within the margin and left out, A is not.
	r.advance(296 * time.Second)
	r.inject(0, l2(macC, macA))
	r.poll()
	r.drain(1)
	r.drain(2)
	v = r.e.FastBridge()
	if _, ok := find(v, macA); !ok {
		t.Fatal("A left out although refreshed")
	}
	if m, ok := find(v, macB); ok {
		t.Fatalf("B listed 4 s before ageing out: %+v", m)
	}
	r.advance(10 * time.Second)
	if _, ok := find(r.e.FastBridge(), macB); ok {
		t.Fatal("aged B listed")
	}
}
