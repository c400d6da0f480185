package nlsync

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/fwd"
)

// countSink counts what is mirrored; safe for Sync's goroutines.
type countSink struct {
	mu        sync.Mutex
	routes    map[netip.Prefix]fwd.NextHop
	withdrawn map[netip.Prefix]int
	stall     atomic.Bool // the next KernelRoute blocks the reader a while
}

func (c *countSink) KernelRoute(p netip.Prefix, nh fwd.NextHop, ok bool) {
	if c.stall.CompareAndSwap(true, false) {
		time.Sleep(time.Second) // a slow consumer: the socket overflows meanwhile
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.routes[p] = nh
	} else {
		delete(c.routes, p)
		if c.withdrawn != nil {
			c.withdrawn[p]++
		}
	}
}
func (c *countSink) KernelNeighbour(int, netip.Addr, net.HardwareAddr) {}
func (c *countSink) Link(int, bool)                                    {}
func (c *countSink) Address(int, netip.Prefix, bool)                   {}

func (c *countSink) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.routes)
}

// A route burst that overflows the subscription's socket (ENOBUFS) costs
// a resubscription, and the FIB still ends up with exactly the kernel's
// routes, without withdrawing meanwhile the routes the kernel kept (the
// connected subnet here; a default route in production); the renewed
// subscription lives in the right namespace.
func TestRouteBurstOverflowRecovers(t *testing.T) {
	ns := nstest.New(t, "nls")
	peer := nstest.New(t, "nls")
	nstest.Link(t, ns, "p0", peer, "x0")
	nstest.Run(t, ns, "ip", "addr", "add", "198.18.57.254/24", "dev", "p0")
	old := routeRcvBuf
	routeRcvBuf = 4096 // the kernel's minimum-ish: any burst overflows it
	t.Cleanup(func() { routeRcvBuf = old })

	var logs strings.Builder
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), nil))
	sink := &countSink{routes: map[netip.Prefix]fwd.NextHop{}, withdrawn: map[netip.Prefix]int{}}
	var s *Sync
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName("p0")
		if err != nil {
			return err
		}
		s, err = Start(Options{Routes: true, Table: 254, Ports: map[int]int{ifi.Index: 0}, Logger: logger}, sink)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const n = 5000
	var batch strings.Builder
	for i := range n {
		fmt.Fprintf(&batch, "route add 198.19.%d.%d/32 via 198.18.57.1\n", i/250, i%250)
	}
	path := filepath.Join(t.TempDir(), "routes")
	if err := os.WriteFile(path, []byte(batch.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	sink.stall.Store(true)
	start := time.Now()
	nstest.Run(t, ns, "ip", "-batch", path)
	want := n + 1 // and the connected 198.18.57.0/24
	deadline := time.Now().Add(20 * time.Second)
	for sink.count() != want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	logMu.Lock()
	lost := strings.Contains(logs.String(), "subscribing again")
	logMu.Unlock()
	if got := sink.count(); got != want {
		t.Fatalf("mirrored %d routes, want %d (resubscribed: %v)", got, want, lost)
	}
	t.Logf("%d routes mirrored %v after the batch started (1 s consumer stall and a resubscription included)", n, time.Since(start).Round(time.Millisecond))
	if !lost {
		t.Error("the burst did not overflow the socket; the recovery path was not exercised")
	}
	sink.mu.Lock()
	if n := sink.withdrawn[netip.MustParsePrefix("198.18.57.0/24")]; n != 0 {
		t.Errorf("the connected route, present throughout, was withdrawn %d times during the resubscription", n)
	}
	sink.mu.Unlock()
	// The renewed subscription still follows the namespace's changes.
	nstest.Run(t, ns, "ip", "route", "del", "198.19.0.1/32")
	deadline = time.Now().Add(5 * time.Second)
	for sink.count() != want-1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := sink.count(); got != want-1 {
		t.Fatalf("after a delete: %d routes, want %d", got, want-1)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// neighSink counts neighbour reports and keeps the pins.
type neighSink struct {
	countSink
	reports atomic.Int64
	pmu     sync.Mutex
	pins    map[netip.Addr]string
}

func (c *neighSink) KernelNeighbour(_ int, ip netip.Addr, mac net.HardwareAddr) {
	c.reports.Add(1)
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if mac != nil {
		c.pins[ip] = mac.String()
	} else {
		delete(c.pins, ip)
	}
}

func (c *neighSink) pin(ip netip.Addr) string {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.pins[ip]
}

// Every entry the kernel mirror writes comes back to the neighbour
// subscription, so its cost per message is paid at the mirror's full rate
// in a neighbour storm: it must not allocate per message (netlink's
// NeighSubscribe allocated 64 KiB per message, about 100 MiB/s of garbage
// in the soak). An operator's pin still arrives, and a mirrored entry
// (extern_learn, the mirror's flag) is no pin.
func TestNeighbourEchoesMakeNoGarbage(t *testing.T) {
	ns := nstest.New(t, "nln")
	peer := nstest.New(t, "nln")
	nstest.Link(t, ns, "p0", peer, "x0")
	nstest.Run(t, ns, "ip", "addr", "add", "198.18.58.254/24", "dev", "p0")
	sink := &neighSink{pins: map[netip.Addr]string{}}
	var s *Sync
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName("p0")
		if err != nil {
			return err
		}
		s, err = Start(Options{Neighbours: true, Ports: map[int]int{ifi.Index: 0}}, sink)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (%d reports)", what, sink.reports.Load())
			}
		}
	}
	op := netip.MustParseAddr("198.18.58.7")
	nstest.Run(t, ns, "ip", "neigh", "replace", op.String(), "lladdr", "02:00:00:00:00:07", "nud", "permanent", "dev", "p0")
	wait("the operator's pin", func() bool { return sink.pin(op) == "02:00:00:00:00:07" })

	// 1,000 mirror-like writes and their deletes, in batches of 200 as the
	// daemon's mirror writes them (at most 100 a pass, coalesced): one
	// burst of 2,000 could overflow the socket on a loaded machine and
	// cost a resubscription, and the test would count the replay instead.
	const n, batchN = 2000, 200
	var paths []string
	for b := range n / batchN {
		var batch strings.Builder
		for i := b * batchN / 2; i < (b+1)*batchN/2; i++ {
			fmt.Fprintf(&batch, "neigh replace 198.18.58.%d lladdr 02:00:00:00:%02x:%02x nud permanent extern_learn dev p0\n", 10+i%200, i>>8, i&0xff)
			fmt.Fprintf(&batch, "neigh del 198.18.58.%d dev p0\n", 10+i%200)
		}
		paths = append(paths, filepath.Join(t.TempDir(), "neigh"))
		if err := os.WriteFile(paths[b], []byte(batch.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := sink.reports.Load()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for b, path := range paths {
		nstest.Run(t, ns, "ip", "-batch", path) // its exec's allocations count too: ~2 KiB a batch
		// Until this batch's echoes are in, or stop coming (a
		// resubscription replays the table instead), within 5 s.
		want := before + int64((b+1)*batchN)
		last, still := sink.reports.Load(), 0
		for deadline := time.Now().Add(5 * time.Second); last < want && still < 20 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			if cur := sink.reports.Load(); cur == last {
				still++
			} else {
				last, still = cur, 0
			}
		}
	}
	runtime.ReadMemStats(&m1)
	got := sink.reports.Load() - before
	if got < n/2 {
		t.Fatalf("%d neighbour reports for %d kernel changes", got, n)
	}
	per := (m1.TotalAlloc - m0.TotalAlloc) / uint64(got)
	t.Logf("%d neighbour messages: %d bytes allocated per message (the whole test process)", got, per)
	// Next to none per message; the bound leaves room for the test's own
	// execs, -race, and a resubscription's new 64 KiB buffer now and then
	// on a loaded machine — NeighSubscribe's was 64 KiB per message.
	if per > 4096 {
		t.Errorf("%d bytes allocated per neighbour message, want next to none", per)
	}
	sink.pmu.Lock()
	pins := fmt.Sprint(sink.pins)
	sink.pmu.Unlock()
	if want := fmt.Sprint(map[netip.Addr]string{op: "02:00:00:00:00:07"}); pins != want {
		t.Errorf("pins %s: want only the operator's, %s", pins, want)
	}
}
