package daemon_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// Bridge mode with the XDP fast path, three hosts on one LAN (198.18.60.0/24):
//
//	host A a0 .1 ── p0 [ovfwd bridge] p1 ── b0 .2 host B
//	                               p2 ── c0 .3 host C
const bridgeFastConfig = `
[appliance]
mode = "bridge"
poll = "adaptive"
fast_path = "xdp" # the veths' peers run NAPI (GRO on b0, c0)

[[port]]
name = "p0"
driver = "afxdp-copy"
ifname = "p0"

[[port]]
name = "p1"
driver = "afxdp-copy"
ifname = "p1"

[[port]]
name = "p2"
driver = "afxdp-copy"
ifname = "p2"

[status]
socket = "%s"

[log]
level = "debug"
format = "text"
`

// The bridge fast path forwards A's unicast to B in the kernel once both
// are learned; B's link going down and B's MAC moving to p2 reach its map
// within 100 ms (read from the daemon's own map), and traffic follows.
func TestDaemonBridgeFastPathNetns(t *testing.T) {
	nstest.RequireRoot(t)
	bin := nstest.BuildOvfwd(t)
	a, app, b, c := nstest.New(t, "dbf"), nstest.New(t, "dbf"), nstest.New(t, "dbf"), nstest.New(t, "dbf")
	nstest.Link(t, a, "a0", app, "p0")
	nstest.Link(t, app, "p1", b, "b0")
	nstest.Link(t, app, "p2", c, "c0")
	macB := net.HardwareAddr{2, 0, 0, 0, 0x60, 2}
	for _, h := range []struct {
		ns      *netns.NS
		dev, ip string
		mac     string
	}{{a, "a0", "198.18.60.1/24", "02:00:00:00:60:01"}, {b, "b0", "198.18.60.2/24", macB.String()}, {c, "c0", "198.18.60.3/24", "02:00:00:00:60:03"}} {
		nstest.Run(t, h.ns, "ip", "link", "set", h.dev, "address", h.mac)
		// No IPv6 chatter (DAD, MLD): the frames that teach the bridge
		// where a station is are the test's own.
		nstest.Run(t, h.ns, "sysctl", "-qw", "net.ipv6.conf."+h.dev+".disable_ipv6=1")
		// NAPI on the receiving side for the redirect (GRO). Checksum
		// offload off: bridge mode forwards frames without parsing L4,
		// so a sender's unfinished checksum would reach B unfinished
		// (docs/fragments-and-offloads.md, "Bridge mode").
		nstest.Run(t, h.ns, "ethtool", "-K", h.dev, "tx", "off", "tso", "off", "gso", "off", "gro", "on")
		nstest.Run(t, h.ns, "ip", "addr", "add", h.ip, "dev", h.dev)
	}
	// A sends to B's MAC without asking (the test moves that MAC).
	nstest.Run(t, a, "ip", "neigh", "replace", "198.18.60.2", "lladdr", macB.String(), "dev", "a0", "nud", "permanent")

	dir := unitDir(t)
	sock := filepath.Join(dir, "run", "ovfwd.sock")
	cfgPath := filepath.Join(dir, "ovfwd.toml")
	writeConfig(t, cfgPath, fmt.Sprintf(bridgeFastConfig, sock))
	_, exited, _ := startUnit(t, app, bin, cfgPath)
	waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ready && len(s.Ports) == 3 })
	// Both learned (B answers A's ping, which floods first).
	ping(t, a, "198.18.60.2")
	ping(t, a, "198.18.60.3")

	macs := fastMACMap(t, app, "p0")
	ifindex := func(dev string) uint32 {
		var i int
		if err := app.Do(func() error {
			l, err := netlink.LinkByName(dev)
			if err == nil {
				i = l.Attrs().Index
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return uint32(i)
	}
	p1, p2 := ifindex("p1"), ifindex("p2")
	// entry reads B's fast-path entry: egress ifindex and learned port.
	entry := func() (egress, port uint32, ok bool) {
		var k [8]byte
		copy(k[:], macB)
		binary.NativeEndian.PutUint16(k[6:], 1)
		var v [12]byte
		if macs.Lookup(k[:], &v) != nil {
			return 0, 0, false
		}
		return binary.NativeEndian.Uint32(v[0:]), binary.NativeEndian.Uint32(v[8:]), true
	}
	// waitEntry polls the map (1 ms) for up to 5 s and says how long
	// after from B's entry satisfied ok.
	waitEntry := func(from time.Time, ok func(egress, port uint32, have bool) bool) (time.Duration, bool) {
		for time.Since(from) < 5*time.Second {
			if ok(entry()) {
				return time.Since(from), true
			}
			time.Sleep(time.Millisecond)
		}
		return time.Since(from), false
	}
	if d, ok := waitEntry(time.Now(), func(e, p uint32, have bool) bool { return have && e == p1 && p == 1 }); !ok {
		e, p, have := entry()
		t.Fatalf("B not in the fast path after %v: egress %d port %d present %v", d, e, p, have)
	}

	// Host A's datagrams to B, one every millisecond, counted where they land.
	atB := nstest.CountUDP(t, b, netip.MustParseAddrPort("198.18.60.2:9"))
	stop := sendEvery(t, a, "198.18.60.2", time.Millisecond)
	defer stop()
	s := waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return s.Ports[0].Backend["fast_forwarded"] >= 200 })
	t.Logf("p0 fast path: %v", s.Ports[0].Backend)
	if atB.Load() < 150 {
		t.Fatalf("B received %d datagrams while the fast path forwarded %d", atB.Load(), s.Ports[0].Backend["fast_forwarded"])
	}

	// B's link goes down: p1 stops being a redirect target. Timed from
	// the moment the command that made the change returned (under load
	// starting `ip` alone can take longer than the bound).
	nstest.Run(t, b, "ip", "link", "set", "b0", "down")
	t0 := time.Now()
	d, ok := waitEntry(t0, func(e, p uint32, have bool) bool { return have && e == 0 })
	t.Logf("link down: B's entry punts after %v", d)
	if !ok || d > 100*time.Millisecond {
		t.Fatalf("link down reached the fast path after %v (%v)", d, ok)
	}
	d0 := waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return true })
	d1 := waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return s.Ports[0].Backend["fast_punt_next_hop"] >= d0.Ports[0].Backend["fast_punt_next_hop"]+50
	})
	if f0, f1 := d0.Ports[0].Backend["fast_forwarded"], d1.Ports[0].Backend["fast_forwarded"]; f1 != f0 {
		t.Errorf("fast path forwarded %d frames with B's only port down", f1-f0)
	}

	// B's MAC (and address) moves to C's port: C speaks first, the engine
	// learns the move (the fast path punts a source it knows elsewhere),
	// and the fast path's entry follows. Timed from just before C's first
	// datagram (its ARP request carries B's MAC): a frame C sent earlier
	// can only make the move visible sooner.
	nstest.Run(t, c, "ip", "link", "set", "c0", "address", macB.String())
	nstest.Run(t, c, "ip", "addr", "add", "198.18.60.2/24", "dev", "c0")
	t0 = time.Now()
	atC := nstest.CountUDP(t, c, netip.MustParseAddrPort("198.18.60.2:9"))
	sendOnce(t, c, "198.18.60.2", "198.18.60.1")
	d, ok = waitEntry(t0, func(e, p uint32, have bool) bool { return have && e == p2 && p == 2 })
	t.Logf("MAC move: B's entry on p2 %v after C's first frame with B's MAC", d)
	if !ok || d > 100*time.Millisecond {
		t.Fatalf("MAC move reached the fast path after %v (%v)", d, ok)
	}
	m0 := waitStatus(t, sock, exited, func(s *status.Snapshot) bool { return true })
	c0 := atC.Load()
	m1 := waitStatus(t, sock, exited, func(s *status.Snapshot) bool {
		return s.Ports[0].Backend["fast_forwarded"] >= m0.Ports[0].Backend["fast_forwarded"]+100
	})
	if atC.Load() < c0+50 {
		t.Errorf("C received %d datagrams while the fast path forwarded %d", atC.Load()-c0,
			m1.Ports[0].Backend["fast_forwarded"]-m0.Ports[0].Backend["fast_forwarded"])
	}
}

