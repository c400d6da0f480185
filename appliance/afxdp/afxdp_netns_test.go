package afxdp

import (
	"strconv"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// topo is host A ⇄ [a1 appliance b1] ⇄ host B on one /24, for bridging.
type topo struct {
	a, app, b *netns.NS
}

const (
	hostA = "198.18.8.1"
	hostB = "198.18.8.2"
)

func newTopo(t testing.TB, queues int) *topo {
	t.Helper()
	tp := &topo{a: nstest.New(t, "h8a"), app: nstest.New(t, "h8m"), b: nstest.New(t, "h8b")}
	if queues <= 1 {
		nstest.Link(t, tp.a, "h8a0", tp.app, "h8a1")
		nstest.Link(t, tp.b, "h8b0", tp.app, "h8b1")
	} else {
		q := itoa(queues)
		for _, l := range [][2]string{{"h8a0", "h8a1"}, {"h8b0", "h8b1"}} {
			ns := tp.a
			if l[0] == "h8b0" {
				ns = tp.b
			}
			nstest.Run(t, ns, "ip", "link", "add", l[0], "numtxqueues", q, "numrxqueues", q, "type", "veth",
				"peer", "name", l[1], "numtxqueues", q, "numrxqueues", q)
			nstest.Run(t, ns, "ip", "link", "set", l[1], "netns", tp.app.Name)
			nstest.Run(t, ns, "ip", "link", "set", l[0], "up")
			nstest.Run(t, tp.app, "ip", "link", "set", l[1], "up")
		}
	}
	nstest.Run(t, tp.a, "ip", "addr", "add", hostA+"/24", "dev", "h8a0")
	nstest.Run(t, tp.b, "ip", "addr", "add", hostB+"/24", "dev", "h8b0")
	return tp
}

func itoa(n int) string { return strconv.Itoa(n) }

func openIn(t testing.TB, ns *netns.NS, ifname string, o Options) *Port {
	t.Helper()
	var p *Port
	o.Logf = t.Logf
	suite := false
	if o.FastPath == nil {
		o.FastPath = suiteFastPath(t)
		suite = o.FastPath != nil
	}
	if err := ns.Do(func() (err error) { p, err = Open(ifname, o); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if suite {
		suiteFastOn(t, p, o.Index)
	}
	return p
}

func TestBridgeHubPing(t *testing.T) {
	tp := newTopo(t, 1)
	pa := openIn(t, tp.app, "h8a1", Options{Pool: 1, Index: 0})
	pb := openIn(t, tp.app, "h8b1", Options{Pool: 2, Index: 1})
	for _, m := range append(pa.Modes(), pb.Modes()...) {
		if m.ZeroCopy {
			t.Errorf("veth bound zero-copy: %v (veth has no XSK pool support)", m)
		}
		if m.Attach == 0 {
			t.Errorf("no attach mode: %v", m)
		}
	}
	h := startHub(t, tp.app, pa, pb)
	out, err := tp.a.Run("ping", "-c", "3", "-i", "0.2", "-W", "2", hostB)
	if err != nil {
		t.Fatalf("ping through the AF_XDP hub: %v\n%s", err, out)
	}
	if h.copied.Load() < 6 {
		t.Errorf("hub copied %d frames, want at least 3 requests and 3 replies", h.copied.Load())
	}
	st := pa.Stats()
	if st.RxPackets == 0 || st.TxPackets == 0 {
		t.Errorf("port a counters: %+v", st)
	}
}
