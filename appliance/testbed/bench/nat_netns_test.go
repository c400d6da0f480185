package bench

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// A short NAT run: both sides forward with the source translated (ovfwd
// reports its translations; Linux's masquerade rule is in place during its
// run and gone after). It asserts nothing about speed.
func TestFwdNATShort(t *testing.T) {
	nstest.RequireRoot(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatal("needs nft (.ci/install-deps installs nftables)")
	}
	res := measureFwd(t, FwdOptions{Rounds: 1, Duration: time.Second, Warmup: 500 * time.Millisecond, MaxPackets: 5_000_000, NAT: true})
	for _, r := range res.Runs {
		if r.Sent == 0 || r.Forwarded == 0 {
			t.Errorf("%s: sent %d forwarded %d", r.Side, r.Sent, r.Forwarded)
		}
		if r.Side == "ovfwd" && (!strings.Contains(r.Note, "nat translated=") || strings.Contains(r.Note, "nat translated=0]")) {
			t.Errorf("ovfwd side did not translate: %s", r.Note)
		}
	}
}
