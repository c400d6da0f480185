package daemon_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// hostileConfig uses only keys every release of the daemon knows, so the
// same probe measures an older binary (OVFWD_BIN) and the new one.
const hostileConfig = `
[appliance]
mode = "router"

[[port]]
name = "p0"
driver = "afxdp-copy"
ifname = "p0"
addresses = ["198.18.64.254/24", "2001:db8:64::fe/64"]

[[port]]
name = "p1"
driver = "afxdp-copy"
ifname = "p1"
addresses = ["198.18.65.254/24", "2001:db8:65::fe/64"]

[netlink]
neighbours = true

[metrics]
listen = ""

[status]
socket = "%s"

[log]
level = "info"
`

// firstPing reports how long the first answered ping to addr from ns took,
// trying up to 5 times (a failed try costs its 1 s timeout).
func firstPing(ns *netns.NS, addr string) (time.Duration, bool) {
	start := time.Now()
	for range 5 {
		if _, err := ns.Run("ping", "-c", "1", "-W", "1", addr); err == nil {
			return time.Since(start), true
		}
	}
	return time.Since(start), false
}

// TestHostileNeighbours probes a LAN neighbour that lies (gleaning,
// claims, floods, pins), run the same way against an older binary (OVFWD_BIN=…) for the before figures: it
// logs FIGURE lines and fails on each item the binary gets wrong.
func TestHostileNeighbours(t *testing.T) {
	nstest.RequireRoot(t)
	bin := nstest.BuildOvfwd(t)
	h := newHostileLAN(t, "hst")
	nstest.Run(t, h.a, "ip", "route", "add", "default", "via", "198.18.64.254")
	nstest.Run(t, h.a, "ip", "-6", "route", "add", "default", "via", "2001:db8:64::fe")
	dir := unitDir(t)
	sock := filepath.Join(dir, "run", "ovfwd.sock")
	cfgPath := filepath.Join(dir, "ovfwd.toml")
	writeConfig(t, cfgPath, fmt.Sprintf(hostileConfig, sock))
	cmd, exited, log := startUnit(t, h.app, bin, cfgPath)
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ready && len(s.Ports) == 2 })
	ping(t, h.a, "198.18.65.1")
	ping(t, h.a, "2001:db8:65::1")
	x := openRaw(t, h.x, "x0")
	rng := rand.New(rand.NewPCG(13, 2))
	lan4 := netip.MustParsePrefix("198.18.65.0/24")
	lan6 := netip.MustParsePrefix("2001:db8:65::/64")
	bIP := netip.MustParseAddr("198.18.65.1")
	rss0 := rssKB(t, cmd.Process.Pid)

	// Item 2: 200 gratuitous ARPs for B with rotating MACs (~15 ms), then
	// 2000 for random LAN addresses.
	for i := range 200 {
		x.send(garp(uint16(1+i%2), rndMAC(rng), bIP))
		if i%14 == 13 {
			time.Sleep(time.Millisecond)
		}
	}
	for i := range 2000 {
		claim := randIn(rng, lan4)
		if claim == netip.MustParseAddr("198.18.65.254") {
			continue // the router's own address poisons the hosts' kernels, not ovfwd
		}
		x.send(garp(uint16(1+i%2), rndMAC(rng), claim))
	}
	time.Sleep(2 * time.Second)
	s := waitStatus(t, sock, exited, func(*status.Snapshot) bool { return true })
	kpins, _ := kernelPermanent(t, h.app)
	_, err := h.a.Run("ping", "-c", "3", "-i", "0.2", "-w", "10", "198.18.65.1") // 3 replies, however late
	t.Logf("FIGURE item 2: after 200 rotating-MAC GARPs for B and 2000 for random LAN addresses: pinned in the engine %d, operator-like permanent kernel entries %d, B reachable %v",
		s.Engine["neighbours_pinned"], kpins, err == nil)
	t.Logf("FIGURE item 8: log lines after the ARP storm: %d (%d \"neighbour pinned\")", strings.Count(log.String(), "\n"), strings.Count(log.String(), "neighbour pinned"))
	if s.Engine["neighbours_pinned"] != 0 || kpins != 0 || err != nil {
		t.Errorf("item 2: ARP storm pinned %d (kernel %d); B reachable: %v", s.Engine["neighbours_pinned"], kpins, err)
	}

	// Item 4: 20,000 unsolicited NAs for random on-link targets.
	for range 20000 {
		x.send(na(rndMAC(rng), randIn(rng, lan6)))
	}
	time.Sleep(2 * time.Second)
	s = waitStatus(t, sock, exited, func(*status.Snapshot) bool { return true })
	_, kmirr := kernelPermanent(t, h.app)
	kall := strings.Count(nstest.Run(t, h.app, "ip", "neigh", "show", "nud", "permanent"), "\n")
	t.Logf("FIGURE item 4: after 20,000 unsolicited NAs with random targets: engine entries %d, kernel permanent entries %d (%d marked as ovfwd's), RSS %d → %d KiB",
		s.Neighbours, kall, kmirr, rss0, rssKB(t, cmd.Process.Pid))
	if s.Neighbours > 100 {
		t.Errorf("item 4: %d neighbour entries after an NA storm", s.Neighbours)
	}

	// Item 5: a glean flood (X to random addresses of both connected /64s)
	// while a new host joins the LAN; A must reach it within 1 s.
	stop := make(chan struct{})
	flooded := make(chan int)
	go func() {
		frng := rand.New(rand.NewPCG(5, 5))
		xs := netip.MustParseAddr("2001:db8:65::66")
		n := 0
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			select {
			case <-stop:
				flooded <- n
				return
			default:
			}
			for range 64 {
				dst := randIn(frng, lan6)
				if n%2 == 0 {
					dst = randIn(frng, netip.MustParsePrefix("2001:db8:64::/64"))
				}
				x.send(udp6(h.appMAC, h.xMAC, xs, dst, 4000, 9, []byte("glean")))
				n++
			}
		}
		flooded <- n
	}()
	time.Sleep(time.Second)
	nh := h.addHost(t, "198.18.65.50", "2001:db8:65::50")
	_ = nh
	d4, ok4 := firstPing(h.a, "198.18.65.50")
	d6, ok6 := firstPing(h.a, "2001:db8:65::50")
	close(stop)
	n := <-flooded
	s = waitStatus(t, sock, exited, func(*status.Snapshot) bool { return true })
	t.Logf("FIGURE item 5: new host during a glean flood (%d packets): first IPv4 ping answered after %v (%v), IPv6 after %v (%v); drops neighbour_full %d, glean_limited %d",
		n, d4.Round(time.Millisecond), ok4, d6.Round(time.Millisecond), ok6, s.Drops["neighbour_full"], s.Drops["glean_limited"])
	if !ok4 || !ok6 || d4 >= time.Second || d6 >= time.Second {
		t.Errorf("item 5: a new host did not resolve within 1 s during a glean flood (v4 %v %v, v6 %v %v)", d4, ok4, d6, ok6)
	}

	// Item 3: SIGKILL, then start again: nothing the first run mirrored
	// may come back as an operator pin.
	perm := nstest.Run(t, h.app, "ip", "neigh", "show", "nud", "permanent") // one read for both counts
	allBefore, before := strings.Count(perm, "\n"), strings.Count(perm, "extern_learn")
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	<-exited
	_, exited2, _ := startUnit(t, h.app, bin, cfgPath)
	s = waitStatus(t, sock, exited2, func(s *status.Snapshot) bool { return s.Ready && len(s.Ports) == 2 })
	time.Sleep(time.Second)
	s = waitStatus(t, sock, exited2, func(*status.Snapshot) bool { return true })
	stale := strings.Count(nstest.Run(t, h.app, "ip", "neigh", "show", "nud", "permanent"), "\n")
	t.Logf("FIGURE item 3: SIGKILL with %d permanent kernel entries (%d marked); after the restart: pinned as operator's %d, permanent kernel entries %d",
		allBefore, before, s.Engine["neighbours_pinned"], stale)
	if s.Engine["neighbours_pinned"] != 0 {
		t.Errorf("item 3: the restart adopted %d stale entries as pins", s.Engine["neighbours_pinned"])
	}
	ping(t, h.a, "198.18.65.1")
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
