package vpne2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// TestOffloadsOnLANHost: the LAN host (and the client's outside veth)
// keep the kernel's default offloads, as in every Lab, as a container or a VM bridge does:
// TCP and UDP they send leave their veth with an unfinished checksum (the
// pseudo-header sum only, CHECKSUM_PARTIAL). ovfwd completes it before it
// forwards and encrypts them, so a stock openvpn client accepts them:
// checksummed TCP transfers both ways over IPv4 and IPv6 inside the
// tunnel, and UDP datagrams from the LAN host, byte for byte — with the
// steering program in native and in generic XDP. Before, ping worked and
// TCP never connected.
//
// In generic XDP the LAN host's segmentation offload is turned off too
// (checksum offload stays on): a generic-mode program gets the peer's
// 64 KiB GSO super-packets whole, which no AF_XDP frame holds, and the
// kernel drops them (kernel_rx_dropped). Native XDP on a veth turns the
// peer's TSO off by itself (veth_xdp_set).
func TestOffloadsOnLANHost(t *testing.T) {
	for _, mode := range []string{"native", "generic"} {
		t.Run(mode, func(t *testing.T) {
			l, srv := setup(t, 1, vpne2e.ServerOptions{XDPMode: mode})
			if mode == "generic" {
				if _, err := l.LAN.Run("ethtool", "-K", "lan0", "tso", "off", "gso", "off"); err != nil {
					t.Fatal(err)
				}
			}
			c := connect(t, l, 0, pki.Profile{})
			t.Logf("lan0: %s", offloadState(l.LAN, "lan0"))
			const n = 4 << 20
			failed := 0
			for _, fam := range []struct{ lan, client netip.Addr }{{vpne2e.LANHost4, c.V4}, {vpne2e.LANHost6, c.V6}} {
				for _, up := range []bool{true, false} {
					src, dst, to, dir := c.NS, l.LAN, fam.lan, "client→LAN"
					if !up {
						src, dst, to, dir = l.LAN, c.NS, fam.client, "LAN→client"
					}
					r, err := lab.TCPTransfer(context.Background(), src, dst, to, n, 30*time.Second)
					ok := err == nil && r.OK(n)
					t.Logf("TCP %s to %-20s connected and intact: %v (%d of %d bytes, %v, err %v)", dir, to, ok, r.Bytes, n, r.Elapsed.Round(time.Millisecond), err)
					if !ok {
						failed++
					}
				}
			}
			if failed > 0 {
				t.Errorf("%d of 4 TCP transfers failed with offloads on", failed)
			}
			r, err := vpne2e.DatagramsWindowed(l.LAN, c.NS, c.V4, 1000, 1000, 10)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("UDP LAN→client 1000 datagrams of 1000 bytes: %v", r)
			if r.Corrupt != 0 || r.Loss() > 1 {
				t.Errorf("UDP LAN→client: %v; want none corrupt and ≤ 1 %% lost", r)
			}
			logDrops(t, srv)
			s, err := status.Fetch(srv.Status, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("engine csum_partial %d", s.Engine["csum_partial"])
			if s.Engine["csum_partial"] == 0 {
				t.Error("engine counted no csum_partial packets though the LAN host offloads its checksums")
			}
		})
	}
}

// offloadState is what ethtool says of ifname's checksum and
// segmentation offloads.
func offloadState(ns *netns.NS, ifname string) string {
	out, err := ns.Run("ethtool", "-k", ifname)
	if err != nil {
		return err.Error()
	}
	var s string
	for _, k := range []string{"tx-checksumming", "tcp-segmentation-offload", "generic-segmentation-offload"} {
		for _, line := range splitLines(out) {
			if len(line) > len(k) && line[:len(k)] == k {
				s += fmt.Sprintf("%s; ", line)
			}
		}
	}
	return s
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
