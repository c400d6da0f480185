package vpne2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// Site-to-site: ovfwd on site A is the OpenVPN client ([[vpn.client]]) of
// a server on site B, a stock openvpn 2.6 server with a client-config-dir
// iroute or an ovfwd server with [[vpn.iroute]]. Hosts on both sites talk
// through the uplink in both directions.
//
//	hostA h0 ─ a0 [ovfwd A] a1 ─ s1 [server] s0 ─ b0 hostB
//	198.18.150.0/24    198.18.151.0/24    198.18.153.0/24
//	2001:db8:150::/64                     2001:db8:153::/64
var (
	siteANet4 = netip.MustParsePrefix("198.18.150.0/24")
	siteANet6 = netip.MustParsePrefix("2001:db8:150::/64")
	siteBNet4 = netip.MustParsePrefix("198.18.153.0/24")
	siteBNet6 = netip.MustParsePrefix("2001:db8:153::/64")
	hostA4    = netip.MustParseAddr("198.18.150.2")
	hostA6    = netip.MustParseAddr("2001:db8:150::2")
	hostB4    = netip.MustParseAddr("198.18.153.2")
	hostB6    = netip.MustParseAddr("2001:db8:153::2")
	wanA      = netip.MustParseAddr("198.18.151.1")
	wanB      = netip.MustParseAddr("198.18.151.2")
	sitePool4 = netip.MustParsePrefix("198.18.152.0/24")
	sitePool6 = netip.MustParsePrefix("2001:db8:152::/64")
)

const siteCN = "site-a"

type siteLab struct {
	t                  *testing.T
	dir, pki           string
	hostA, appA, srv   *netns.NS
	hostB              *netns.NS
	procs              []*proc
	server             *proc // site B's openvpn or ovfwd
	siteA              *proc // site A's ovfwd
	bin                string
	statusA, statusSrv string
}

func newSiteLab(t *testing.T) *siteLab {
	nstest.RequireRoot(t)
	for _, tool := range []string{"openvpn", "ethtool", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make deps installs it)", tool)
		}
	}
	// Both daemons share one tree laid out as the unit's (startUnit):
	// config files readable, state/ (the PKI) and run/ (sockets) theirs.
	u, err := loadUnit()
	if err != nil {
		t.Fatal(err)
	}
	dir := unittest.TempDir(t, u)
	l := &siteLab{t: t, dir: dir, pki: filepath.Join(dir, "state", "pki"), bin: nstest.BuildOvfwd(t),
		statusA: filepath.Join(dir, "run", "a.sock"), statusSrv: filepath.Join(dir, "run", "srv.sock")}
	t.Cleanup(func() {
		for _, p := range l.procs {
			p.stop(syscall.SIGTERM, 5*time.Second)
		}
		if t.Failed() {
			for _, f := range []string{"ovfwd-a.log", "server.log"} {
				t.Logf("--- %s ---\n%s", f, logTail(filepath.Join(dir, f), 6000))
			}
		}
		for _, ns := range []*netns.NS{l.hostA, l.appA, l.srv, l.hostB} {
			if ns != nil {
				ns.Delete()
			}
		}
	})
	for _, p := range []**netns.NS{&l.hostA, &l.appA, &l.srv, &l.hostB} {
		if *p, err = netns.Create("s2s"); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []struct {
		a      *netns.NS
		ia     string
		b      *netns.NS
		ib     string
		addrsA []string
		addrsB []string
	}{
		{l.hostA, "h0", l.appA, "a0", []string{"198.18.150.2/24", "2001:db8:150::2/64"}, []string{"198.18.150.1/24", "2001:db8:150::1/64"}},
		{l.appA, "a1", l.srv, "s1", []string{wanA.String() + "/24"}, []string{wanB.String() + "/24"}},
		{l.srv, "s0", l.hostB, "b0", []string{"198.18.153.1/24", "2001:db8:153::1/64"}, []string{"198.18.153.2/24", "2001:db8:153::2/64"}},
	} {
		if err := netns.Veth(v.a, v.ia, v.b, v.ib); err != nil {
			t.Fatal(err)
		}
		// Default offloads everywhere, hosts and ovfwd's ports alike, as
		// an operator leaves them.
		for _, side := range []struct {
			ns    *netns.NS
			dev   string
			addrs []string
		}{{v.a, v.ia, v.addrsA}, {v.b, v.ib, v.addrsB}} {
			if err := PeerNAPI(side.ns, side.dev); err != nil {
				l.t.Fatal(err)
			}
			for _, a := range side.addrs {
				l.run(side.ns, "ip", "addr", "add", a, "dev", side.dev, "nodad")
			}
		}
	}
	l.run(l.hostA, "ip", "route", "add", "default", "via", "198.18.150.1")
	l.run(l.hostA, "ip", "-6", "route", "add", "default", "via", "2001:db8:150::1")
	l.run(l.hostB, "ip", "route", "add", "default", "via", "198.18.153.1")
	l.run(l.hostB, "ip", "-6", "route", "add", "default", "via", "2001:db8:153::1")
	if err := pki.Init(l.pki); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *siteLab) run(ns *netns.NS, args ...string) {
	l.t.Helper()
	if _, err := ns.Run(args...); err != nil {
		l.t.Fatal(err)
	}
}

