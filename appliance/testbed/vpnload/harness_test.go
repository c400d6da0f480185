package vpnload

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// lab is the bench topology with a PKI and n client configs, for tests.
type lab struct {
	t    *testing.T
	topo *topology
	dir  string
	cfgs []control.ClientConfig
	o    Options
}

// builtOvfwd is one build of the daemon per test binary, in buildDir.
var builtOvfwd, buildDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func newLab(t *testing.T, clients int, o Options) *lab {
	t.Helper()
	nstest.RequireRoot(t)
	o.Clients = clients
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.OvfwdBin == "" {
		if builtOvfwd == "" {
			var err error
			if buildDir, err = os.MkdirTemp("", "vpnload-test"); err != nil {
				t.Fatal(err)
			}
			if builtOvfwd, err = netns.OvfwdBinary(buildDir); err != nil {
				t.Fatal(err)
			}
		}
		o.OvfwdBin = builtOvfwd
	}
	l := &lab{t: t, dir: unittest.TempDir(t, unittest.Load(t)), o: o}
	if err := pki.Init(pkiIn(l.dir)); err != nil {
		t.Fatal(err)
	}
	var err error
	if l.cfgs, err = clientConfigs(pkiIn(l.dir), clients); err != nil {
		t.Fatal(err)
	}
	if l.topo, err = buildTopology(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.topo.destroy)
	return l
}

func (l *lab) startOvfwd() *server {
	l.t.Helper()
	s, err := startOvfwd(l.topo, l.dir, l.o.OvfwdBin, &l.o)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() {
		s.stop()
		if l.t.Failed() {
			l.t.Logf("ovfwd log:\n%s", tail(s.log(), 4000))
		}
	})
	return s
}

func (l *lab) dial(cfgs []control.ClientConfig) []*control.Client {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), l.o.HandshakeTimeout)
	defer cancel()
	start := time.Now()
	clients, err := dialAll(ctx, l.topo.cli, cfgs, l.o.Parallel)
	l.t.Cleanup(func() { closeAll(clients) })
	if err != nil {
		l.t.Fatalf("dial: %v", err)
	}
	l.t.Logf("%d clients connected in %v", len(clients), time.Since(start).Round(time.Millisecond))
	return clients
}

// peers is the number of VPN peers ovfwd reports.
func peers(t *testing.T, s *server) int {
	st, err := status.Fetch(s.status, time.Second)
	if err != nil || st.VPN == nil {
		t.Fatalf("status: %v", err)
	}
	return len(st.VPN.Peers)
}

// echoSink pings the sink host through c and reports whether a reply came
// back within timeout (tries 3 times).
func echoSink(c *control.Client, seq uint16, timeout time.Duration) bool {
	p := c.Pushed()
	if p == nil {
		return false
	}
	sink := netip.MustParseAddr(sinkIP)
	req := netns.ICMPEcho(p.IPv4.Addr(), sink, 0x4849, seq)
	for try := 0; try < 3; try++ {
		if c.Send(req) != nil {
			time.Sleep(timeout / 3)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout/3)
		for {
			got, err := c.Recv(ctx)
			if err != nil {
				break
			}
			if netns.IsEchoReply(got, sink, seq) {
				cancel()
				return true
			}
		}
		cancel()
	}
	return false
}
