package nlsync

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// The mirror marks what it writes; Purge (a start after a crash) removes
// exactly that — not an operator's pin, not an entry an operator rewrote
// over a mirrored one, not another interface's.
func TestNeighMirrorMarkAndPurge(t *testing.T) {
	nstest.RequireRoot(t)
	ns, peer := nstest.New(t, "nmp"), nstest.New(t, "nmp")
	nstest.Link(t, ns, "m0", peer, "x0")
	nstest.Link(t, ns, "m1", peer, "x1")
	for _, ifn := range []string{"m0", "m1"} {
		nstest.Run(t, ns, "ip", "link", "set", ifn, "up")
	}
	var mirror *NeighMirror
	var if0, if1 int
	if err := ns.Do(func() (err error) {
		mirror, err = NewNeighMirror()
		if err != nil {
			return err
		}
		i0, err := net.InterfaceByName("m0")
		if err != nil {
			return err
		}
		i1, err := net.InterfaceByName("m1")
		if err != nil {
			return err
		}
		if0, if1 = i0.Index, i1.Index
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	defer mirror.Close()
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, a := range []string{"198.18.9.1", "198.18.9.2", "2001:db8:9::1"} {
		if err := mirror.Set(if0, netip.MustParseAddr(a), mac, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := mirror.Set(if1, netip.MustParseAddr("198.18.9.5"), mac, true); err != nil {
		t.Fatal(err)
	}
	out := nstest.Run(t, ns, "ip", "neigh", "show", "dev", "m0")
	if !strings.Contains(out, "extern_learn") || !strings.Contains(out, "proto 245") {
		t.Fatalf("mirrored entries carry no mark:\n%s", out)
	}
	// The operator pins one address and rewrites a mirrored one.
	nstest.Run(t, ns, "ip", "neigh", "replace", "198.18.9.9", "lladdr", "02:00:00:00:00:09", "dev", "m0", "nud", "permanent")
	nstest.Run(t, ns, "ip", "neigh", "replace", "198.18.9.2", "lladdr", "02:00:00:00:00:02", "dev", "m0", "nud", "permanent")
	n, err := mirror.Purge([]int{if0})
	if err != nil {
		t.Fatal(err)
	}
	out = nstest.Run(t, ns, "ip", "neigh", "show", "dev", "m0")
	if n != 2 || strings.Contains(out, "198.18.9.1 ") || strings.Contains(out, "2001:db8:9::1 ") ||
		!strings.Contains(out, "198.18.9.9 ") || !strings.Contains(out, "198.18.9.2 ") {
		t.Fatalf("purged %d; left:\n%s", n, out)
	}
	if out := nstest.Run(t, ns, "ip", "neigh", "show", "dev", "m1"); !strings.Contains(out, "198.18.9.5 ") {
		t.Fatalf("purge reached another interface:\n%s", out)
	}
}

// An unconfirmed entry is written as the kernel would make it from a
// solicitation: STALE, ours by protocol only, not extern_learn (so the
// kernel's garbage collection bounds such entries); its confirmation
// makes it permanent.
func TestNeighMirrorUnconfirmed(t *testing.T) {
	nstest.RequireRoot(t)
	ns, peer := nstest.New(t, "nmu"), nstest.New(t, "nmu")
	nstest.Link(t, ns, "m0", peer, "x0")
	nstest.Run(t, ns, "ip", "link", "set", "m0", "up")
	var mirror *NeighMirror
	var ifindex int
	if err := ns.Do(func() (err error) {
		if mirror, err = NewNeighMirror(); err != nil {
			return err
		}
		ifi, err := net.InterfaceByName("m0")
		if err == nil {
			ifindex = ifi.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer mirror.Close()
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, a := range []string{"198.18.9.1", "2001:db8:9::1"} {
		ip := netip.MustParseAddr(a)
		if err := mirror.Set(ifindex, ip, mac, false); err != nil {
			t.Fatal(err)
		}
		out := nstest.Run(t, ns, "ip", "neigh", "show", a, "dev", "m0")
		if !strings.Contains(out, "lladdr 02:00:00:00:00:01") || !strings.Contains(out, "STALE") ||
			!strings.Contains(out, "proto 245") || strings.Contains(out, "extern_learn") || strings.Contains(out, "PERMANENT") {
			t.Fatalf("unconfirmed %s written as:\n%s", a, out)
		}
		if err := mirror.Set(ifindex, ip, mac, true); err != nil {
			t.Fatal(err)
		}
		if out := nstest.Run(t, ns, "ip", "neigh", "show", a, "dev", "m0"); !strings.Contains(out, "extern_learn PERMANENT proto 245") {
			t.Fatalf("confirmed %s written as:\n%s", a, out)
		}
	}
}

// The daemon writes every neighbour a storm makes through the mirror, up
// to 2,000 a second: a write and its ack allocate nothing (they allocated
// about 170 bytes each, a fifth of the daemon's garbage in the hostile-LAN
// soak).
func TestNeighMirrorNoGarbage(t *testing.T) {
	nstest.RequireRoot(t)
	ns, peer := nstest.New(t, "nmg"), nstest.New(t, "nmg")
	nstest.Link(t, ns, "m0", peer, "x0")
	nstest.Run(t, ns, "ip", "link", "set", "m0", "up")
	var mirror *NeighMirror
	var ifindex int
	if err := ns.Do(func() (err error) {
		if mirror, err = NewNeighMirror(); err != nil {
			return err
		}
		ifi, err := net.InterfaceByName("m0")
		if err == nil {
			ifindex = ifi.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer mirror.Close()
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	v4, v6 := netip.MustParseAddr("198.18.9.1"), netip.MustParseAddr("2001:db8:9::1")
	var err error
	allocs := testing.AllocsPerRun(200, func() {
		for _, a := range []netip.Addr{v4, v6} {
			if e := mirror.Set(ifindex, a, mac, true); e != nil {
				err = e
			}
			if e := mirror.Delete(ifindex, a); e != nil {
				err = e
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per two writes and two deletes", allocs)
	}
	if err := mirror.Set(ifindex, v6, mac, true); err != nil {
		t.Fatal(err)
	}
	if out := nstest.Run(t, ns, "ip", "neigh", "show", "dev", "m0"); !strings.Contains(out, "2001:db8:9::1 lladdr 02:00:00:00:00:01 extern_learn PERMANENT proto 245") {
		t.Errorf("the mirror wrote:\n%s", out)
	}
}