func (l *siteLab) start(ns *netns.NS, log string, args ...string) *proc {
	l.t.Helper()
	p, err := start(ns, filepath.Join(l.dir, log), args...)
	if err != nil {
		l.t.Fatal(err)
	}
	l.procs = append(l.procs, p)
	return p
}

// startOvfwd runs ovfwd with conf as its unit runs it (startUnit).
func (l *siteLab) startOvfwd(ns *netns.NS, log, conf string) *proc {
	l.t.Helper()
	p, err := startUnit(ns, l.dir, filepath.Join(l.dir, log), nil, l.t.Logf, l.bin, "run", "-c", conf)
	if err != nil {
		l.t.Fatal(err)
	}
	l.procs = append(l.procs, p)
	return p
}

func (l *siteLab) writeFile(name, text string) string {
	l.t.Helper()
	path := filepath.Join(l.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return path
}

// startOpenVPNServer runs openvpn 2.6 on site B with the standard
// site-to-site setup: route + client-config-dir iroute for site A.
func (l *siteLab) startOpenVPNServer() {
	l.writeFile("ccd/"+siteCN, fmt.Sprintf("iroute %s 255.255.255.0\niroute-ipv6 %s\n", siteANet4.Addr(), siteANet6))
	conf := l.writeFile("openvpn-server.conf", strings.Join([]string{
		"dev tun", "proto udp", fmt.Sprintf("port %d", VPNPort), "topology subnet",
		fmt.Sprintf("server %s 255.255.255.0", sitePool4.Addr()),
		fmt.Sprintf("server-ipv6 %s", sitePool6),
		fmt.Sprintf("route %s 255.255.255.0", siteANet4.Addr()),
		fmt.Sprintf("route-ipv6 %s", siteANet6),
		"client-config-dir " + filepath.Join(l.dir, "ccd"),
		"ca " + filepath.Join(l.pki, pki.CACertFile),
		"cert " + filepath.Join(l.pki, pki.ServerCertFile),
		"key " + filepath.Join(l.pki, pki.ServerKeyFile),
		"dh none", "tls-crypt " + filepath.Join(l.pki, pki.TLSCryptFile),
		"data-ciphers AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305",
		"keepalive 5 30", "verb 3", "disable-dco",
		"explicit-exit-notify 1", // tell clients to reconnect when it stops
	}, "\n")+"\n")
	for _, k := range []string{"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"} {
		l.run(l.srv, "sysctl", "-qw", k)
	}
	l.server = l.start(l.srv, "server.log", "openvpn", "--config", conf)
	if err := waitLog(l.server, filepath.Join(l.dir, "server.log"), "Initialization Sequence Completed", 30*time.Second); err != nil {
		l.t.Fatal(err)
	}
}

// startOvfwdServer runs ovfwd as site B's server with an iroute for site A.
func (l *siteLab) startOvfwdServer() {
	conf := l.writeFile("srv.toml", WithFastPath(fmt.Sprintf(`
[[port]]
name = "wan"
driver = "afxdp-copy"
ifname = "s1"
addresses = ["%s/24"]

[[port]]
name = "lan"
driver = "afxdp-copy"
ifname = "s0"
addresses = ["198.18.153.1/24", "2001:db8:153::1/64"]

[vpn]
enabled = true
port = %d
ca = %q
cert = %q
key = %q
tls_crypt = %q
pool_v4 = "%s"
pool_v6 = "%s"
keepalive_interval = "5s"
keepalive_timeout = "30s"

[[vpn.iroute]]
common_name = %q
routes = ["%s", "%s"]

[metrics]
listen = ""

[status]
socket = %q
`, wanB, VPNPort, filepath.Join(l.pki, pki.CACertFile), filepath.Join(l.pki, pki.ServerCertFile),
		filepath.Join(l.pki, pki.ServerKeyFile), filepath.Join(l.pki, pki.TLSCryptFile), sitePool4, sitePool6,
		siteCN, siteANet4, siteANet6, l.statusSrv)))
	l.server = l.startOvfwd(l.srv, "server.log", conf)
	l.waitStatus(l.server, l.statusSrv, "server.log", func(s *status.Snapshot) bool { return s.VPN != nil })
}

// startSiteA runs ovfwd on site A with the uplink to site B.
func (l *siteLab) startSiteA() {
	cert, key, err := pki.ClientFiles(l.pki, siteCN)
	if err != nil {
		l.t.Fatal(err)
	}
	conf := l.writeFile("a.toml", WithFastPath(fmt.Sprintf(`
[[port]]
name = "lan"
driver = "afxdp-copy"
ifname = "a0"
addresses = ["198.18.150.1/24", "2001:db8:150::1/64"]

[[port]]
name = "wan"
driver = "afxdp-copy"
ifname = "a1"
addresses = ["%s/24"]

[[vpn.client]]
name = "site-b"
remote = "%s:%d"
ca = %q
cert = %q
key = %q
tls_crypt = %q
routes = ["%s", "%s"]

[metrics]
listen = ""

[status]
socket = %q
`, wanA, wanB, VPNPort, filepath.Join(l.pki, pki.CACertFile), cert, key, filepath.Join(l.pki, pki.TLSCryptFile),
		siteBNet4, siteBNet6, l.statusA)))
	l.siteA = l.startOvfwd(l.appA, "ovfwd-a.log", conf)
	l.waitStatus(l.siteA, l.statusA, "ovfwd-a.log", func(s *status.Snapshot) bool {
		return len(s.Uplinks) == 1 && s.Uplinks[0].State == "connected"
	})
}

func (l *siteLab) waitStatus(p *proc, sock, log string, ok func(*status.Snapshot) bool) {
	l.t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for i := 0; i < 400 && time.Now().Before(deadline); i++ {
		if p.Exited() {
			l.t.Fatalf("ovfwd exited (%v):\n%s", p.err, logTail(filepath.Join(l.dir, log), 4000))
		}
		if s, err := status.Fetch(sock, time.Second); err == nil && ok(s) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	l.t.Fatalf("%s: not ready in 40 s:\n%s", log, logTail(filepath.Join(l.dir, log), 4000))
}

func (l *siteLab) ping(from *netns.NS, to netip.Addr, extra ...string) {
	l.t.Helper()
	args := append([]string{"ping", "-c", "3", "-i", "0.2", "-W", "3"}, extra...)
	if out, err := from.Run(append(args, to.String())...); err != nil {
		l.t.Fatalf("ping %v %v: %v\n%s", to, extra, err, out)
	}
}

// exercise runs the traffic every variant must carry.
func (l *siteLab) exercise() {
	t := l.t
	for _, c := range []struct {
		from *netns.NS
		to   netip.Addr
	}{{l.hostA, hostB4}, {l.hostA, hostB6}, {l.hostB, hostA4}, {l.hostB, hostA6}} {
		l.ping(c.from, c.to)
	}
	// 1450-byte IPv4 echoes without DF exceed the uplink's 1420: ovfwd
	// fragments them into the tunnel one way, and the other way the server
	// delivers what fits the inner MTU; hosts reassemble.
	l.ping(l.hostA, hostB4, "-s", "1450", "-M", "dont")
	const n = 8 << 20
	for _, c := range []struct {
		src, dst *netns.NS
		to       netip.Addr
		what     string
	}{
		{l.hostA, l.hostB, hostB4, "A→B v4"}, {l.hostB, l.hostA, hostA4, "B→A v4"},
		{l.hostA, l.hostB, hostB6, "A→B v6"}, {l.hostB, l.hostA, hostA6, "B→A v6"},
	} {
		r, err := lab.TCPTransfer(context.Background(), c.src, c.dst, c.to, n, 60*time.Second)
		if err != nil || !r.OK(n) {
			t.Fatalf("%s: %d of %d bytes, checksums match %v, err %v", c.what, r.Bytes, n, r.Sent == r.Received, err)
		}
		t.Logf("%s: 8 MiB intact in %v (%.0f Mb/s)", c.what, r.Elapsed.Round(time.Millisecond), float64(8*n)/r.Elapsed.Seconds()/1e6)
	}
	s, err := status.Fetch(l.statusA, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	u := s.Uplinks[0]
	t.Logf("site A uplink: %s as %v, counters %v; engine drops %v", u.State, u.Addrs, u.Counters, nonZeroCounters(s.Drops))
	if u.Counters["tx_packets"] < 1000 || u.Counters["rx_packets"] < 1000 || u.Counters["tx_down"] != 0 || u.Counters["rx_spoofed"] != 0 {
		t.Errorf("uplink counters %v: want ≥ 1000 packets each way, none dropped while down or as spoofed", u.Counters)
	}
	if s.Routes.Uplink != 2 {
		t.Errorf("site A has %d uplink routes, want 2: %v", s.Routes.Uplink, s.Routes.Prefixes)
	}
}

func nonZeroCounters(c status.Counters) status.Counters {
	out := status.Counters{}
	for k, v := range c {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// TestSiteToSiteOpenVPNServer: the uplink against a stock openvpn 2.6
// server configured the usual way for a site (route + ccd iroute). When the
// server restarts, the uplink reconnects by itself and carries traffic
// again; what was routed to it meanwhile is counted, not leaked.
func TestSiteToSiteOpenVPNServer(t *testing.T) {
	l := newSiteLab(t)
	l.startOpenVPNServer()
	l.startSiteA()
	l.exercise()

	// Site B sends from an address outside its routes and the tunnel
	// subnet: site A's uplink drops it as spoofed.
	l.run(l.srv, "ip", "addr", "add", "198.18.99.1/32", "dev", "lo")
	_, _ = l.srv.Run("ping", "-c", "3", "-i", "0.2", "-W", "1", "-I", "198.18.99.1", hostA4.String())
	s, err := status.Fetch(l.statusA, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Uplinks[0].Counters["rx_spoofed"]; n != 3 {
		t.Errorf("rx_spoofed %d after 3 echoes from outside site B's networks, want 3", n)
	}

	l.server.stop(syscall.SIGTERM, 5*time.Second)
	// Traffic for site B while it is down stays on site A.
	_, _ = l.hostA.Run("ping", "-c", "3", "-i", "0.2", "-W", "1", hostB4.String())
	if err := os.Remove(filepath.Join(l.dir, "server.log")); err != nil {
		t.Fatal(err)
	}
	l.startOpenVPNServer()
	l.waitStatus(l.siteA, l.statusA, "ovfwd-a.log", func(s *status.Snapshot) bool {
		return len(s.Uplinks) == 1 && s.Uplinks[0].State == "connected"
	})
	l.ping(l.hostA, hostB4)
	l.ping(l.hostB, hostA6)
	if s, err = status.Fetch(l.statusA, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("after the server restart: %v", s.Uplinks[0].Counters)
	if s.Uplinks[0].Counters["tx_down"] == 0 {
		t.Errorf("pings routed to the uplink while its server was down were not counted as tx_down: %v", s.Uplinks[0].Counters)
	}
}

// TestSiteToSiteOvfwdServer: the uplink against an ovfwd server whose
// [[vpn.iroute]] routes site A's networks into the uplink's tunnel.
func TestSiteToSiteOvfwdServer(t *testing.T) {
	l := newSiteLab(t)
	l.startOvfwdServer()
	l.startSiteA()
	l.exercise()
	s, err := status.Fetch(l.statusSrv, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, p := range s.Routes.Prefixes {
		if (strings.HasPrefix(p, siteANet4.String()+" ") || strings.HasPrefix(p, siteANet6.String()+" ")) && strings.Contains(p, "tunnel peer") {
			found++
		}
	}
	if found != 2 || s.VPN == nil || len(s.VPN.Peers) != 1 || s.VPN.Peers[0].Name != siteCN {
		t.Fatalf("server: %d iroutes installed (want 2), peers %+v; routes %v", found, s.VPN, s.Routes.Prefixes)
	}
	// The site's routes leave with the site.
	l.siteA.stop(syscall.SIGTERM, 5*time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		s, err = status.Fetch(l.statusSrv, 2*time.Second)
		if err == nil && len(s.VPN.Peers) == 0 && s.Routes.Tunnel == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("after site A stopped: peers %v, tunnel routes %d (want none)", s.VPN.Peers, s.Routes.Tunnel)
}
