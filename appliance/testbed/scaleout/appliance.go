package scaleout

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

const ovfwdConfig = `# written by appliance/testbed/scaleout
[appliance]
mode = "router"
mss_clamp = 1300

[[port]]
name = "p0"
driver = "afxdp-copy"
ifname = "p0"
addresses = ["%s/24"]

[[port]]
name = "p1"
driver = "afxdp-copy"
ifname = "p1"
addresses = ["%s"]

[vpn]
enabled = true
port = %d
ca = %q
cert = %q
key = %q
tls_crypt = %q
pool_v4 = "%s"
push_routes = ["%s"]
keepalive_interval = "1s"
keepalive_timeout = "4s"
max_peers = %d
%s

[netlink]
routes = true

[export]
enabled = true
routes = ["%s"]

[metrics]
listen = ""

[status]
socket = %q

[log]
level = "info"
`

// StartOvfwd runs ovfwd on the appliance as its unit runs it and waits
// until it is ready.
func (l *Lab) StartOvfwd(bin string, a *Appliance) error {
	maxPeers, limits := 64, ""
	if l.MaxPeers > 0 {
		maxPeers = l.MaxPeers
	}
	if l.HandshakeRate > 0 {
		// Sized for a failover storm: every client of a dead peer
		// handshakes at once.
		limits = fmt.Sprintf("handshake_rate = %d\nmax_half_open = 1024\nmax_half_open_per_source = 1024\nhandshake_timeout = \"60s\"", l.HandshakeRate)
	}
	cfg := fmt.Sprintf(ovfwdConfig, a.Outside, a.Link, VPNPort,
		filepath.Join(l.PKI, pki.CACertFile), filepath.Join(l.PKI, pki.ServerCertFile), filepath.Join(l.PKI, pki.ServerKeyFile),
		filepath.Join(l.PKI, pki.TLSCryptFile), a.Pool, LANNet, maxPeers, limits, Anycast, a.Sock)
	path := filepath.Join(a.Dir, "ovfwd.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	// As packaging/ovfwd.service runs it: both trees laid out (again: the
	// state/ and run/ given to the unit's user, as systemd does before
	// each start), the process checked in /proc.
	for _, d := range []string{l.Dir, a.Dir} {
		if err := l.unit.Layout(d); err != nil {
			return err
		}
	}
	bin, err := l.unit.Executable(bin, l.Dir)
	if err != nil {
		return err
	}
	if a.ovfwd, err = l.start(a.NS, filepath.Join(a.Dir, "ovfwd.log"), l.unit.Argv(bin, "run", "-c", path)...); err != nil {
		return err
	}
	logf := l.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := l.unit.Report(a.ovfwd.cmd.Process.Pid, logf); err != nil {
		a.ovfwd.Kill()
		return fmt.Errorf("scaleout: %v\n%s", err, a.ovfwd.Tail(4000))
	}
	var st *status.Snapshot
	if !waitFor(30*time.Second, 50*time.Millisecond, func() bool {
		st, err = status.Fetch(a.Sock, time.Second)
		return err == nil && st.Ready || a.ovfwd.Exited()
	}) || a.ovfwd.Exited() {
		return fmt.Errorf("scaleout: ovfwd %s not ready (%v):\n%s", a.Name, err, a.ovfwd.Tail(4000))
	}
	return nil
}

// KillOvfwd ends ovfwd with SIGKILL: no withdrawal, no RESTART to clients.
func (a *Appliance) KillOvfwd() { a.ovfwd.Kill() }

// StopOvfwd ends ovfwd with SIGTERM.
func (a *Appliance) StopOvfwd() { a.ovfwd.Stop(syscall.SIGTERM, 5*time.Second) }

// OvfwdLog is ovfwd's log so far.
func (a *Appliance) OvfwdLog() string { return a.ovfwd.Tail(1 << 20) }

// Status fetches the appliance's status.
func (a *Appliance) Status() (*status.Snapshot, error) { return status.Fetch(a.Sock, 2*time.Second) }

// Owns reports whether addr is in the appliance's pool.
func (a *Appliance) Owns(addr netip.Addr) bool { return a.Pool.Contains(addr) }

// Client is a stock openvpn 2.6 client.
type Client struct {
	Index int
	Log   string
	lab   *Lab
	p     *Proc
}

// StartClient starts openvpn in client namespace i with the remotes in
// order; ping-restart comes from the server's push (4 s), and a remote
// that does not answer is left after 2 s (server-poll-timeout).
func (l *Lab) StartClient(i int, remotes ...*Appliance) (*Client, error) {
	var rs []string
	for _, a := range remotes {
		rs = append(rs, netip.AddrPortFrom(a.Outside, VPNPort).String())
	}
	prof, err := pki.ClientProfile(l.PKI, pki.Profile{Name: fmt.Sprintf("client%d", i), Remotes: rs,
		Extra: []string{"verb 3", "server-poll-timeout 2", "connect-retry 1 1", "hand-window 10"}})
	if err != nil {
		return nil, err
	}
	c := &Client{Index: i, Log: filepath.Join(l.Dir, fmt.Sprintf("client%d.log", i)), lab: l}
	c.p, err = l.start(l.Clients[i], c.Log, "openvpn", "--config", prof, "--log-append", c.Log)
	return c, err
}

// Addr is the client's tunnel address now (invalid when it has none).
func (c *Client) Addr() netip.Addr {
	out, err := c.lab.Clients[c.Index].Run("ip", "-4", "-o", "addr", "show", "dev", "tun0")
	if err != nil {
		return netip.Addr{}
	}
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "inet" {
			if p, err := netip.ParsePrefix(f[i+1]); err == nil {
				return p.Addr()
			}
		}
	}
	return netip.Addr{}
}

// Reachable reports whether the LAN host reaches the client's tunnel
// address now and which appliance's pool it is in.
func (l *Lab) Reachable(c *Client) (netip.Addr, bool) {
	a := c.Addr()
	if !a.IsValid() {
		return a, false
	}
	out, err := l.LAN.Run("ping", "-n", "-c", "1", "-W", "1", a.String())
	return a, err == nil && strings.Contains(out, " 0% packet loss")
}

// Tail is the end of the client's log.
func (c *Client) Tail() string { return tail(c.Log, 3000) }