// fastMACMap opens the bridge fast path's MAC map of the XDP program on
// dev in ns (the daemon's own).
func fastMACMap(t *testing.T, ns *netns.NS, dev string) *ebpf.Map {
	t.Helper()
	var progID uint32
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName(dev)
		if err == nil && l.Attrs().Xdp != nil {
			progID = l.Attrs().Xdp.ProgId
		}
		return err
	}); err != nil || progID == 0 {
		t.Fatalf("no XDP program on %s: %v", dev, err)
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(progID))
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := info.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue
		}
		if mi, err := m.Info(); err == nil && mi.Name == "ovfwd_fp_macs" {
			t.Cleanup(func() { m.Close() })
			return m
		}
		m.Close()
	}
	t.Fatalf("program %d on %s has no ovfwd_fp_macs map", progID, dev)
	return nil
}

// sendEvery sends a UDP datagram from ns to dst:9 every period until stop
// is called (bounded: 60 s).
func sendEvery(t *testing.T, ns *netns.NS, dst string, period time.Duration) (stop func()) {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() (err error) {
		c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(dst), Port: 9})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	done, fin := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(fin)
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(period) {
			select {
			case <-done:
				return
			default:
			}
			c.Write([]byte("bridge fast path"))
		}
	}()
	var once atomic.Bool
	stop = func() {
		if once.CompareAndSwap(false, true) {
			close(done)
			<-fin
			c.Close()
		}
	}
	t.Cleanup(stop)
	return stop
}

// sendOnce sends one datagram from src to dst:9 in ns.
func sendOnce(t *testing.T, ns *netns.NS, src, dst string) {
	t.Helper()
	if err := ns.Do(func() error {
		c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(src)}, &net.UDPAddr{IP: net.ParseIP(dst), Port: 9})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("moved"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
