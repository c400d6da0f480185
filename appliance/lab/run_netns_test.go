package lab

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/appliance/netns"
)

// lab.Run with a short duration forwards (pings answered, UDP and TCP
// through), prints counters, and leaves no namespace behind (veths and
// XDP programs go with them).
func TestRunShortLeavesNothing(t *testing.T) {
	netns.RequireRoot(t)
	var ids []uint32
	testHookStarted = func(a *Appliance) {
		for _, p := range a.Ports {
			id, err := p.ProgramID()
			if err != nil {
				t.Error(err)
			}
			ids = append(ids, id)
		}
	}
	defer func() { testHookStarted = nil }()
	var out bytes.Buffer
	if err := Run(context.Background(), Options{Duration: 4 * time.Second, Out: &out}); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	s := out.String()
	t.Log(s)
	for _, want := range []string{"ping 198.18.31.1: ok", "ping 2001:db8:31::1: ok", "drops:", "lab: removed"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(s, " 0 received;") || strings.Contains(s, "udp 0 sent") {
		t.Errorf("UDP flow did not get through")
	}
	if len(ids) != 2 {
		t.Fatalf("saw %d steering programs, want 2", len(ids))
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, id := range ids {
		for afxdp.ProgramExists(id) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if afxdp.ProgramExists(id) {
			t.Errorf("XDP program %d still loaded after Run", id)
		}
	}
	list, _ := exec.Command("ip", "netns", "list").Output()
	for _, tag := range []string{"laba", "labm", "labb"} {
		if strings.Contains(string(list), netns.Prefix+tag+"-") && strings.Contains(string(list), pidTag()) {
			t.Errorf("namespace %s left behind:\n%s", tag, list)
		}
	}
}

func pidTag() string    { return "-" + itoa(os.Getpid()) + "-" }
func itoa(n int) string { return strconv.Itoa(n) }
