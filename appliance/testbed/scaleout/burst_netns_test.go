package scaleout

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// burstRoutes is the size of the feed: a full-table-sized burst, as the
// issue asks (the Internet's IPv4 table is ~1 M; 100 k is what an
// appliance behind a route-reflector with a partial table sees).
const burstRoutes = 100_000

// TestScaleOutRouteBurst feeds 100 k routes by BGP into appliance a while
// a client of a pings the LAN host 100 times a second through it: the
// routes reach ovfwd's FIB through BIRD, the kernel's main table and the
// netlink mirror; the time until the FIB holds them all, ovfwd's memory,
// and the pings lost meanwhile are reported. No ping may be lost.
func TestScaleOutRouteBurst(t *testing.T) {
	l, _ := newLab(t, 1, burstRoutes)
	a := l.Apps[0]
	c, err := l.StartClient(0, a)
	if err != nil {
		t.Fatal(err)
	}
	waitClients(t, l, []*Client{c}, 30*time.Second, nil)
	st, err := a.Status()
	if err != nil {
		t.Fatal(err)
	}
	base := st.Routes.Kernel
	rss0 := rssKiB(a.ovfwd.PID())

	// 100 pings a second through a until the feed is loaded and gone.
	pinger, err := l.start(l.Clients[0], filepath.Join(l.Dir, "ping.log"), "ping", "-n", "-i", "0.01", "-W", "1", LANHost.String())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	start := time.Now()
	if out, err := l.Birdc("enable", "bulk"); err != nil {
		t.Fatalf("birdc enable bulk: %v\n%s", err, out)
	}
	var kernel int
	var inBird time.Duration
	loaded := waitFor(60*time.Second, 100*time.Millisecond, func() bool {
		if inBird == 0 && a.BirdRoutes() >= burstRoutes {
			inBird = time.Since(start)
		}
		if st, err := a.Status(); err == nil {
			kernel = st.Routes.Kernel
		}
		return kernel >= base+burstRoutes
	})
	took := time.Since(start)
	if !loaded {
		t.Fatalf("ovfwd's FIB holds %d of %d kernel routes 60 s after the feed began:\n%s", kernel-base, burstRoutes, a.ovfwd.Tail(3000))
	}
	rss1 := rssKiB(a.ovfwd.PID())
	start = time.Now()
	if out, err := l.Birdc("disable", "bulk"); err != nil {
		t.Fatalf("birdc disable bulk: %v\n%s", err, out)
	}
	if !waitFor(60*time.Second, 100*time.Millisecond, func() bool {
		st, err := a.Status()
		return err == nil && st.Routes.Kernel == base
	}) {
		t.Fatalf("the FIB still holds the feed 60 s after its withdrawal")
	}
	gone := time.Since(start)
	time.Sleep(time.Second)
	pinger.Stop(syscallSIGINT, 3*time.Second)
	out := pinger.Tail(2000)
	recv, lost := pingGaps(pinger.Log)
	resub := strings.Count(a.OvfwdLog(), "netlink subscription lost")
	birdTook := "? (birdc busy)"
	if inBird > 0 {
		birdTook = inBird.Round(time.Millisecond).String()
	}
	t.Logf("%d routes by BGP: in a's BIRD after %s, in ovfwd's FIB %v after the announcement, gone %v after the withdrawal; ovfwd RSS %d → %d MiB; pings through a during both: %d answered, %d lost; netlink resubscriptions: %d",
		burstRoutes, birdTook, took.Round(time.Millisecond), gone.Round(time.Millisecond), rss0/1024, rss1/1024, recv, lost, resub)
	if recv == 0 || lost != 0 {
		for _, line := range strings.Split(a.OvfwdLog(), "\n") {
			if strings.Contains(line, "WARN") || strings.Contains(line, "ERROR") {
				t.Log(line)
			}
		}
		t.Errorf("forwarding disturbed by the feed: %d pings lost, %d answered\n%s", lost, recv, out)
	}
}

// rssKiB is a process's resident set size.
func rssKiB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kib int
			fmt.Sscan(rest, &kib)
			return kib
		}
	}
	return 0
}

// pingGaps reads a ping log (one line per reply): how many were
// answered, and how many sequence numbers below the last answered one
// never were. Requests still in flight when ping was stopped are not
// counted as lost: on a loaded machine a reply can take over a second.
func pingGaps(log string) (answered, lost int) {
	b, _ := os.ReadFile(log)
	seen := map[int]bool{}
	last := 0
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.Index(line, "icmp_seq=")
		if i < 0 || !strings.Contains(line, "bytes from") {
			continue
		}
		var seq int
		if _, err := fmt.Sscanf(line[i:], "icmp_seq=%d", &seq); err == nil {
			seen[seq] = true
			last = max(last, seq)
		}
	}
	for s := 1; s <= last; s++ {
		if !seen[s] {
			lost++
		}
	}
	return len(seen), lost
}

const syscallSIGINT = syscall.SIGINT
