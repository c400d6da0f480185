package fwd_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

// TestSetLimits changes the MSS clamp and the ICMP rate of a running
// engine: the next poll follows the new limits, zero fields take the
// defaults, and a poll after the change still allocates nothing.
func TestSetLimits(t *testing.T) {
	r := newRig(t, rigOpt{})
	must(t, r.e.SetNeighbour(0, aV4, macA))
	must(t, r.e.SetNeighbour(1, bV4, macB))
	syn := func() uint16 {
		t.Helper()
		r.inject(0, eth(macR0, macA, 0x0800, ipv4(aV4, bV4, 6, 64, true, tcpSYN(40000, 443, 1460, 0))))
		r.poll()
		_, tcp := checkIPv4(t, parseEth(t, r.drainOne(1)).l3)
		return binary.BigEndian.Uint16(tcp[22:])
	}
	if got := syn(); got != 1460 {
		t.Fatalf("MSS %d with no clamp", got)
	}
	l := r.e.Limits()
	if l.MSSClamp != 0 || l.ICMPRate != 100 || l.NeighReachable != 30*time.Second {
		t.Fatalf("default limits %+v", l)
	}
	l.MSSClamp = 1300
	must(t, r.e.SetLimits(l))
	if got := syn(); got != 1300 {
		t.Fatalf("MSS %d after SetLimits(MSSClamp 1300)", got)
	}

	// ICMP errors off (-1): a TTL-expired packet is dropped without one.
	l.ICMPRate = -1
	must(t, r.e.SetLimits(l))
	r.inject(0, udp4AtoB(1))
	r.poll()
	if n := len(r.drain(0)); n != 0 {
		t.Fatalf("%d ICMP errors with ICMPRate -1", n)
	}
	// Back to zero fields: the defaults, ICMP errors on again.
	must(t, r.e.SetLimits(fwd.Limits{}))
	if got := r.e.Limits(); got.ICMPRate != 100 || got.ICMPBurst != 50 || got.NeighProbes != 3 || got.MSSClamp != 0 {
		t.Fatalf("zero limits became %+v", got)
	}
	r.inject(0, udp4AtoB(1))
	r.poll()
	if n := len(r.drain(0)); n != 1 {
		t.Fatalf("%d ICMP errors with the default rate", n)
	}
	if err := r.e.SetLimits(fwd.Limits{NeighRetrans: -time.Second}); err == nil {
		t.Error("negative NeighRetrans accepted")
	}
	w := r.e.Workers()[0]
	must(t, r.e.SetLimits(fwd.Limits{MSSClamp: 1200}))
	if a := testing.AllocsPerRun(100, func() { w.Poll() }); a != 0 {
		t.Errorf("Poll allocates %v after SetLimits", a)
	}
	r.checkNoLeak()
}
