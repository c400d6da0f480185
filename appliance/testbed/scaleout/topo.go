package scaleout

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// Address plan (198.18.0.0/15 only).
var (
	OutsideNet = netip.MustParsePrefix("198.18.180.0/24") // clients and both appliances' p0
	LANNet     = netip.MustParsePrefix("198.18.182.0/24")
	LANHost    = netip.MustParseAddr("198.18.182.1")
	LANGW      = netip.MustParseAddr("198.18.182.254")
	// Anycast is announced by both appliances' BIRD while their ovfwd is
	// ready: the upstream installs it as one ECMP route.
	Anycast = netip.MustParsePrefix("198.18.186.0/24")
)

// VPNPort is both appliances' UDP port.
const VPNPort = 1194

// Appliance is one ovfwd box: its namespace, addresses and pool.
type Appliance struct {
	Name    string // "a" or "b"
	NS      *netns.NS
	Outside netip.Addr   // p0, what clients dial
	Link    netip.Prefix // p1's address on the link to the upstream router
	Peer    netip.Addr   // the upstream router's end of that link
	Pool    netip.Prefix
	AS      int
	Dir     string
	Sock    string // status socket
	ovfwd   *Proc
	bird    *Proc
}

// Lab is the whole topology.
type Lab struct {
	Dir string // laid out as the unit's (unit.Layout), as is each Appliance.Dir
	PKI string // Dir/state/pki, shared by both appliances
	// Logf, if set, gets once per process what ovfwd runs with (its
	// unit's user, capabilities and limits), e.g. testing.T.Logf.
	Logf    func(format string, args ...any)
	Up      *netns.NS // upstream router
	LAN     *netns.NS
	Switch  *netns.NS
	Apps    [2]*Appliance
	Clients []*netns.NS
	// MaxPeers and HandshakeRate size both appliances' VPN servers
	// (defaults 64 and ovfwd's default).
	MaxPeers, HandshakeRate int
	// BulkRoutes > 0 gives the upstream a disabled static protocol "bulk"
	// with that many routes, announced to appliance a when enabled.
	BulkRoutes int
	upBird     *Proc
	unit       *unit.Unit
	nss        []*netns.NS
	procs      []*Proc
}

// UpstreamAS is the upstream router's AS.
const UpstreamAS = 65000

// NewLab builds the namespaces for n clients and a PKI under dir, whose
// parents must let the unit's user through (unit.MkdirTemp).
func NewLab(dir string, n int) (l *Lab, err error) {
	l = &Lab{Dir: dir, PKI: filepath.Join(dir, "state", "pki")}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	mk := func() (*netns.NS, error) {
		ns, err := netns.Create("so")
		if err == nil {
			l.nss = append(l.nss, ns)
		}
		return ns, err
	}
	for _, p := range []**netns.NS{&l.Up, &l.LAN, &l.Switch} {
		if *p, err = mk(); err != nil {
			return l, err
		}
	}
	run := func(ns *netns.NS, args ...string) {
		if err == nil {
			_, err = ns.Run(args...)
		}
	}
	run(l.Switch, "ip", "link", "add", "br0", "type", "bridge")
	run(l.Switch, "ip", "link", "set", "br0", "up")
	for i, name := range []string{"a", "b"} {
		a := &Appliance{Name: name, AS: 65001, Dir: filepath.Join(dir, name),
			Outside: netip.AddrFrom4([4]byte{198, 18, 180, byte(251 + i)}),
			Link:    netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 181, byte(4*i + 2)}), 30),
			Peer:    netip.AddrFrom4([4]byte{198, 18, 181, byte(4*i + 1)}),
			Pool:    netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(176 + 12*i), 0}), 22), // .176/22, .188/22
		}
		a.Sock = filepath.Join(a.Dir, "run", "ovfwd.sock")
		if err := os.MkdirAll(a.Dir, 0o755); err != nil {
			return l, err
		}
		if a.NS, err = mk(); err != nil {
			return l, err
		}
		l.Apps[i] = a
		if err = netns.Veth(a.NS, "p0", l.Switch, "s"+name); err != nil {
			return l, err
		}
		run(l.Switch, "ip", "link", "set", "s"+name, "master", "br0")
		if err = netns.Veth(a.NS, "p1", l.Up, "u"+name); err != nil {
			return l, err
		}
		run(a.NS, "ip", "addr", "add", a.Outside.String()+"/24", "dev", "p0")
		run(a.NS, "ip", "addr", "add", a.Link.String(), "dev", "p1")
		run(l.Up, "ip", "addr", "add", netip.PrefixFrom(a.Peer, 30).String(), "dev", "u"+name)
	}
	if err = netns.Veth(l.Up, "ul", l.LAN, "l0"); err != nil {
		return l, err
	}
	run(l.Up, "ip", "addr", "add", LANGW.String()+"/24", "dev", "ul")
	run(l.Up, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	// ECMP by flow (L4 hash), as routers do.
	run(l.Up, "sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1")
	run(l.LAN, "ip", "addr", "add", LANHost.String()+"/24", "dev", "l0")
	run(l.LAN, "ip", "route", "add", "default", "via", LANGW.String())
	for i := 0; i < n && err == nil; i++ {
		var c *netns.NS
		if c, err = mk(); err != nil {
			return l, err
		}
		l.Clients = append(l.Clients, c)
		port := fmt.Sprintf("c%d", i)
		if err = netns.Veth(c, "c0", l.Switch, port); err != nil {
			return l, err
		}
		run(l.Switch, "ip", "link", "set", port, "master", "br0")
		run(c, "ip", "addr", "add", ClientAddr(i).String()+"/24", "dev", "c0")
	}
	if err != nil {
		return l, err
	}
	if l.unit, err = unit.Load(); err != nil {
		return l, err
	}
	if err := l.unit.Layout(dir); err != nil {
		return l, err
	}
	return l, pki.Init(l.PKI)
}

