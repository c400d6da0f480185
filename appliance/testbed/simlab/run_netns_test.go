package simlab

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// ourNamespaces lists the lab namespaces this process still has.
func ourNamespaces(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		for _, tag := range []string{"sima", "simm", "simb"} {
			if strings.HasPrefix(f[0], fmt.Sprintf("%s%s-%d-", netns.Prefix, tag, os.Getpid())) {
				ours = append(ours, f[0])
			}
		}
	}
	return ours
}

// TestRunPrintsCountersAndCleansUp: a short Run forwards traffic through
// the model (pings and TCP transfers succeed, counters show packets),
// closes the models without errors and removes its namespaces.
func TestRunPrintsCountersAndCleansUp(t *testing.T) {
	nstest.RequireRoot(t)
	var out bytes.Buffer
	err := Run(context.Background(), Options{Duration: 4 * time.Second, Out: &out})
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"ping 198.18.31.1: ok", "ping 2001:db8:31::1: ok", "sim0 rx", "closed with no errors and nothing leaked", "removed host A"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(s, "tcp 0 transfers") {
		t.Errorf("no TCP transfer completed in 4 s")
	}
	if left := ourNamespaces(t); len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
}

// TestRunFailureCleansUp: a lab that cannot be built (a host route that
// the kernel refuses) fails and leaves no namespace behind.
func TestRunFailureCleansUp(t *testing.T) {
	nstest.RequireRoot(t)
	cfg := lab.DefaultConfig()
	cfg.HostA.Via = []netip.Addr{netip.MustParseAddr("198.19.99.1")} // not on host A's link
	var out bytes.Buffer
	err := Run(context.Background(), Options{Duration: time.Second, Out: &out, Config: &cfg})
	if err == nil {
		t.Fatalf("Run with an unreachable gateway succeeded:\n%s", out.String())
	}
	if left := ourNamespaces(t); len(left) > 0 {
		t.Errorf("namespaces left behind after %v: %v", err, left)
	}
}
