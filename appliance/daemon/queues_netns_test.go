package daemon_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

const twoQueueConfig = `
[appliance]
workers = [0, 1]
poll = "busy"

[[port]]
name = "p0"
ifname = "p0"
queues = 2
addresses = ["198.18.54.254/24"]

[[port]]
name = "p1"
ifname = "p1"
queues = 2
addresses = ["198.18.55.254/24"]

[metrics]
listen = ""

[status]
socket = "%s"
`

// TestDaemonTwoQueues: one worker per queue, each on its own pinned thread.
func TestDaemonTwoQueues(t *testing.T) {
	nstest.RequireRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	bin := nstest.BuildOvfwd(t)
	a, app, b := nstest.New(t, "dmq"), nstest.New(t, "dmq"), nstest.New(t, "dmq")
	veth2 := func(x *netns.NS, ifx string, y *netns.NS, ify string) {
		nstest.Run(t, x, "ip", "link", "add", ifx, "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
			"peer", "name", ify, "numtxqueues", "2", "numrxqueues", "2")
		nstest.Run(t, x, "ip", "link", "set", ify, "netns", y.Name)
		nstest.Run(t, x, "ip", "link", "set", ifx, "up")
		nstest.Run(t, y, "ip", "link", "set", ify, "up")
	}
	veth2(a, "a0", app, "p0")
	veth2(app, "p1", b, "b0")
	nstest.Run(t, a, "ip", "addr", "add", "198.18.54.1/24", "dev", "a0")
	nstest.Run(t, a, "ip", "route", "add", "default", "via", "198.18.54.254")
	nstest.Run(t, b, "ip", "addr", "add", "198.18.55.1/24", "dev", "b0")
	nstest.Run(t, b, "ip", "route", "add", "default", "via", "198.18.55.254")

	dir := unitDir(t)
	sock := filepath.Join(dir, "run", "ovfwd.sock")
	cfgPath := filepath.Join(dir, "ovfwd.toml")
	writeConfig(t, cfgPath, fmt.Sprintf(twoQueueConfig, sock))
	cmd, exited, _ := startUnit(t, app, bin, cfgPath)
	s := waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ready && len(s.Ports) == 2 })
	if len(s.Workers) != 2 || s.Workers[0].CPU != 0 || s.Workers[1].CPU != 1 {
		t.Errorf("workers %+v, want queue 0 on cpu 0 and queue 1 on cpu 1", s.Workers)
	}
	for _, p := range s.Ports {
		if len(p.Queues) != 2 {
			t.Errorf("port %s has queues %v, want 2", p.Name, p.Queues)
		}
	}
	// The kernel agrees: two threads of the process are pinned, one to
	// each CPU.
	pinned := map[string]int{}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", cmd.Process.Pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				pinned[strings.TrimSpace(v)]++
			}
		}
	}
	if pinned["0"] != 1 || pinned["1"] != 1 {
		t.Errorf("threads by allowed CPUs: %v, want one pinned to 0 and one to 1", pinned)
	}

	ping(t, a, "198.18.55.1")
	r, err := lab.TCPTransfer(context.Background(), a, b, netip.MustParseAddr("198.18.55.1"), 16<<20, 60*time.Second)
	if err != nil || !r.OK(16<<20) {
		t.Fatalf("TCP through two queues: %d bytes, %v", r.Bytes, err)
	}
	s = waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ports[1].Tx.Packets > 10000 })
	t.Logf("16 MiB in %v; p0 rx %d packets", r.Elapsed.Round(time.Millisecond), s.Ports[0].Rx.Packets)
}
