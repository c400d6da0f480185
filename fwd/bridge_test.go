package fwd_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

func l2(dst, src []byte) []byte { return eth(dst, src, 0x0800, make([]byte, 46)) }

func TestBridgeLearnFloodNoHairpinAging(t *testing.T) {
	r := newRig(t, rigOpt{mode: fwd.ModeBridge, nports: 3})
	// Unknown destination: flooded to every port but the ingress.
	r.inject(0, l2(macB, macA))
	r.poll()
	r.expectNone(0)
	r.drainOne(1)
	r.drainOne(2)
	// B answers from port 1: A was learned on port 0, so unicast there only.
	r.inject(1, l2(macA, macB))
	r.poll()
	if f := r.drainOne(0); !bytes.Equal(f[6:12], macB) {
		t.Fatal("wrong frame")
	}
	r.expectNone(2)
	// A to B now goes to port 1 only.
	r.inject(0, l2(macB, macA))
	r.poll()
	r.drainOne(1)
	r.expectNone(2)
	// Never back out of the ingress port.
	r.inject(0, l2(macA, macC))
	r.poll()
	r.expectNone(0)
	r.expectNone(1)
	r.expectNone(2)
	if r.drops(fwd.DropLoop) != 1 {
		t.Fatal("hairpin not counted as loop drop")
	}
	// Broadcast floods too.
	r.inject(1, l2(bcast, macB))
	r.poll()
	r.drainOne(0)
	r.drainOne(2)
	r.expectNone(1)
	// A moves to port 2.
	r.inject(2, l2(bcast, macA))
	r.poll()
	r.drain(0)
	r.drain(1)
	r.inject(1, l2(macA, macB))
	r.poll()
	r.drainOne(2)
	r.expectNone(0)
	// After the aging time B is forgotten: A to B floods again.
	r.advance(301 * time.Second)
	r.inject(2, l2(macB, macA))
	r.poll()
	r.drainOne(0)
	r.drainOne(1)
	if s := r.e.Stats(); s.Floods != 4 {
		t.Fatalf("floods %d, want 4", s.Floods)
	}
	r.checkNoLeak()
}

func TestBridgeVLANs(t *testing.T) {
	for _, sep := range []bool{false, true} {
		r := newRig(t, rigOpt{mode: fwd.ModeBridge, nports: 3, separate: sep})
		must(t, r.e.SetPortVLAN(0, fwd.PortVLAN{Untagged: 1, Tagged: []uint16{10}})) // trunk
		must(t, r.e.SetPortVLAN(1, fwd.PortVLAN{Untagged: 10}))                      // access VLAN 10
		must(t, r.e.SetPortVLAN(2, fwd.PortVLAN{Untagged: 1}))                       // access VLAN 1
		// Tagged 10 broadcast from the trunk: to port 1 untagged, not to port 2.
		r.inject(0, ethVLAN(bcast, macA, 10, 0x0800, make([]byte, 46)))
		r.poll()
		f := r.drainOne(1)
		if p := parseEth(t, f); p.vlan != -1 || p.etype != 0x0800 || len(f) != 60 || !bytes.Equal(p.src, macA) {
			t.Fatalf("access port got vlan %d etype %#x len %d", p.vlan, p.etype, len(f))
		}
		r.expectNone(2)
		// Untagged from the access port: to the trunk tagged 10.
		r.inject(1, l2(bcast, macB))
		r.poll()
		f = r.drainOne(0)
		if p := parseEth(t, f); p.vlan != 10 || p.etype != 0x0800 || !bytes.Equal(p.src, macB) || len(f) != 64 {
			t.Fatalf("trunk got vlan %d etype %#x len %d", p.vlan, p.etype, len(f))
		}
		r.expectNone(2)
		// Learned per VLAN: B is known in VLAN 10 only, so A→B in VLAN 1 floods to port 2.
		r.inject(0, l2(macB, macA))
		r.poll()
		r.drainOne(2)
		r.expectNone(1)
		// VLAN 20 is not on the trunk.
		r.inject(0, ethVLAN(bcast, macA, 20, 0x0800, make([]byte, 46)))
		r.poll()
		r.expectNone(1)
		r.expectNone(2)
		if r.drops(fwd.DropVLAN) != 1 {
			t.Fatal("VLAN 20 not dropped")
		}
		if s := r.e.Stats(); sep && s.Copies == 0 {
			t.Fatal("separate pools but no copies counted")
		}
		r.checkNoLeak()
	}
}
