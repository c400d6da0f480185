package lab

import (
	"context"
	"net/netip"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

func startLab(t *testing.T, cfg Config) (*Topology, *Appliance) {
	t.Helper()
	nstest.RequireRoot(t)
	tp, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tp.Destroy)
	app, err := StartAppliance(tp.App, []string{ifAppA, ifAppB}, cfg, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	return tp, app
}

func ping(t *testing.T, ns *netns.NS, addr string, extra ...string) {
	t.Helper()
	args := append([]string{"ping", "-c", "3", "-i", "0.2", "-W", "2"}, extra...)
	out, err := ns.Run(append(args, addr)...)
	if err != nil {
		t.Fatalf("ping %s from %s: %v\n%s", addr, ns.Name, err, out)
	}
}

func TestRouterIPv4IPv6(t *testing.T) {
	cfg := DefaultConfig()
	tp, app := startLab(t, cfg)
	ping(t, tp.A, "198.18.31.1")
	ping(t, tp.A, "2001:db8:31::1")
	ping(t, tp.B, "198.18.30.1")
	// The engine resolved both hosts by ARP and ND itself.
	learned := map[string]bool{}
	for _, n := range app.Engine.Neighbours() {
		learned[n.Addr.String()] = true
	}
	for _, want := range []string{"198.18.30.1", "198.18.31.1", "2001:db8:30::1", "2001:db8:31::1"} {
		if !learned[want] {
			t.Errorf("engine has no neighbour %s (has %v)", want, learned)
		}
	}
	// The appliance's own address answers from the kernel (management),
	// which can reply only through the neighbours ovfwd mirrored.
	ping(t, tp.A, "198.18.30.254")
	ping(t, tp.A, "2001:db8:30::fe")
	if out := nstest.Run(t, tp.App, "ip", "neigh", "show", "dev", ifAppA); !strings.Contains(out, "198.18.30.1 ") {
		t.Errorf("kernel has no mirrored neighbour for host A:\n%s", out)
	}
	st := app.Engine.Stats()
	t.Logf("engine: ports %+v drops %v", st.Ports, st.Drops)
}

// ≥ 50 MB over TCP through the router, checksummed end to end.
func TestTCPTransfer50MB(t *testing.T) {
	tp, app := startLab(t, DefaultConfig())
	const n = 64 << 20
	for _, dst := range []string{"198.18.31.1", "2001:db8:31::1"} {
		res, err := TCPTransfer(context.Background(), tp.A, tp.B, netip.MustParseAddr(dst), n, 90*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", dst, err)
		}
		if !res.OK(n) {
			t.Fatalf("%s: received %d of %d bytes, sha256 sent %x received %x", dst, res.Bytes, n, res.Sent, res.Received)
		}
		t.Logf("%s: %d MiB in %v (%.0f Mb/s), sha256 %x", dst, n>>20, res.Elapsed, float64(n)*8/res.Elapsed.Seconds()/1e6, res.Sent[:8])
	}
	t.Logf("engine drops: %v", app.Engine.Stats().Drops)
}

// A packet whose TTL / hop limit runs out at the appliance gets an ICMP
// time exceeded back to the sender.
func TestICMPTimeExceeded(t *testing.T) {
	tp, app := startLab(t, DefaultConfig())
	ping(t, tp.A, "198.18.31.1") // resolve first, so the TTL-1 probe is not held
	for _, c := range []struct{ dst, want string }{
		{"198.18.31.1", "Time to live exceeded"},
		{"2001:db8:31::1", "Time exceeded: Hop limit"},
	} {
		out, _ := tp.A.Run("ping", "-c", "1", "-W", "2", "-t", "1", c.dst)
		if !strings.Contains(out, c.want) {
			t.Errorf("ping -t 1 %s: no %q:\n%s", c.dst, c.want, out)
		}
	}
	st := app.Engine.Stats()
	if st.Drops[fwd.DropTTLExceeded] < 2 || st.ICMPSent < 2 {
		t.Errorf("engine: ttl_exceeded drops %d, ICMP sent %d; want ≥ 2 each", st.Drops[fwd.DropTTLExceeded], st.ICMPSent)
	}
}

// An appliance port goes down and up while traffic flows; forwarding
// resumes without restarting anything. Both the egress port (TX meets
// ENETDOWN) and the ingress port (the XDP program and sockets must survive).
func TestLinkFlapRecovers(t *testing.T) {
	tp, app := startLab(t, DefaultConfig())
	ping(t, tp.A, "198.18.31.1")
	ctx, cancel := context.WithCancel(context.Background())
	var flow UDPFlow
	done := make(chan error, 1)
	go func() { done <- flow.Run(ctx, tp.A, tp.B, netip.MustParseAddr("198.18.31.1"), 2000, 1<<20) }()
	defer func() { cancel(); <-done }()
	time.Sleep(300 * time.Millisecond)
	for _, ifn := range []string{ifAppB, ifAppA} {
		nstest.Run(t, tp.App, "ip", "link", "set", ifn, "down")
		time.Sleep(500 * time.Millisecond)
		downRx := flow.Received.Load()
		nstest.Run(t, tp.App, "ip", "link", "set", ifn, "up")
		var after uint64
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if after = flow.Received.Load(); after > downRx+500 {
				break
			}
		}
		if after <= downRx+500 {
			t.Fatalf("%s flap: afterwards only %d more datagrams arrived", ifn, after-downRx)
		}
		t.Logf("%s flap: forwarding resumed (%d datagrams since up)", ifn, after-downRx)
	}
	ping(t, tp.A, "198.18.31.1")
	ping(t, tp.A, "2001:db8:31::1")
	ps := app.Ports[1].Stats()
	t.Logf("udp %d sent %d received; %s: link_down drops %d, kick errors %d", flow.Sent.Load(), flow.Received.Load(),
		ifAppB, ps.Drops[fwd.DropLinkDown], ps.KickErrors)
	if ps.Drops[fwd.DropLinkDown]+ps.KickErrors == 0 {
		t.Errorf("%s was down under traffic but counted no link_down drop or kick error", ifAppB)
	}
}

