package afxdp

import (
	"bytes"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/fwd"
)

// fpNet is host A (198.18.8.1) ⇄ [a1 router b1] ⇄ host B (198.18.9.1),
// the router running the engine with the fast path, its tables mirrored
// every 20 ms; B counts (and drops in XDP) what reaches it for
// 198.18.50.0/24, which the router sends via B.
type fpNet struct {
	tp     *topo
	pa, pb *Port
	e      *fwd.Engine
	fp     *FastPath
	sink   *DropCounter
}

func newFPNet(t *testing.T) *fpNet {
	nstest.RequireRoot(t)
	tp := &topo{a: nstest.New(t, "h10a"), app: nstest.New(t, "h10m"), b: nstest.New(t, "h10b")}
	nstest.Link(t, tp.a, "h10a0", tp.app, "h10a1")
	nstest.Link(t, tp.b, "h10b0", tp.app, "h10b1")
	nstest.Run(t, tp.a, "ip", "addr", "add", "198.18.8.1/24", "dev", "h10a0")
	// Host A keeps its offloads: its UDP leaves with CHECKSUM_PARTIAL,
	// which the fast path finishes (TestFastPathFinishesPartialChecksums).
	nstest.Run(t, tp.a, "ip", "route", "add", "198.18.50.0/24", "via", "198.18.8.254")
	nstest.Run(t, tp.b, "ip", "addr", "add", "198.18.9.1/24", "dev", "h10b0")
	nstest.Run(t, tp.b, "ip", "route", "add", "default", "via", "198.18.9.254")
	n := &fpNet{tp: tp}
	var err error
	if n.fp, err = NewFastPath(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.fp.Close() })
	sh := NewShare(3, 2)
	n.pa = openIn(t, tp.app, "h10a1", Options{Index: 0, Pool: 1, Share: sh, FastPath: n.fp})
	n.pb = openIn(t, tp.app, "h10b1", Options{Index: 1, Pool: 2, Share: sh, FastPath: n.fp})
	if err := tp.b.Do(func() error {
		ifi, err := net.InterfaceByName("h10b0")
		if err != nil {
			return err
		}
		if n.sink, err = NewDropCounterFor(netip.MustParsePrefix("198.18.50.0/24")); err != nil {
			return err
		}
		_, err = n.sink.Attach(ifi.Index, ModeNative)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.sink.Close() })
	if n.e, err = fwd.New(fwd.Config{Mode: fwd.ModeRouter}, []fwd.Port{n.pa, n.pb}); err != nil {
		t.Fatal(err)
	}
	must(t, n.e.AddAddress(0, netip.MustParsePrefix("198.18.8.254/24")))
	must(t, n.e.AddAddress(1, netip.MustParsePrefix("198.18.9.254/24")))
	must(t, n.e.AddRoute(netip.MustParsePrefix("198.18.50.0/24"), fwd.NextHop{Port: 1, Via: netip.MustParseAddr("198.18.9.1")}))
	fs, err := NewFastSync(n.fp, []int{n.pa.Ifindex(), n.pb.Ifindex()})
	must(t, err)
	must(t, n.pa.SetFast(true, false))
	must(t, n.pb.SetFast(true, false))
	runFast(t, n.e, []fwd.Port{n.pa, n.pb}, fs)
	return n
}

// runFast runs the engine's workers over ports as the daemon does and,
// as its control loop, services the engine and mirrors its tables into
// the fast path every 20 ms, until the test ends.
func runFast(t *testing.T, e *fwd.Engine, ports []fwd.Port, fs *FastSync) {
	// The runner's own control loop is slowed to never: this one syncs.
	run, err := runner.Start(e, ports, runner.Options{Interval: time.Hour})
	must(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				e.Service()
				if err := fs.Apply(e.FastView()); err != nil {
					t.Errorf("fast path sync: %v", err)
					return
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait(); run.Stop(0) })
}

// send sends UDP datagrams from host A to dst every 500 µs until the test
// ends (bounded: 60 s).
func (n *fpNet) send(t *testing.T, dst string) {
	var c *net.UDPConn
	if err := n.tp.a.Do(func() (err error) {
		c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(dst), Port: 9})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		payload := bytes.Repeat([]byte{7}, 32)
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Microsecond) {
			select {
			case <-done:
				return
			default:
			}
			c.Write(payload)
		}
	}()
	t.Cleanup(func() { close(done); <-fin; c.Close() })
}

func (n *fpNet) forwarded(t *testing.T) uint64 {
	st, err := n.pa.FastStats()
	if err != nil {
		t.Fatal(err)
	}
	return st[FastForwarded]
}

