package vpnload

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// Addresses of the topology (see the package doc).
const (
	clientIP   = "198.18.80.2"
	serverIP0  = "198.18.80.1"
	serverIP1  = "198.18.81.1"
	sinkIP     = "198.18.81.2"
	sinkNet    = "198.18.82.0/24"
	sinkDst    = "198.18.82.1"
	poolNet    = "198.18.84.0"
	poolMask   = "255.255.252.0"
	poolPrefix = "198.18.84.0/22" // 1,021 clients
	vpnPort    = 1194
)

// topology is the three namespaces and their links.
type topology struct {
	cli, srv, sink *netns.NS
	// sinkCount counts and drops the traffic to sinkNet at sk0's XDP hook.
	// With the kernel's own receive path (IP receive, a route lookup to
	// the blackhole) the sink's work ran in the transmitting server's
	// system calls over the veth and was charged to the server under test
	// (docs/benchmarks.md); the sink still answers pings and ARP.
	sinkCount *afxdp.DropCounter
}

func buildTopology() (t *topology, err error) {
	t = &topology{}
	defer func() {
		if err != nil {
			t.destroy()
		}
	}()
	for _, p := range []**netns.NS{&t.cli, &t.srv, &t.sink} {
		if *p, err = netns.Create("h15l"); err != nil {
			return t, err
		}
	}
	if err = netns.Veth(t.cli, "lc0", t.srv, "p0"); err != nil {
		return t, err
	}
	if err = netns.Veth(t.srv, "p1", t.sink, "sk0"); err != nil {
		return t, err
	}
	steps := []struct {
		ns   *netns.NS
		args []string
	}{
		{t.cli, []string{"ip", "addr", "add", clientIP + "/24", "dev", "lc0"}},
		{t.sink, []string{"ip", "addr", "add", sinkIP + "/24", "dev", "sk0"}},
		{t.sink, []string{"ip", "route", "add", "blackhole", sinkNet}},
		{t.sink, []string{"sysctl", "-qw", "net.ipv4.ip_forward=1"}},
		// The sink answers pings from the tunnel pool through the server.
		{t.sink, []string{"ip", "route", "add", poolPrefix, "via", serverIP1}},
	}
	for _, s := range steps {
		if _, err = s.ns.Run(s.args...); err != nil {
			return t, err
		}
	}
	err = t.sink.Do(func() error {
		c, err := afxdp.NewDropCounterFor(netip.MustParsePrefix(sinkNet))
		if err != nil {
			return err
		}
		ifi, err := net.InterfaceByName("sk0")
		if err == nil {
			_, err = c.Attach(ifi.Index, afxdp.ModeNative)
		}
		if err != nil {
			c.Close()
			return fmt.Errorf("vpnload: sink counter on sk0: %w", err)
		}
		t.sinkCount = c
		return nil
	})
	return t, err
}

func (t *topology) destroy() {
	if t.sinkCount != nil {
		t.sinkCount.Close()
		t.sinkCount = nil
	}
	for _, ns := range []*netns.NS{t.cli, t.srv, t.sink} {
		if ns != nil {
			ns.Delete()
		}
	}
}

// kernelRouting gives the server namespace's kernel the addresses and
// routes openvpn needs; off removes them so ovfwd owns the ports again.
func (t *topology) kernelRouting(on bool) error {
	if !on {
		for _, dev := range []string{"p0", "p1"} {
			if _, err := t.srv.Run("ip", "addr", "flush", "dev", dev); err != nil {
				return err
			}
		}
		_, err := t.srv.Run("sysctl", "-qw", "net.ipv4.ip_forward=0")
		return err
	}
	for _, args := range [][]string{
		{"ip", "addr", "replace", serverIP0 + "/24", "dev", "p0"},
		{"ip", "addr", "replace", serverIP1 + "/24", "dev", "p1"},
		{"ip", "route", "replace", sinkNet, "via", sinkIP},
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
	} {
		if _, err := t.srv.Run(args...); err != nil {
			return err
		}
	}
	return nil
}

// sinkPackets is how many packets to sinkNet reached sk0.
func (t *topology) sinkPackets() (uint64, error) {
	n, _, err := t.sinkCount.Count()
	return n, err
}

// ingressOnServer moves the server port p0's receive work from the
// generator's CPU, where the veth runs it in the sender's softirq, to cpu,
// the server's, as bench fwd does by default: the NAPI poll as a thread
// pinned there when p0 has a native XDP program (ovfwd), RPS otherwise
// (openvpn: IP and UDP receive). It returns the NAPI thread (0 with
// RPS: the softirq runs in whatever task is current, mostly the server)
// and the undo.
func (t *topology) ingressOnServer(target string, cpu int) (int, func(), error) {
	if target == TargetOpenVPN {
		rps := "/sys/class/net/p0/queues/rx-0/rps_cpus"
		if err := t.srvWrite(rps, fmt.Sprintf("%x", 1<<cpu)); err != nil {
			return 0, nil, err
		}
		return 0, func() { _ = t.srvWrite(rps, "0") }, nil
	}
	// Other tests may have a threaded "p0" of their own: ours is the
	// napi/p0-* thread that appears when p0 becomes threaded.
	before := napiThreads("p0")
	if err := t.srvWrite("/sys/class/net/p0/threaded", "1"); err != nil {
		return 0, nil, err
	}
	undo := func() { _ = t.srvWrite("/sys/class/net/p0/threaded", "0") }
	var ours []int
	for i := 0; i < 100 && len(ours) == 0; i++ {
		for _, pid := range napiThreads("p0") {
			if !slices.Contains(before, pid) {
				ours = append(ours, pid)
			}
		}
		if len(ours) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if len(ours) != 1 {
		undo()
		return 0, nil, fmt.Errorf("vpnload: threaded NAPI of p0: %d new napi/p0-* threads, want 1", len(ours))
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(ours[0], &set); err != nil {
		undo()
		return 0, nil, fmt.Errorf("vpnload: pin napi/p0 thread %d to CPU %d: %w", ours[0], cpu, err)
	}
	return ours[0], undo, nil
}

// srvWrite writes value to path as seen from the server namespace (its
// own /sys).
func (t *topology) srvWrite(path, value string) error {
	_, err := t.srv.Run("sh", "-c", fmt.Sprintf("echo %s > %s", value, path))
	return err
}

// napiThreads lists the threaded-NAPI kernel threads of devices named
// ifname, in any namespace (kernel threads are visible from all).
func napiThreads(ifname string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !strings.HasPrefix(string(b), "napi/"+ifname+"-") {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