// Bridge mode: the hosts share a subnet; the appliance switches frames
// (ARP and ND included) between its ports.
func TestBridgeMode(t *testing.T) {
	tp, app := startLab(t, BridgeConfig())
	ping(t, tp.A, "198.18.32.2")
	ping(t, tp.A, "2001:db8:32::2")
	res, err := TCPTransfer(context.Background(), tp.A, tp.B, netip.MustParseAddr("198.18.32.2"), 8<<20, 60*time.Second)
	if err != nil || !res.OK(8<<20) {
		t.Fatalf("tcp over the bridge: %v, %d bytes", err, res.Bytes)
	}
	if st := app.Engine.Stats(); st.Ports[0].RxPackets == 0 || st.Ports[1].TxPackets == 0 {
		t.Fatalf("engine did not switch: %+v", st.Ports)
	}
}

// Two queues per veth: one socket and one worker per queue, both used.
func TestTwoQueues(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Queues = 2
	tp, app := startLab(t, cfg)
	for _, p := range app.Ports {
		if n := len(p.Modes()); n != 2 || p.Info().Queues != 2 {
			t.Fatalf("%s: %d queues bound, want 2", p.Info().Name, n)
		}
	}
	if n := len(app.Engine.Workers()); n != 2 {
		t.Fatalf("%d workers, want 2", n)
	}
	ping(t, tp.A, "198.18.31.1")
	// Many flows (source ports) so the sending veth spreads them over its
	// two TX queues, which are the appliance side's two RX queues.
	var flows [16]UDPFlow
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan struct{}, len(flows))
	for i := range flows {
		go func() {
			flows[i].Run(ctx, tp.A, tp.B, netip.MustParseAddr("198.18.31.1"), 200, 300)
			done <- struct{}{}
		}()
	}
	for range flows {
		<-done
	}
	var sent, got uint64
	for i := range flows {
		sent += flows[i].Sent.Load()
		got += flows[i].Received.Load()
	}
	q0, q1 := app.Ports[0].QueueRxPackets(0), app.Ports[0].QueueRxPackets(1)
	t.Logf("udp %d sent, %d received; %s rx queue 0: %d, queue 1: %d", sent, got, ifAppA, q0, q1)
	if q0 == 0 || q1 == 0 {
		t.Errorf("a queue received nothing (q0 %d, q1 %d)", q0, q1)
	}
	if got < sent*9/10 {
		t.Errorf("only %d of %d datagrams arrived", got, sent)
	}
}

// The neighbours ovfwd mirrored into the kernel are taken back when the
// appliance stops (they are permanent entries and would go stale).
func TestMirroredNeighboursRemovedOnClose(t *testing.T) {
	tp, app := startLab(t, DefaultConfig())
	ping(t, tp.A, "198.18.31.1")
	var out string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out = nstest.Run(t, tp.App, "ip", "neigh", "show", "nud", "permanent"); strings.Contains(out, "198.18.30.1 ") {
			break
		}
	}
	if !strings.Contains(out, "198.18.30.1 ") {
		t.Fatalf("no mirrored entry for host A:\n%s", out)
	}
	app.Close()
	if out = nstest.Run(t, tp.App, "ip", "neigh", "show", "nud", "permanent"); strings.TrimSpace(out) != "" {
		t.Fatalf("mirrored entries left after Close:\n%s", out)
	}
}
