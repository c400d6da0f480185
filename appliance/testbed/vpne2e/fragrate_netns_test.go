package vpne2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// BenchmarkFragmentPath measures, once whatever b.N, how many 1,472-byte
// datagrams a second a stock client gets through to the LAN host when
// each outer datagram is fragmented (the kernel reassembles, worker 0
// decrypts), against 1,400-byte ones that are not, for ovfwd and for an
// openvpn 2.6 server on the same lab:
//
//	go test -run '^$' -bench FragmentPath -benchtime 1x ./appliance/testbed/vpne2e/
func BenchmarkFragmentPath(t *testing.B) {
	l, srv := setup(t, 1, vpne2e.ServerOptions{})
	run := func(name string) {
		c := connect(t, l, 0, pki.Profile{Name: "rate-" + name})
		pingLossPct(c.NS, vpne2e.LANHost4, 56, 2)
		for _, size := range []int{1400, 1472} {
			for _, burst := range []int{20, 100} {
				r, err := vpne2e.Datagrams(c.NS, l.LAN, vpne2e.LANHost4, size, 20000, burst, time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%-7s %4d-byte datagrams, bursts of %3d/ms: offered %6.0f/s, delivered intact %6.0f/s, %v",
					name, size, burst, float64(r.Sent)/r.Sending.Seconds(), float64(r.Intact)/r.Sending.Seconds(), r)
			}
		}
		// Where the rest went: the appliance's socket buffers and
		// reassembly, the client's socket buffer.
		for _, ns := range []struct {
			name string
			ns   *netns.NS
		}{{"appliance", l.App}, {"client", c.NS}} {
			out, _ := ns.ns.Run("nstat", "-az", "UdpRcvbufErrors", "Udp6RcvbufErrors", "IpReasmOKs", "IpReasmFails", "Ip6ReasmOKs", "Ip6ReasmFails")
			t.Logf("%s %s namespace: %s", name, ns.name, strings.Join(strings.Fields(out), " "))
		}
		c.Stop()
	}
	run("ovfwd")
	logDrops(t, srv)
	srv.Stop()
	if _, err := l.StartOpenVPN(vpne2e.ServerOptions{}); err != nil {
		t.Fatal(err)
	}
	run("openvpn")
}
