package nlsync

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
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
	ns := netns.New(t, "nls")
	peer := netns.New(t, "nls")
	netns.Link(t, ns, "p0", peer, "x0")
	netns.Run(t, ns, "ip", "addr", "add", "198.18.57.254/24", "dev", "p0")
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
	netns.Run(t, ns, "ip", "-batch", path)
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
	netns.Run(t, ns, "ip", "route", "del", "198.19.0.1/32")
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
