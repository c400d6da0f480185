package vpne2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// NATLab is the full-tunnel topology: openvpn clients reach an "internet"
// host through ovfwd's NAT, behind a router that has no route to the VPN
// pool, so nothing works unless ovfwd translates.
//
//	clients (198.18.150.x) ─ switch ─ p0 [ovfwd] p1 (198.18.151.254: the
//	outside address) ─ router (198.18.151.1 | 198.18.152.1) ─ inet (198.18.152.10)
type NATLab struct {
	Dir, PKI string                           // as Lab's
	Logf     func(format string, args ...any) // as Lab's
	App      *netns.NS
	Router   *netns.NS
	Inet     *netns.NS
	Switch   *netns.NS
	Clients  []*netns.NS

	nss   []*netns.NS
	procs []*proc
}

// NAT lab addresses.
var (
	NATClientNet = netip.MustParsePrefix("198.18.150.0/24")
	NATServer    = netip.MustParseAddr("198.18.150.254")
	NATOutside   = netip.MustParseAddr("198.18.151.254") // ovfwd p1: the NAT outside address
	NATRouterIn  = netip.MustParseAddr("198.18.151.1")
	NATRouterOut = netip.MustParseAddr("198.18.152.1")
	NATInet      = netip.MustParseAddr("198.18.152.10")
	NATInetNet   = netip.MustParsePrefix("198.18.152.0/24")
	NATPool4     = netip.MustParsePrefix("198.18.153.0/24")
	NATPool6     = netip.MustParsePrefix("2001:db8:153::/64")
)

// NewNATLab builds the namespaces for n clients, with queues RX/TX queues
// on ovfwd's two ports, and a PKI in dir, laid out as NewLab's.
func NewNATLab(tag, dir string, n, queues int) (l *NATLab, err error) {
	l = &NATLab{Dir: dir, PKI: filepath.Join(dir, "state", "pki")}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	mk := func() *netns.NS {
		if err != nil {
			return nil
		}
		var ns *netns.NS
		if ns, err = netns.Create(tag); err == nil {
			l.nss = append(l.nss, ns)
		}
		return ns
	}
	l.App, l.Router, l.Inet, l.Switch = mk(), mk(), mk(), mk()
	for range n {
		l.Clients = append(l.Clients, mk())
	}
	if err != nil {
		return l, err
	}
	q := fmt.Sprint(queues)
	veth := func(a *netns.NS, ifA string, b *netns.NS, ifB string) error {
		if _, err := a.Run("ip", "link", "add", ifA, "numtxqueues", q, "numrxqueues", q, "type", "veth",
			"peer", "name", ifB, "numtxqueues", q, "numrxqueues", q, "netns", b.Name); err != nil {
			return err
		}
		if _, err := a.Run("ip", "link", "set", ifA, "up"); err != nil {
			return err
		}
		_, err := b.Run("ip", "link", "set", ifB, "up")
		return err
	}
	type step struct {
		ns   *netns.NS
		args []string
	}
	ss := []step{{l.Switch, []string{"ip", "link", "add", "br0", "type", "bridge"}}, {l.Switch, []string{"ip", "link", "set", "br0", "up"}}}
	for _, s := range ss {
		if _, err := s.ns.Run(s.args...); err != nil {
			return l, err
		}
	}
	if err := veth(l.App, "p0", l.Switch, "sa"); err != nil {
		return l, err
	}
	if err := veth(l.App, "p1", l.Router, "r0"); err != nil {
		return l, err
	}
	if err := netns.Veth(l.Router, "r1", l.Inet, "i0"); err != nil {
		return l, err
	}
	ss = []step{{l.Switch, []string{"ip", "link", "set", "sa", "master", "br0"}}}
	for i, c := range l.Clients {
		port := fmt.Sprintf("s%d", i)
		if err := veth(c, "c0", l.Switch, port); err != nil {
			return l, err
		}
		a := NATClientNet.Addr().As4()
		a[3] = byte(1 + i)
		ss = append(ss,
			step{l.Switch, []string{"ip", "link", "set", port, "master", "br0"}},
			step{c, []string{"ip", "addr", "add", netip.AddrFrom4(a).String() + "/24", "dev", "c0"}},
			step{c, []string{"ip", "route", "add", "default", "via", NATServer.String()}})
	}
	ss = append(ss,
		step{l.App, []string{"ip", "addr", "add", NATServer.String() + "/24", "dev", "p0"}},
		step{l.App, []string{"ip", "addr", "add", NATOutside.String() + "/24", "dev", "p1"}},
		step{l.Router, []string{"ip", "addr", "add", NATRouterIn.String() + "/24", "dev", "r0"}},
		step{l.Router, []string{"ip", "addr", "add", NATRouterOut.String() + "/24", "dev", "r1"}},
		step{l.Router, []string{"sysctl", "-qw", "net.ipv4.ip_forward=1"}},
		step{l.Inet, []string{"ip", "addr", "add", NATInet.String() + "/24", "dev", "i0"}},
		step{l.Inet, []string{"ip", "route", "add", "default", "via", NATRouterOut.String()}},
		step{l.App, []string{"sysctl", "-qw", "net.ipv4.ip_forward=0"}},
	)
	for _, s := range ss {
		if _, err := s.ns.Run(s.args...); err != nil {
			return l, err
		}
	}
	if err := PeerNAPI(l.Switch, "sa"); err != nil {
		return l, err
	}
	if err := PeerNAPI(l.Router, "r0"); err != nil {
		return l, err
	}
	u, err := loadUnit()
	if err != nil {
		return l, err
	}
	if err := u.Layout(dir); err != nil {
		return l, err
	}
	if err := pki.Init(l.PKI); err != nil {
		return l, err
	}
	return l, nil
}