// ClientAddr is client i's outside address.
func ClientAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 180, byte(1 + i)}) }

// Close kills everything the lab started and removes its namespaces.
func (l *Lab) Close() {
	for _, p := range l.procs {
		p.Stop(syscall.SIGTERM, 3*time.Second)
	}
	l.procs = nil
	for i := len(l.nss) - 1; i >= 0; i-- {
		l.nss[i].Delete()
	}
	l.nss = nil
}

// Proc is a process the lab started in a namespace, in its own process
// group, output appended to Log.
type Proc struct {
	Log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	done   bool
}

func (l *Lab) start(ns *netns.NS, log string, args ...string) (*Proc, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := exec.Command("ip", append([]string{"netns", "exec", ns.Name}, args...)...)
	c.Stdout, c.Stderr = f, f
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return nil, err
	}
	p := &Proc{Log: log, cmd: c, exited: make(chan struct{})}
	go func() { p.err = c.Wait(); close(p.exited) }()
	l.procs = append(l.procs, p)
	return p, nil
}

// PID is the process id (`ip netns exec` execs the command).
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Stop sends sig to the process group, then SIGKILL after grace.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT) // a frozen one too
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// Kill ends the process with SIGKILL (no clean-up of its own) and waits.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// Tail is the end of the process's log.
func (p *Proc) Tail(n int) string { return tail(p.Log, n) }

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// waitFor polls cond every step until it holds or d passes.
func waitFor(d, step time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for i := 0; i < 100000; i++ {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(step)
	}
	return false
}

// RouteVia is the upstream router's kernel route for p: its next hops
// (one, several for ECMP), or nil when it has none.
func (l *Lab) RouteVia(p netip.Prefix) []string {
	out, err := l.Up.Run("ip", "-4", "route", "show", "exact", p.String())
	if err != nil || strings.TrimSpace(out) == "" {
		return nil
	}
	var via []string
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "via" {
			via = append(via, f[i+1])
		}
	}
	return via
}

// Ping sends count pings from ns to dst, 0.2 s apart, and returns how many
// were answered.
func Ping(ns *netns.NS, dst netip.Addr, count int) int {
	out, _ := ns.Run("ping", "-n", "-q", "-i", "0.2", "-W", "1", "-c", fmt.Sprint(count), dst.String())
	var sent, recv int
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "packets transmitted") {
			fmt.Sscanf(strings.TrimSpace(line), "%d packets transmitted, %d received", &sent, &recv)
		}
	}
	return recv
}
