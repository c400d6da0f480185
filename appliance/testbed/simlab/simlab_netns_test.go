package simlab

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/fwd"
)

// startLab builds the lab and starts the appliance; cleanup closes it and
// fails the test if the models met errors or leaked anything.
func startLab(t testing.TB, cfg lab.Config) (*Topology, *Appliance) {
	t.Helper()
	nstest.RequireRoot(t)
	tp, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tp.Destroy)
	app, err := StartAppliance(tp.App, []string{IfWireA, IfWireB}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i, w := range app.Wires {
			t.Logf("wire %d (%s): %+v", i, w.Name(), w.Stats())
		}
		if err := app.Close(); err != nil {
			t.Errorf("appliance close: %v", err)
		}
	})
	return tp, app
}

func ping(t testing.TB, ns *netns.NS, addr string) {
	t.Helper()
	out, err := ns.Run("ping", "-c", "3", "-i", "0.2", "-W", "2", addr)
	if err != nil {
		t.Fatalf("ping %s from %s: %v\n%s", addr, ns.Name, err, out)
	}
}

// TestSimRouter: the router between two hosts, running on two mlx5-sim
// ports wired to veths. Pings both ways for IPv4 and IPv6 (the engine
// resolves the hosts by ARP and ND through the model), a checksummed TCP
// transfer of 24 MiB per family, ICMP time exceeded back to A, and after
// Close the models hold nothing and met no error.
func TestSimRouter(t *testing.T) {
	cfg := lab.DefaultConfig()
	tp, app := startLab(t, cfg)
	ping(t, tp.A, "198.18.31.1")
	ping(t, tp.A, "2001:db8:31::1")
	ping(t, tp.B, "198.18.30.1")
	ping(t, tp.B, "2001:db8:30::1")
	learned := map[string]bool{}
	for _, n := range app.Engine.Neighbours() {
		learned[n.Addr.String()] = true
	}
	for _, want := range []string{"198.18.30.1", "198.18.31.1", "2001:db8:30::1", "2001:db8:31::1"} {
		if !learned[want] {
			t.Errorf("engine has no neighbour %s (has %v)", want, learned)
		}
	}
	// The hosts resolved their gateway to the model port's MAC: the
	// answers came from ovfwd through the model (the appliance kernel has
	// no address to answer for).
	for _, h := range []struct {
		ns      *netns.NS
		ifn     string
		gws     []string
		portMAC string
	}{{tp.A, IfHostA, []string{"198.18.30.254", "2001:db8:30::fe"}, PortMAC(0).String()},
		{tp.B, IfHostB, []string{"198.18.31.254", "2001:db8:31::fe"}, PortMAC(1).String()}} {
		for _, gw := range h.gws {
			if out := nstest.Run(t, h.ns, "ip", "neigh", "show", gw, "dev", h.ifn); !strings.Contains(out, h.portMAC) {
				t.Errorf("%s: neighbour %s is not model port MAC %s: %q", h.ns.Name, gw, h.portMAC, out)
			}
		}
	}

	const n = 24 << 20
	for _, dst := range []string{"198.18.31.1", "2001:db8:31::1"} {
		before := app.Engine.Stats()
		res, err := lab.TCPTransfer(context.Background(), tp.A, tp.B, netip.MustParseAddr(dst), n, 120*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", dst, err)
		}
		if !res.OK(n) {
			t.Fatalf("%s: received %d of %d bytes, sha256 sent %x received %x", dst, res.Bytes, n, res.Sent, res.Received)
		}
		after := app.Engine.Stats()
		pkts := after.Ports[0].RxPackets + after.Ports[1].RxPackets - before.Ports[0].RxPackets - before.Ports[1].RxPackets
		t.Logf("%s: %d MiB in %v: %.0f Mb/s, %.0f pps through the engine (both directions)", dst, n>>20,
			res.Elapsed.Round(time.Millisecond), float64(n)*8/res.Elapsed.Seconds()/1e6, float64(pkts)/res.Elapsed.Seconds())
	}

	before := app.Engine.Stats()
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
	if d := st.Drops[fwd.DropTTLExceeded] - before.Drops[fwd.DropTTLExceeded]; d < 2 || st.ICMPSent-before.ICMPSent < 2 {
		t.Errorf("engine: ttl_exceeded drops %d, ICMP sent %d; want ≥ 2 each", d, st.ICMPSent-before.ICMPSent)
	}
	for i, w := range app.Wires {
		ws := w.Stats()
		if ws.RxFrames == 0 || ws.TxFrames == 0 || ws.RxTruncated != 0 || ws.TxErrors != 0 {
			t.Errorf("wire %d: %+v", i, ws)
		}
	}
	t.Logf("engine: ports %+v drops %v", st.Ports, st.Drops)
}

// TestSimRouterTwoQueues: two queues per model port, so RSS in the model
// spreads flows over two workers, which both transmit into one wire.
// Pings and a checksummed 24 MiB TCP transfer per family still arrive
// intact.
func TestSimRouterTwoQueues(t *testing.T) {
	cfg := lab.DefaultConfig()
	cfg.Queues = 2
	tp, app := startLab(t, cfg)
	if n := len(app.Engine.Workers()); n != 2 {
		t.Fatalf("%d workers, want 2", n)
	}
	ping(t, tp.A, "198.18.31.1")
	ping(t, tp.B, "2001:db8:30::1")
	const n = 24 << 20
	for _, dst := range []string{"198.18.31.1", "2001:db8:31::1"} {
		res, err := lab.TCPTransfer(context.Background(), tp.A, tp.B, netip.MustParseAddr(dst), n, 120*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", dst, err)
		}
		if !res.OK(n) {
			t.Fatalf("%s: received %d of %d bytes, sha256 sent %x received %x", dst, res.Bytes, n, res.Sent, res.Received)
		}
		t.Logf("%s: %d MiB in %v", dst, n>>20, res.Elapsed.Round(time.Millisecond))
	}
}
