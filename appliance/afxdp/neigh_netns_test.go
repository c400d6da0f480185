package afxdp

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// The mirror marks what it writes; Purge (a start after a crash) removes
// exactly that — not an operator's pin, not an entry an operator rewrote
// over a mirrored one, not another interface's.
func TestNeighMirrorMarkAndPurge(t *testing.T) {
	netns.RequireRoot(t)
	ns, peer := netns.New(t, "nmp"), netns.New(t, "nmp")
	netns.Link(t, ns, "m0", peer, "x0")
	netns.Link(t, ns, "m1", peer, "x1")
	for _, ifn := range []string{"m0", "m1"} {
		netns.Run(t, ns, "ip", "link", "set", ifn, "up")
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
		if err := mirror.Set(if0, netip.MustParseAddr(a), mac); err != nil {
			t.Fatal(err)
		}
	}
	if err := mirror.Set(if1, netip.MustParseAddr("198.18.9.5"), mac); err != nil {
		t.Fatal(err)
	}
	out := netns.Run(t, ns, "ip", "neigh", "show", "dev", "m0")
	if !strings.Contains(out, "extern_learn") || !strings.Contains(out, "proto 245") {
		t.Fatalf("mirrored entries carry no mark:\n%s", out)
	}
	// The operator pins one address and rewrites a mirrored one.
	netns.Run(t, ns, "ip", "neigh", "replace", "198.18.9.9", "lladdr", "02:00:00:00:00:09", "dev", "m0", "nud", "permanent")
	netns.Run(t, ns, "ip", "neigh", "replace", "198.18.9.2", "lladdr", "02:00:00:00:00:02", "dev", "m0", "nud", "permanent")
	n, err := mirror.Purge([]int{if0})
	if err != nil {
		t.Fatal(err)
	}
	out = netns.Run(t, ns, "ip", "neigh", "show", "dev", "m0")
	if n != 2 || strings.Contains(out, "198.18.9.1 ") || strings.Contains(out, "2001:db8:9::1 ") ||
		!strings.Contains(out, "198.18.9.9 ") || !strings.Contains(out, "198.18.9.2 ") {
		t.Fatalf("purged %d; left:\n%s", n, out)
	}
	if out := netns.Run(t, ns, "ip", "neigh", "show", "dev", "m1"); !strings.Contains(out, "198.18.9.5 ") {
		t.Fatalf("purge reached another interface:\n%s", out)
	}
}
