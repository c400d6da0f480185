package vpne2e_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

var (
	pingReply = regexp.MustCompile(`(?m)^\d+ bytes from .* icmp_seq=(\d+) `)
	pingRTT   = regexp.MustCompile(`rtt min/avg/max/mdev = [0-9.]+/([0-9.]+)/`)
)

// pingAvg is the average round trip ping reported, or "-".
func pingAvg(out string) string {
	if m := pingRTT.FindStringSubmatch(out); m != nil {
		return m[1] + " ms"
	}
	return "-"
}

// pingLossPct pings to from ns count times with size bytes of payload
// and returns the share of those count probes never answered, in percent
// (100 when ping fails outright). Ping runs with a deadline (-w 5): it
// waits for every reply, however late, and sends another probe for each
// one still missing; the probes past count are not judged. With -W alone
// it stopped 2 RTTs after its last probe and counted a reply the
// scheduler delayed longer as lost; ping's own summary with -w counts the
// extra probes still in flight at exit as lost.
func pingLossPct(ns *netns.NS, to netip.Addr, size, count int) (float64, string) {
	out, _ := ns.Run("ping", "-n", "-c", strconv.Itoa(count), "-i", "0.1", "-w", "5", "-s", strconv.Itoa(size), to.String())
	answered := map[int]bool{}
	for _, m := range pingReply.FindAllStringSubmatch(out, -1) {
		if seq, err := strconv.Atoi(m[1]); err == nil && seq >= 1 && seq <= count {
			answered[seq] = true
		}
	}
	return 100 * float64(count-len(answered)) / float64(count), out
}

// TestFullSizeInnerPackets: a stock openvpn 2.6 client at its default
// tun-mtu 1500 sends inner packets up to 1500 bytes; the outer UDP
// datagram is then larger than the 1500-byte link and the client's kernel
// fragments it. Pings up to 1472 (IPv4) and 1452 (IPv6) bytes of payload
// and 1,472-byte UDP datagrams pass both ways (client to LAN host and LAN
// host to client), every byte checked, over IPv4 and over IPv6 outer
// transport. Before the fix, -s 1421 and larger lost 100 %: the first
// fragment reached ovfwd and was dropped as malformed.
//
// The datagrams go 20 at a time, each window once the last one arrived.
// Sent open loop (10,000 a second), they lost up to three quarters on a
// loaded machine: the scheduler held the client's openvpn or ovfwd's
// worker 0 back and the client's tun queue (tun0 TX dropped), its socket
// (UdpRcvbufErrors) or ovfwd's inject ring (kernel_data_refused)
// overflowed, which says nothing of fragments. BenchmarkFragmentPath
// measures rates.
func TestFullSizeInnerPackets(t *testing.T) {
	l, srv := setup(t, 2, vpne2e.ServerOptions{})
	remote6 := netip.AddrPortFrom(vpne2e.ServerAddr6, vpne2e.VPNPort).String()
	clients := []*vpne2e.Client{
		connect(t, l, 0, pki.Profile{}),
		connect(t, l, 1, pki.Profile{Remotes: []string{remote6}}),
	}
	for i, c := range clients {
		outer := []string{"udp4", "udp6"}[i]
		type probe struct {
			from, to *netns.NS
			dst      netip.Addr
			size     int
			what     string
		}
		var probes []probe
		for _, up := range []bool{true, false} {
			from, to, d4, d6, dir := c.NS, l.LAN, vpne2e.LANHost4, vpne2e.LANHost6, "client→LAN"
			if !up {
				from, to, d4, d6, dir = l.LAN, c.NS, c.V4, c.V6, "LAN→client"
			}
			for _, n := range []int{1420, 1421, 1472} {
				probes = append(probes, probe{from, to, d4, n, fmt.Sprintf("%s %s ping -s %d", outer, dir, n)})
			}
			for _, n := range []int{1400, 1452} {
				probes = append(probes, probe{from, to, d6, n, fmt.Sprintf("%s %s ping6 -s %d", outer, dir, n)})
			}
		}
		// Warm up neighbours and the tunnel with small pings first.
		pingLossPct(c.NS, vpne2e.LANHost4, 56, 2)
		pingLossPct(c.NS, vpne2e.LANHost6, 56, 2)
		for _, p := range probes {
			loss, out := pingLossPct(p.from, p.dst, p.size, 10)
			t.Logf("%-36s %5.1f %% loss, rtt avg %s", p.what, loss, pingAvg(out))
			if loss != 0 {
				t.Errorf("%s: %.0f %% loss, want none:\n%s", p.what, loss, out)
			}
		}
		for _, up := range []bool{true, false} {
			from, to, dst, dir := c.NS, l.LAN, vpne2e.LANHost4, "client→LAN"
			if !up {
				from, to, dst, dir = l.LAN, c.NS, c.V4, "LAN→client"
			}
			r, err := vpne2e.DatagramsWindowed(from, to, dst, 1472, 2000, 20)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s 2000 UDP datagrams of 1472 bytes: %v", outer, dir, r)
			if r.Corrupt != 0 || r.Loss() > 1 {
				t.Errorf("%s %s UDP datagrams of 1472 bytes: %v; want none corrupt and ≤ 1 %% lost", outer, dir, r)
			}
		}
	}
	logDrops(t, srv)
	s, err := status.Fetch(srv.Status, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s.Drops["malformed"] != 0 {
		t.Errorf("engine counted %d malformed drops, want 0 (fragments are not malformed)", s.Drops["malformed"])
	}
	// Every full-size datagram from the clients came through the kernel's
	// reassembly: 2 × (3 + 2) × 10 pings' worth and 2 × 2000 datagrams.
	t.Logf("engine: vpn_data_via_kernel %d, fragment %d; vpn kernel_data_refused %d",
		s.Engine["vpn_data_via_kernel"], s.Engine["fragment"], s.VPN.Drops["kernel_data_refused"])
	if s.Engine["vpn_data_via_kernel"] < 4000 {
		t.Errorf("engine counted %d VPN data packets through the kernel, want ≥ 4000", s.Engine["vpn_data_via_kernel"])
	}
}
