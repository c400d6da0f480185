package vpne2e

import (
	"cmp"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// ServerOptions are what both servers are configured with.
type ServerOptions struct {
	// Ciphers the server offers, by OpenVPN name; empty offers
	// AES-256-GCM, AES-128-GCM and CHACHA20-POLY1305.
	Ciphers []string
	// TLSAuth wraps the control channel with tls-auth (key direction 0)
	// instead of tls-crypt. Clients need pki.Profile.TLSAuth too.
	TLSAuth bool
	// NeighbourReachable sets ovfwd's neighbour_reachable (0: its default).
	NeighbourReachable time.Duration
	// XDPMode sets both ports' [port.afxdp] xdp_mode ("": its default,
	// native then generic).
	XDPMode string
	// VPN is extra TOML lines for ovfwd's [vpn] table, Tail extra tables
	// after it (e.g. [[vpn.ccd]]).
	VPN, Tail string
	// Status is extra TOML lines for ovfwd's [status] table; OpenVPN extra
	// lines for the openvpn server's config.
	Status  string
	OpenVPN []string
	// MaxPeers is ovfwd's max_peers (0: 64).
	MaxPeers int
	// TLSCryptV2 is a tls-crypt-v2 server key file for ovfwd (instead of
	// tls-crypt); clients need pki.Profile.TLSCryptV2.
	TLSCryptV2 string
	// Pin puts the server on CPU (taskset, and ovfwd's workers there);
	// otherwise openvpn floats and ovfwd's workers take the daemon's
	// default CPUs.
	Pin bool
	CPU int
	// MetricsSocket, when set, serves ovfwd's metrics on that unix socket.
	MetricsSocket string
}

// pinned prefixes args with taskset when o pins the server.
func (o ServerOptions) pinned(args ...string) []string {
	if !o.Pin {
		return args
	}
	return append([]string{"taskset", "-c", strconv.Itoa(o.CPU)}, args...)
}

func (o ServerOptions) ciphers() []string {
	if len(o.Ciphers) == 0 {
		return []string{"AES-256-GCM", "AES-128-GCM", "CHACHA20-POLY1305"}
	}
	return o.Ciphers
}

// Server is a running VPN server in the appliance namespace.
type Server struct {
	Name    string // "ovfwd" or "openvpn"
	Config  string // its config file
	Log     string // its log file
	Status  string // ovfwd's status socket; "" for openvpn
	p       *proc
	stopSig syscall.Signal
}

// PID is the server process's id.
func (s *Server) PID() int { return s.p.PID() }

// CPUSeconds is the server's user+system CPU time so far.
func (s *Server) CPUSeconds() (float64, error) { return CPUSeconds(s.p.PID()) }

// Stop ends the server (SIGTERM, SIGKILL after 5 s). Safe to call twice.
func (s *Server) Stop() { s.p.stop(s.stopSig, 5*time.Second) }

// ovfwdConfig is the appliance: router mode, both ports on AF_XDP (copy
// mode: veth has no zero-copy), the VPN server with the lab's pools. It
// clamps no MSS, as the openvpn server is told nothing about it either: in
// both set-ups the stock client's default mssfix alone sizes TCP segments
// to the tunnel, and benches compare like with like.
const ovfwdConfig = `# written by appliance/testbed/vpne2e
[appliance]
mode = "router"
%s

[[port]]
name = "p0"
driver = "afxdp-copy"
ifname = "p0"
addresses = ["%s/24", "%s/64"]

[[port]]
name = "p1"
driver = "afxdp-copy"
ifname = "p1"
addresses = ["%s/24", "%s/64"]

[vpn]
enabled = true
port = %d
ca = %q
cert = %q
key = %q
%s
pool_v4 = "%s"
pool_v6 = "%s"
push_routes = ["%s", "%s"]
ciphers = [%s]
keepalive_interval = "5s"
keepalive_timeout = "30s"
max_peers = %d
%s
%s

[metrics]
listen = ""

[status]
socket = %q
%s

[log]
level = "info"
`

// StartOvfwd runs `bin run -c FILE` in the appliance namespace as the
// package's unit runs it (startUnit) and waits until its VPN server is up.
func (l *Lab) StartOvfwd(bin string, o ServerOptions) (*Server, error) {
	wrap := fmt.Sprintf("tls_crypt = %q", filepath.Join(l.PKI, pki.TLSCryptFile))
	if o.TLSAuth {
		wrap = fmt.Sprintf("tls_auth = %q\nkey_direction = 0", filepath.Join(l.PKI, pki.TLSCryptFile))
	}
	if o.TLSCryptV2 != "" {
		wrap = fmt.Sprintf("tls_crypt_v2 = %q", o.TLSCryptV2)
	}
	var quoted []string
	for _, c := range o.ciphers() {
		quoted = append(quoted, fmt.Sprintf("%q", c))
	}
	sock := filepath.Join(l.Dir, "run", "ovfwd.sock")
	var appliance string
	if o.NeighbourReachable > 0 {
		appliance = fmt.Sprintf("neighbour_reachable = %q\n", o.NeighbourReachable.String())
	}
	if o.Pin {
		appliance += fmt.Sprintf("workers = [%d]\n", o.CPU)
	}
	cfg := fmt.Sprintf(ovfwdConfig, appliance, ServerAddr, ServerAddr6, LANGW4, LANGW6, VPNPort,
		filepath.Join(l.PKI, pki.CACertFile), filepath.Join(l.PKI, pki.ServerCertFile), filepath.Join(l.PKI, pki.ServerKeyFile),
		wrap, Pool4, Pool6, LANNet4, LANNet6, strings.Join(quoted, ", "), cmp.Or(o.MaxPeers, 64), o.VPN, o.Tail, sock, o.Status)
	if o.XDPMode != "" {
		cfg = strings.ReplaceAll(cfg, "driver = \"afxdp-copy\"\n", fmt.Sprintf("driver = \"afxdp-copy\"\nafxdp.xdp_mode = %q\n", o.XDPMode))
	}
	if o.MetricsSocket != "" {
		cfg = strings.Replace(cfg, "[metrics]\nlisten = \"\"\n", fmt.Sprintf("[metrics]\nlisten = \"\"\nsocket = %q\n", o.MetricsSocket), 1)
	}
	cfg = WithFastPath(cfg)
	cfgPath := filepath.Join(l.Dir, "ovfwd.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := l.SetKernelForwarding(false); err != nil {
		return nil, err
	}
	s := &Server{Name: "ovfwd", Config: cfgPath, Log: filepath.Join(l.Dir, "ovfwd.log"), Status: sock, stopSig: syscall.SIGTERM}
	var err error
	if s.p, err = startUnit(l.App, l.Dir, s.Log, o.pinned(), l.Logf, bin, "run", "-c", cfgPath); err != nil {
		return nil, err
	}
	l.procs = append(l.procs, s.p)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < 600 && time.Now().Before(deadline); i++ {
		if s.p.Exited() {
			return nil, fmt.Errorf("vpne2e: ovfwd exited (%v):\n%s", s.p.err, logTail(s.Log, 4000))
		}
		if st, err := status.Fetch(sock, time.Second); err == nil && st.VPN != nil {
			return s, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("vpne2e: ovfwd VPN not up in 30 s:\n%s", logTail(s.Log, 4000))
}

// StartOpenVPN runs an openvpn 2.6 server in the appliance namespace with
// the same PKI, control-channel wrapping, ciphers, pools and pushed
// routes, no server-side MSS clamp (as ovfwd), the nice of ovfwd's
// workers, kernel forwarding on, and waits until it is up.
func (l *Lab) StartOpenVPN(o ServerOptions) (*Server, error) {
	wrap := "tls-crypt " + filepath.Join(l.PKI, pki.TLSCryptFile)
	if o.TLSAuth {
		wrap = "tls-auth " + filepath.Join(l.PKI, pki.TLSCryptFile) + " 0"
	}
	mask := netip.MustParseAddr("255.255.255.0") // Pool4 is a /24
	lines := []string{
		"dev tun", "proto udp", fmt.Sprintf("port %d", VPNPort), "topology subnet",
		fmt.Sprintf("server %s %s", Pool4.Addr(), mask),
		fmt.Sprintf("server-ipv6 %s", Pool6),
		fmt.Sprintf("push \"route %s %s\"", LANNet4.Addr(), mask),
		fmt.Sprintf("push \"route-ipv6 %s\"", LANNet6),
		"ca " + filepath.Join(l.PKI, pki.CACertFile),
		"cert " + filepath.Join(l.PKI, pki.ServerCertFile),
		"key " + filepath.Join(l.PKI, pki.ServerKeyFile),
		"dh none", wrap,
		"data-ciphers " + strings.Join(o.ciphers(), ":"),
		"keepalive 5 30", "verb 3",
		"disable-dco", // no ovpn-dco module here; say so rather than probe
		// The priority ovfwd's workers give themselves: its data path and
		// openvpn's (one thread) compete with the kernel's threads alike.
		fmt.Sprintf("nice %d", runner.WorkerNice),
		// No MSS clamp on the server, as on ovfwd (ovfwdConfig): the
		// client's own default mssfix sizes the segments for both.
		"mssfix 0",
	}
	lines = append(lines, o.OpenVPN...)
	cfgPath := filepath.Join(l.Dir, "openvpn-server.conf")
	if err := os.WriteFile(cfgPath, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := l.SetKernelForwarding(true); err != nil {
		return nil, err
	}
	s := &Server{Name: "openvpn", Log: filepath.Join(l.Dir, "openvpn-server.log"), stopSig: syscall.SIGTERM}
	_ = os.Remove(s.Log)
	var err error
	if s.p, err = start(l.App, s.Log, o.pinned("openvpn", "--config", cfgPath)...); err != nil {
		return nil, err
	}
	l.procs = append(l.procs, s.p)
	if err := waitLog(s.p, s.Log, "Initialization Sequence Completed", 30*time.Second); err != nil {
		s.Stop()
		return nil, fmt.Errorf("vpne2e: openvpn server: %w", err)
	}
	return s, nil
}

// Signal sends sig to the server process (SIGHUP: reload).
func (s *Server) Signal(sig syscall.Signal) error { return s.p.cmd.Process.Signal(sig) }

// waitLog waits until the log holds want, failing early if p exits.
func waitLog(p *proc, log, want string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for i := 0; i < 10000 && time.Now().Before(deadline); i++ {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), want) {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("exited (%v) before %q:\n%s", p.err, want, logTail(log, 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no %q in %v:\n%s", want, d, logTail(log, 4000))
}

var keyEstablished = regexp.MustCompile(`key (\d+) established`)

// KeyIDs lists the key_ids ovfwd logged as established, in order.
func (s *Server) KeyIDs() []int {
	b, _ := os.ReadFile(s.Log)
	var ids []int
	for _, m := range keyEstablished.FindAllStringSubmatch(string(b), -1) {
		id, _ := strconv.Atoi(m[1])
		ids = append(ids, id)
	}
	return ids
}