// waitMoving waits up to d for the fast path's forwarded count to grow by
// at least k and returns how long it took.
func (n *fpNet) waitMoving(t *testing.T, k uint64, d time.Duration) (time.Duration, bool) {
	start := time.Now()
	base := n.forwarded(t)
	for time.Since(start) < d {
		if n.forwarded(t) >= base+k {
			return time.Since(start), true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start), false
}

// waitStill waits up to d for the forwarded count to stop moving (no
// change over 30 ms) and returns when it last moved, measured from start.
func (n *fpNet) waitStill(t *testing.T, start time.Time, d time.Duration) (time.Duration, bool) {
	last, lastAt := n.forwarded(t), time.Since(start)
	for time.Since(start) < d {
		time.Sleep(2 * time.Millisecond)
		if v := n.forwarded(t); v != last {
			last, lastAt = v, time.Since(start)
		} else if time.Since(start)-lastAt > 30*time.Millisecond {
			return lastAt, true
		}
	}
	return lastAt, false
}

// A route change and a neighbour change reach the fast path within 100 ms
// of the engine publishing them, and traffic follows: the flow is forwarded
// in the kernel once the engine resolved B; it stops being (the engine
// answers it) right after the route is deleted, comes back when it is
// added, and a new MAC for B is in the fast path's next hop in time.
func TestFastPathFollowsTables(t *testing.T) {
	n := newFPNet(t)
	n.send(t, "198.18.50.7")
	if d, ok := n.waitMoving(t, 50, 5*time.Second); !ok {
		st, _ := n.pa.FastStats()
		t.Fatalf("the fast path did not take the flow within %v: %v, engine %+v, view %+v, neigh %+v", d, st, n.e.Stats(), n.e.FastView(), n.e.Neighbours())
	}
	sunk, _, _ := n.sink.Count()
	if sunk < 50 {
		t.Fatalf("host B counted %d datagrams", sunk)
	}
	// A's checksums leave unfinished: the fast path finished them.
	if st, err := n.pa.FastStats(); err != nil || st[FastCsumFinished] < 50 || st[FastPuntPartial] != 0 {
		t.Fatalf("csum_finished %d, punt_csum_partial %d (%v); want ≥ 50 and 0", st[FastCsumFinished], st[FastPuntPartial], err)
	}

	t0 := time.Now()
	if err := n.e.DeleteRoute(netip.MustParsePrefix("198.18.50.0/24")); err != nil {
		t.Fatal(err)
	}
	if at, ok := n.waitStill(t, t0, 2*time.Second); !ok || at > 100*time.Millisecond {
		t.Fatalf("route delete: the fast path still forwarded %v after it (settled %v)", at, ok)
	}
	t1 := time.Now()
	if err := n.e.AddRoute(netip.MustParsePrefix("198.18.50.0/24"), fwd.NextHop{Port: 1, Via: netip.MustParseAddr("198.18.9.1")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.waitMoving(t, 1, time.Second); !ok || time.Since(t1) > 100*time.Millisecond {
		t.Fatalf("route add: the fast path took %v (moving %v)", time.Since(t1), ok)
	}

	newMAC := net.HardwareAddr{2, 0, 0x5e, 0, 0x10, 0xbb}
	t2 := time.Now()
	if err := n.e.SetNeighbour(1, netip.MustParseAddr("198.18.9.1"), newMAC); err != nil {
		t.Fatal(err)
	}
	key, _ := lpmKey4(netip.MustParsePrefix("198.18.50.0/24"))
	for {
		var id uint32
		var nh [fastNHSize]byte
		if n.fp.route4.Lookup(key, &id) == nil && n.fp.nh.Lookup(id, &nh) == nil && bytes.Equal(nh[8:14], newMAC) {
			break
		}
		if time.Since(t2) > 100*time.Millisecond {
			t.Fatalf("neighbour change not in the fast path after %v", time.Since(t2))
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, ok := n.waitMoving(t, 20, time.Second); !ok {
		t.Fatal("the flow did not stay on the fast path after the neighbour change")
	}
}

// TCP with both hosts' default offloads, IPv4 and IPv6, A → B through
// the engine and the fast path: every segment and ACK leaves its host
// with CHECKSUM_PARTIAL, the fast path finishes and forwards them, and the
// bytes arrive as sent (a wrong checksum would stall the transfer: the
// receiver drops the segment).
func TestFastPathFinishesTCP(t *testing.T) {
	nstest.RequireRoot(t)
	tp := &topo{a: nstest.New(t, "h11a"), app: nstest.New(t, "h11m"), b: nstest.New(t, "h11b")}
	nstest.Link(t, tp.a, "h11a0", tp.app, "h11a1")
	nstest.Link(t, tp.b, "h11b0", tp.app, "h11b1")
	for _, c := range []struct {
		ns          *netns.NS
		dev, v4, v6 string
		gw4, gw6    string
	}{{tp.a, "h11a0", "198.18.10.1/24", "2001:db8:10::1/64", "198.18.10.254", "2001:db8:10::fe"},
		{tp.b, "h11b0", "198.18.11.1/24", "2001:db8:11::1/64", "198.18.11.254", "2001:db8:11::fe"}} {
		nstest.Run(t, c.ns, "ip", "addr", "add", c.v4, "dev", c.dev)
		nstest.Run(t, c.ns, "ip", "addr", "add", c.v6, "dev", c.dev, "nodad")
		nstest.Run(t, c.ns, "ip", "route", "add", "default", "via", c.gw4)
		nstest.Run(t, c.ns, "ip", "-6", "route", "add", "default", "via", c.gw6)
		// A frame redirected into a veth needs NAPI on the peer.
		nstest.Run(t, c.ns, "ethtool", "-K", c.dev, "gro", "on")
	}
	fp, err := NewFastPath()
	must(t, err)
	t.Cleanup(func() { fp.Close() })
	sh := NewShare(3, 2)
	pa := openIn(t, tp.app, "h11a1", Options{Index: 0, Pool: 1, Share: sh, FastPath: fp})
	pb := openIn(t, tp.app, "h11b1", Options{Index: 1, Pool: 2, Share: sh, FastPath: fp})
	e, err := fwd.New(fwd.Config{Mode: fwd.ModeRouter}, []fwd.Port{pa, pb})
	must(t, err)
	for i, a := range []string{"198.18.10.254/24", "198.18.11.254/24", "2001:db8:10::fe/64", "2001:db8:11::fe/64"} {
		must(t, e.AddAddress(i%2, netip.MustParsePrefix(a)))
	}
	fs, err := NewFastSync(fp, []int{pa.Ifindex(), pb.Ifindex()})
	must(t, err)
	must(t, pa.SetFast(true, false))
	must(t, pb.SetFast(true, false))
	runFast(t, e, []fwd.Port{pa, pb}, fs)

	const n = 4 << 20
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	for _, to := range []string{"198.18.11.1", "2001:db8:11::1"} {
		// Until the engine has resolved B and a control tick has put it in
		// the fast path, the workers forward: warm up (10 s at most).
		for end := time.Now().Add(10 * time.Second); ; {
			st0, _ := pa.FastStats()
			if d := tcpSend(t, tp.a, tp.b, to, data[:64<<10]); d != "" {
				t.Fatalf("TCP to %s: %s", to, d)
			}
			if st1, _ := pa.FastStats(); st1[FastForwarded] > st0[FastForwarded] {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("TCP to %s: the fast path forwarded nothing within 10 s", to)
			}
			time.Sleep(20 * time.Millisecond)
		}
		before, _ := pa.FastStats()
		if d := tcpSend(t, tp.a, tp.b, to, data); d != "" {
			t.Fatalf("TCP to %s: %s", to, d)
		}
		st, err := pa.FastStats()
		must(t, err)
		acks, err := pb.FastStats()
		must(t, err)
		fin := st[FastCsumFinished] - before[FastCsumFinished]
		t.Logf("TCP to %s: %d bytes intact; p0: %d forwarded, %d checksums finished; p1 (ACKs): %d finished", to, n,
			st[FastForwarded]-before[FastForwarded], fin, acks[FastCsumFinished])
		if fin < n/1500/2 || st[FastPuntPartial] != 0 {
			t.Errorf("TCP to %s: the fast path finished %d checksums (of about %d segments), punted %d", to, fin, n/1448, st[FastPuntPartial])
		}
	}
}

// tcpSend sends data from src to dst's address to over TCP and says what
// went wrong, "" when dst received exactly data (bounded: 30 s).
func tcpSend(t *testing.T, src, dst *netns.NS, to string, data []byte) string {
	t.Helper()
	var ln net.Listener
	if err := dst.Do(func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(to, "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		var b bytes.Buffer
		b.ReadFrom(c)
		got <- b.Bytes()
	}()
	var c net.Conn
	if err := src.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		return err.Error()
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	_, werr := c.Write(data)
	c.Close()
	b := <-got
	switch {
	case werr != nil:
		return "write: " + werr.Error()
	case !bytes.Equal(b, data):
		return "received " + strconv.Itoa(len(b)) + " bytes, not the ones sent"
	}
	return ""
}
