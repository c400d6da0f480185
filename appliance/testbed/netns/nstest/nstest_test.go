package nstest

import (
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

func TestVethPing(t *testing.T) {
	a, b := New(t, "nsa"), New(t, "nsb")
	Link(t, a, "va", b, "vb")
	Run(t, a, "ip", "addr", "add", "198.18.0.1/24", "dev", "va")
	Run(t, b, "ip", "addr", "add", "198.18.0.2/24", "dev", "vb")
	out := Run(t, a, "ping", "-c", "1", "-W", "2", "198.18.0.2")
	if !strings.Contains(out, "1 received") {
		t.Fatalf("ping: %s", out)
	}
}

func TestDeleteRemoves(t *testing.T) {
	RequireRoot(t)
	ns, err := netns.Create("del")
	if err != nil {
		t.Fatal(err)
	}
	ns.Delete()
	if _, err := ns.Run("true"); err == nil {
		t.Fatalf("namespace %s still usable after Delete", ns.Name)
	}
}
