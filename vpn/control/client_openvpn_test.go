package control_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// startOpenVPNServer runs a stock openvpn 2.6 server (tls-crypt,
// AES-256-GCM, subnet topology) in ns with the PKI in dir and returns its
// log reader. The process is killed by PID at cleanup.
func startOpenVPNServer(t *testing.T, ns *netns.NS, dir string, extra ...string) func() string {
	t.Helper()
	conf := strings.Join(append([]string{
		"dev tun", "proto udp", "port 1194", "topology subnet",
		"server 198.18.73.0 255.255.255.0", "server-ipv6 2001:db8:73::/64",
		"ca " + filepath.Join(dir, pki.CACertFile), "cert " + filepath.Join(dir, pki.ServerCertFile),
		"key " + filepath.Join(dir, pki.ServerKeyFile), "tls-crypt " + filepath.Join(dir, pki.TLSCryptFile),
		"dh none", "data-ciphers AES-256-GCM", "keepalive 1 10", "explicit-exit-notify 1",
		"verb 3", "push \"route 198.18.74.0 255.255.255.0\"",
	}, extra...), "\n") + "\n"
	confPath := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "server.log")
	if _, err := ns.Start(nil, nil, openvpnBin, "--config", confPath, "--log", logPath); err != nil {
		t.Fatal(err)
	}
	readLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("openvpn server log:\n%s", readLog())
		}
	})
	if !waitFor(10*time.Second, func() bool { return strings.Contains(readLog(), "Initialization Sequence Completed") }) {
		t.Fatal("openvpn server did not start")
	}
	return readLog
}

// TestClientOpenVPNServer connects the ovfwd client to a stock openvpn 2.6
// server in a namespace pair: it must get the pushed addresses, and an
// ICMP echo to the server's tunnel address (answered by the server's
// kernel through tun0) must come back decrypted, also after the server
// renegotiated.
func TestClientOpenVPNServer(t *testing.T) {
	nstest.RequireRoot(t)
	if _, err := exec.LookPath(openvpnBin); err != nil {
		t.Fatalf("%s not installed", openvpnBin)
	}
	srvNS := nstest.New(t, "h15os")
	cliNS := nstest.New(t, "h15oc")
	nstest.Link(t, srvNS, "h15os0", cliNS, "h15oc0")
	nstest.Run(t, srvNS, "ip", "addr", "add", "198.18.75.1/24", "dev", "h15os0")
	nstest.Run(t, cliNS, "ip", "addr", "add", "198.18.75.2/24", "dev", "h15oc0")
	dir := newPKI(t)
	serverLog := startOpenVPNServer(t, srvNS, dir, "reneg-sec 4")
	cfg := clientProfile(t, dir, "erin", "198.18.75.1:1194")
	cfg.Logf = newSyncLog(t).logf
	var c *control.Client
	if err := cliNS.Do(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var err error
		c, err = control.Dial(ctx, cfg) // the socket belongs to cliNS
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.Pushed()
	if p.IPv4 != netip.MustParsePrefix("198.18.73.2/24") || p.Gateway4 != netip.MustParseAddr("198.18.73.1") ||
		p.IPv6.Addr() != netip.MustParseAddr("2001:db8:73::1000") {
		t.Errorf("pushed %v gw %v %v", p.IPv4, p.Gateway4, p.IPv6)
	}
	if p.Cipher != vpn.AES256GCM || !p.EKM {
		t.Errorf("pushed cipher %v ekm %v", p.Cipher, p.EKM)
	}
	if len(p.Routes) != 1 || p.Routes[0] != netip.MustParsePrefix("198.18.74.0/24") {
		t.Errorf("pushed routes %v", p.Routes)
	}
	for seq := uint16(1); seq <= 3; seq++ {
		ping(t, c, p.Gateway4, seq)
	}
	if !waitFor(15*time.Second, func() bool { return c.Stats().Renegs >= 1 }) {
		t.Fatalf("no renegotiation with the server's reneg-sec 4: %+v", c.Stats())
	}
	time.Sleep(500 * time.Millisecond)
	ping(t, c, p.Gateway4, 4)
	if c.Stats().RxBad != 0 {
		t.Errorf("client failed to open %d server packets", c.Stats().RxBad)
	}
	if !strings.Contains(serverLog(), "Peer Connection Initiated") {
		t.Error("server log lacks the peer connection")
	}
}