// Close stops what the lab started and removes its namespaces.
func (l *NATLab) Close() {
	for _, p := range l.procs {
		p.stop(syscall.SIGTERM, 3*time.Second)
	}
	l.procs = nil
	for i := len(l.nss) - 1; i >= 0; i-- {
		l.nss[i].Delete()
	}
	l.nss = nil
}

const natConfig = `# written by appliance/testbed/vpne2e (NAT lab)
[appliance]
mode = "router"
mss_clamp = 1300
%s

[[port]]
name = "p0"
driver = "afxdp-copy"
ifname = "p0"
queues = %d
addresses = ["%s/24"]

[[port]]
name = "p1"
driver = "afxdp-copy"
ifname = "p1"
queues = %d
addresses = ["%s/24"]

[[route]]
prefix = "%s"
via = "%s"

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
redirect_gateway = ["ipv4"]

[[nat]]
name = "vpn"
sources = ["%s"]
port = "p1"

[nat_options]
%s

[metrics]
listen = ""

[status]
socket = %q

[log]
level = "info"
`

// StartOvfwd runs ovfwd with the NAT rule for the pool; natOptions are
// [nat_options] lines, appliance extra [appliance] lines.
func (l *NATLab) StartOvfwd(bin string, queues int, appliance, natOptions string) (*Server, error) {
	sock := filepath.Join(l.Dir, "run", "ovfwd.sock")
	cfg := fmt.Sprintf(natConfig, appliance, queues, NATServer, queues, NATOutside, NATInetNet, NATRouterIn, VPNPort,
		filepath.Join(l.PKI, pki.CACertFile), filepath.Join(l.PKI, pki.ServerCertFile), filepath.Join(l.PKI, pki.ServerKeyFile),
		filepath.Join(l.PKI, pki.TLSCryptFile), NATPool4, NATPool6, NATPool4, natOptions, sock)
	cfgPath := filepath.Join(l.Dir, "ovfwd.toml")
	if err := os.WriteFile(cfgPath, []byte(WithFastPath(cfg)), 0o644); err != nil {
		return nil, err
	}
	s := &Server{Name: "ovfwd", Log: filepath.Join(l.Dir, "ovfwd.log"), Status: sock, stopSig: syscall.SIGTERM}
	var err error
	if s.p, err = startUnit(l.App, l.Dir, s.Log, nil, l.Logf, bin, "run", "-c", cfgPath); err != nil {
		return nil, err
	}
	l.procs = append(l.procs, s.p)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < 600 && time.Now().Before(deadline); i++ {
		if s.p.Exited() {
			return nil, fmt.Errorf("vpne2e: ovfwd exited (%v):\n%s", s.p.err, logTail(s.Log, 4000))
		}
		if st, err := status.Fetch(sock, time.Second); err == nil && st.VPN != nil && st.NAT != nil {
			return s, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("vpne2e: ovfwd with NAT not up in 30 s:\n%s", logTail(s.Log, 4000))
}

// StartNATClient runs a stock openvpn client i and waits for its pool
// address. Its profile has no routes of its own: the server pushes
// "redirect-gateway def1" (redirect_gateway = ["ipv4"]), which puts the
// client in full-tunnel mode (0/1 and 128/1 into tun0, a host route to
// the server via the client's original default gateway).
func (l *NATLab) StartNATClient(i int) (c *Client, err error) {
	remote := netip.AddrPortFrom(NATServer, VPNPort).String()
	prof, err := pki.ClientProfile(l.PKI, pki.Profile{Name: fmt.Sprintf("client%d", i), Remotes: []string{remote},
		Extra: []string{"verb 4"}})
	if err != nil {
		return nil, err
	}
	c = &Client{Index: i, NS: l.Clients[i], Profile: prof, Log: filepath.Join(l.Dir, fmt.Sprintf("client%d.log", i))}
	if c.p, err = start(c.NS, c.Log, "openvpn", "--config", prof, "--log-append", c.Log); err != nil {
		return nil, err
	}
	l.procs = append(l.procs, c.p)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c.p.Exited() {
			return nil, fmt.Errorf("vpne2e: client %d exited (%v):\n%s", i, c.p.err, logTail(c.Log, 4000))
		}
		if strings.Contains(c.LogText(), initDone) {
			if v4, _, err := c.NS.GlobalAddrs("tun0"); err == nil && v4.IsValid() {
				c.V4 = v4
				return c, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("vpne2e: client %d not up in 30 s:\n%s", i, logTail(c.Log, 4000))
}
