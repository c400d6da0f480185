package vpne2e

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// Address plan. Only 198.18.0.0/15 and 2001:db8::/32, per the lab rules.
var (
	OutsideNet  = netip.MustParsePrefix("198.18.140.0/24") // clients' side
	ServerAddr  = netip.MustParseAddr("198.18.140.254")    // what clients dial
	OutsideNet6 = netip.MustParsePrefix("2001:db8:140::/64")
	ServerAddr6 = netip.MustParseAddr("2001:db8:140::fe") // what proto udp6 clients dial
	LANNet4     = netip.MustParsePrefix("198.18.141.0/24")
	LANNet6     = netip.MustParsePrefix("2001:db8:141::/64")
	LANGW4      = netip.MustParseAddr("198.18.141.254")
	LANGW6      = netip.MustParseAddr("2001:db8:141::fe")
	LANHost4    = netip.MustParseAddr("198.18.141.1")
	LANHost6    = netip.MustParseAddr("2001:db8:141::1")
	Pool4       = netip.MustParsePrefix("198.18.142.0/24")
	Pool6       = netip.MustParsePrefix("2001:db8:142::/64")
)

// VPNPort is the server's UDP port.
const VPNPort = 1194

// MaxClients bounds the client namespaces of one lab (addresses .1-.200).
const MaxClients = 200

// Lab is the topology with a fresh PKI in Dir.
type Lab struct {
	Dir string // work directory: configs, logs, state/, run/ (unit.Layout)
	PKI string // Dir/state/pki: the daemon's state, as in /var/lib/ovfwd
	// Logf, if set, gets once per process what ovfwd runs with (its
	// unit's user, capabilities and limits), e.g. testing.T.Logf.
	Logf    func(format string, args ...any)
	App     *netns.NS
	LAN     *netns.NS
	Switch  *netns.NS // nil with one client
	Clients []*netns.NS

	nss   []*netns.NS
	procs []*proc // every process started in the lab, stopped by Close
}

// NewLab builds the namespaces for n clients under tag and a PKI in dir,
// which it lays out for the unit's user (unit.Layout): its parents must
// let that user through (unit.MkdirTemp). On error everything built so far
// is removed.
func NewLab(tag, dir string, n int) (l *Lab, err error) {
	if n < 1 || n > MaxClients {
		return nil, fmt.Errorf("vpne2e: %d clients, want 1..%d", n, MaxClients)
	}
	l = &Lab{Dir: dir, PKI: filepath.Join(dir, "state", "pki")}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	mk := func() (*netns.NS, error) {
		ns, err := netns.Create(tag)
		if err == nil {
			l.nss = append(l.nss, ns)
		}
		return ns, err
	}
	if l.App, err = mk(); err != nil {
		return l, err
	}
	if l.LAN, err = mk(); err != nil {
		return l, err
	}
	for i := 0; i < n; i++ {
		c, err := mk()
		if err != nil {
			return l, err
		}
		l.Clients = append(l.Clients, c)
	}
	run := func(ns *netns.NS, args ...string) error {
		_, err := ns.Run(args...)
		return err
	}
	if n == 1 {
		if err := netns.Veth(l.Clients[0], "c0", l.App, "p0"); err != nil {
			return l, err
		}
	} else {
		if l.Switch, err = mk(); err != nil {
			return l, err
		}
		if err := run(l.Switch, "ip", "link", "add", "br0", "type", "bridge"); err != nil {
			return l, err
		}
		if err := run(l.Switch, "ip", "link", "set", "br0", "up"); err != nil {
			return l, err
		}
		if err := netns.Veth(l.App, "p0", l.Switch, "sa"); err != nil {
			return l, err
		}
		if err := run(l.Switch, "ip", "link", "set", "sa", "master", "br0"); err != nil {
			return l, err
		}
		for i, c := range l.Clients {
			port := fmt.Sprintf("s%d", i)
			if err := netns.Veth(c, "c0", l.Switch, port); err != nil {
				return l, err
			}
			if err := run(l.Switch, "ip", "link", "set", port, "master", "br0"); err != nil {
				return l, err
			}
		}
	}
	if err := netns.Veth(l.App, "p1", l.LAN, "lan0"); err != nil {
		return l, err
	}
	// Hosts keep a veth's default offloads: ovfwd finishes the checksums
	// they leave unfinished (engine event csum_partial), and its native
	// XDP program turns the peer's segmentation offload off itself.
	type step struct {
		ns   *netns.NS
		args []string
	}
	var ss []step
	for i, c := range l.Clients {
		ss = append(ss,
			step{c, []string{"ip", "addr", "add", ClientAddr(i).String() + "/24", "dev", "c0"}},
			step{c, []string{"ip", "addr", "add", ClientAddr6(i).String() + "/64", "dev", "c0", "nodad"}})
	}
	ss = append(ss,
		step{l.LAN, []string{"ip", "addr", "add", LANHost4.String() + "/24", "dev", "lan0"}},
		step{l.LAN, []string{"ip", "addr", "add", LANHost6.String() + "/64", "dev", "lan0", "nodad"}},
		step{l.LAN, []string{"ip", "route", "add", "default", "via", LANGW4.String()}},
		step{l.LAN, []string{"ip", "-6", "route", "add", "default", "via", LANGW6.String()}},
		// The appliance's addresses live on the kernel interfaces for both
		// servers (ovfwd keeps addresses it finds there).
		step{l.App, []string{"ip", "addr", "add", ServerAddr.String() + "/24", "dev", "p0"}},
		step{l.App, []string{"ip", "addr", "add", ServerAddr6.String() + "/64", "dev", "p0", "nodad"}},
		step{l.App, []string{"ip", "addr", "add", LANGW4.String() + "/24", "dev", "p1"}},
		step{l.App, []string{"ip", "addr", "add", LANGW6.String() + "/64", "dev", "p1", "nodad"}},
	)
	for _, s := range ss {
		if err := run(s.ns, s.args...); err != nil {
			return l, err
		}
	}
	// The far ends of ovfwd's ports, for a forced fast path (FastPathEnv).
	p0peer, p0dev := l.Switch, "sa"
	if n == 1 {
		p0peer, p0dev = l.Clients[0], "c0"
	}
	if err := PeerNAPI(p0peer, p0dev); err != nil {
		return l, err
	}
	if err := PeerNAPI(l.LAN, "lan0"); err != nil {
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

// ClientAddr is client i's outside address.
func ClientAddr(i int) netip.Addr {
	a := OutsideNet.Addr().As4()
	a[3] = byte(1 + i)
	return netip.AddrFrom4(a)
}

// ClientAddr6 is client i's outside IPv6 address.
func ClientAddr6(i int) netip.Addr {
	a := OutsideNet6.Addr().As16()
	a[15] = byte(1 + i)
	return netip.AddrFrom16(a)
}

// SetKernelForwarding turns IP forwarding in the appliance namespace on
// (for the openvpn server, which routes through the kernel) or off.
func (l *Lab) SetKernelForwarding(on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	var errs []error
	for _, k := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"} {
		_, err := l.App.Run("sysctl", "-qw", k+"="+v)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Close removes every namespace (killing what runs in them that netns
// started) and keeps Dir for the caller to inspect or remove.
func (l *Lab) Close() {
	for _, p := range l.procs {
		p.stop(syscall.SIGTERM, 3*time.Second)
	}
	l.procs = nil
	for i := len(l.nss) - 1; i >= 0; i-- {
		l.nss[i].Delete()
	}
	l.nss = nil
}

// logTail is the end of a log file, for error messages.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
