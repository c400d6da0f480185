package acl_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

const tag = "acl"

// The LAN host's services: TCP 5001 and 5002 accept and close, UDP 7
// echoes; both families.
const (
	tcpOpen  = 5001 // staff's and the routed host's
	tcpOther = 5002 // contractors'
	tcpSSH   = 22   // contractors: rejected with ICMP
	udpEcho  = 7
)

// lists: client0 is staff by [[acl_group]], client1 a contractor by its
// [[vpn.ccd]] group (contractorCCD); port p0's routed traffic (the host
// outside the tunnel) has a list of its own.
const lists = `
[[acl_group]]
name = "staff"
common_names = ["client0"]

[[acl]]
name = "staff"
ingress = ["group:staff"]
[[acl.rule]]
name = "tcp-open"
proto = "tcp"
dst_ports = ["5001"]
[[acl.rule]]
name = "echo"
proto = "udp"
dst_ports = ["7"]
[[acl.rule]]
name = "ping"
proto = "icmp"
icmp_types = [8, 128]

[[acl]]
name = "contractors"
ingress = ["group:contractors", "vpn"]
[[acl.rule]]
name = "tcp-other"
proto = "tcp"
dst_ports = ["5002"]
dst = ["198.18.141.1/32", "2001:db8:141::1/128"]
[[acl.rule]]
name = "ssh"
proto = "tcp"
dst_ports = ["22"]
action = "reject"

[[acl]]
name = "outside"
ingress = ["port:p0"]
[[acl.rule]]
name = "tcp-open"
proto = "tcp"
dst_ports = ["5001"]
[[acl.rule]]
name = "echo"
proto = "udp"
dst_ports = ["7"]
[[acl.rule]]
name = "ping"
proto = "icmp"
icmp_types = [8, 128]
`

func ccd(group string) string {
	return fmt.Sprintf("\n[[vpn.ccd]]\ncommon_name = \"client1\"\ngroup = %q\n", group)
}

// lanServices starts the LAN host's listeners.
func lanServices(t *testing.T, lan *netns.NS) {
	t.Helper()
	var closers []func()
	t.Cleanup(func() {
		for _, c := range closers {
			c()
		}
	})
	if err := lan.Do(func() error {
		for _, a := range []netip.Addr{vpne2e.LANHost4, vpne2e.LANHost6} {
			for _, p := range []int{tcpOpen, tcpOther, tcpSSH} {
				ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, uint16(p))))
				if err != nil {
					return err
				}
				closers = append(closers, func() { ln.Close() })
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						c.Write([]byte("hi"))
						c.Close()
					}
				}()
			}
			u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, udpEcho)))
			if err != nil {
				return err
			}
			closers = append(closers, func() { u.Close() })
			go func() {
				buf := make([]byte, 1500)
				for {
					n, from, err := u.ReadFromUDPAddrPort(buf)
					if err != nil {
						return
					}
					u.WriteToUDPAddrPort(buf[:n], from)
				}
			}()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// probe outcomes.
const (
	ok       = "ok"
	timeout  = "timeout"  // silently dropped
	rejected = "rejected" // an ICMP error came back (connection refused by ICMP)
)

// tcp tries one connection from ns to dst:port and reads the greeting.
func tcp(ns *netns.NS, dst netip.Addr, port int) string {
	res := ""
	_ = ns.Do(func() error {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(dst, uint16(port)).String(), 1500*time.Millisecond)
		if err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				res = timeout
			case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.ENETUNREACH):
				res = rejected
			default:
				res = err.Error()
			}
			return nil
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
		b := make([]byte, 2)
		if _, err := c.Read(b); err != nil || string(b) != "hi" {
			res = fmt.Sprintf("no greeting: %v", err)
			return nil
		}
		res = ok
		return nil
	})
	return res
}

// udp sends a datagram from ns to the LAN host's echo and waits for it
// back (two tries).
func udp(ns *netns.NS, dst netip.Addr) string {
	res := timeout
	_ = ns.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, udpEcho)))
		if err != nil {
			res = err.Error()
			return nil
		}
		defer c.Close()
		buf := make([]byte, 64)
		for range 2 {
			c.Write([]byte("ping"))
			_ = c.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
			if n, err := c.Read(buf); err == nil && string(buf[:n]) == "ping" {
				res = ok
				return nil
			}
		}
		return nil
	})
	return res
}

// ping sends two echo requests from ns.
func ping(ns *netns.NS, dst netip.Addr) string {
	if _, err := ns.Run("ping", "-n", "-q", "-c", "2", "-i", "0.2", "-W", "1", dst.String()); err != nil {
		return timeout
	}
	return ok
}

type want struct{ tcpOpen, tcpOther, udp, ping string }

// check probes everything want names from ns, in both families.
func check(t *testing.T, who string, ns *netns.NS, w want) {
	t.Helper()
	for _, dst := range []netip.Addr{vpne2e.LANHost4, vpne2e.LANHost6} {
		got := want{tcp(ns, dst, tcpOpen), tcp(ns, dst, tcpOther), udp(ns, dst), ping(ns, dst)}
		if got != w {
			t.Errorf("%s to %v: got %+v, want %+v", who, dst, got, w)
		}
	}
}

func aclStatus(t *testing.T, srv *vpne2e.Server) map[string]status.ACL {
	t.Helper()
	st, err := status.Fetch(srv.Status, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]status.ACL{}
	for _, l := range st.ACL {
		out[l.Name] = l
	}
	return out
}

func rule(l status.ACL, name string) uint64 {
	for _, r := range l.Rules {
		if r.Name == name {
			return r.Packets
		}
	}
	return 0
}

func newLab(t *testing.T, n int) (*vpne2e.Lab, string) {
	t.Helper()
	nstest.RequireRoot(t)
	for _, tool := range []string{"openvpn", "ping", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make deps installs it)", tool)
		}
	}
	bin := nstest.BuildOvfwd(t)
	dir := unittest.TempDir(t, unittest.Load(t))
	l, err := vpne2e.NewLab(tag, dir, n)
	if err != nil {
		t.Fatal(err)
	}
	l.Logf = t.Logf
	t.Cleanup(func() {
		l.Close()
		if t.Failed() {
			for _, f := range []string{"ovfwd.log", "client0.log", "client1.log"} {
				b, _ := os.ReadFile(dir + "/" + f)
				if len(b) > 5000 {
					b = b[len(b)-5000:]
				}
				t.Logf("--- %s:\n%s", f, b)
			}
		}
	})
	return l, bin
}

// routed gives client namespace i, which runs no VPN client, routes to
// the LAN through ovfwd's p0.
func routed(t *testing.T, l *vpne2e.Lab, i int) *netns.NS {
	ns := l.Clients[i]
	nstest.Run(t, ns, "ip", "route", "add", vpne2e.LANNet4.String(), "via", vpne2e.ServerAddr.String())
	nstest.Run(t, ns, "ip", "-6", "route", "add", vpne2e.LANNet6.String(), "via", vpne2e.ServerAddr6.String())
	return ns
}

// TestACLGroups: two openvpn clients in two groups and a routed host
// each reach only what their list allows, in both families; the answers
// come back (no list on the LAN port); denials are counted per rule; a
// reject rule answers with ICMP; a reload moves a client to the other
// group with its tunnel up.
func TestACLGroups(t *testing.T) {
	l, bin := newLab(t, 3)
	lanServices(t, l.LAN)
	srv, err := l.StartOvfwd(bin, vpne2e.ServerOptions{Tail: ccd("contractors") + lists})
	if err != nil {
		t.Fatal(err)
	}
	var cs []*vpne2e.Client
	for i := range 2 {
		prof, err := l.NewProfile(i, pki.Profile{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := l.StartClient(i, prof)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WaitUp(45 * time.Second); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	host := routed(t, l, 2)

	check(t, "staff client0", cs[0].NS, want{ok, timeout, ok, ok})
	check(t, "contractor client1", cs[1].NS, want{timeout, ok, timeout, timeout})
	check(t, "routed host", host, want{ok, timeout, ok, ok})
	for _, dst := range []netip.Addr{vpne2e.LANHost4, vpne2e.LANHost6} {
		if got := tcp(cs[1].NS, dst, tcpSSH); got != rejected {
			t.Errorf("contractor ssh to %v: %s, want rejected by ICMP", dst, got)
		}
	}
	st := aclStatus(t, srv)
	if n := st["contractors"].DefaultPackets; n < 8 {
		t.Errorf("contractors' default denied %d packets, want at least 8 (tcp, udp, ping, both families)", n)
	}
	if n := rule(st["contractors"], "ssh"); n < 2 {
		t.Errorf("ssh rule counted %d, want at least 2", n)
	}
	if rule(st["staff"], "tcp-open") < 2 || rule(st["staff"], "ping") < 4 || st["staff"].DefaultPackets < 2 {
		t.Errorf("staff counters %+v", st["staff"])
	}
	if rule(st["outside"], "echo") < 2 || st["outside"].DefaultPackets < 2 {
		t.Errorf("outside counters %+v", st["outside"])
	}

	// Reload: client1 joins staff, its tunnel stays up.
	ups := strings.Count(cs[1].LogText(), "Initialization Sequence Completed")
	cfg, err := os.ReadFile(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.Replace(string(cfg), ccd("contractors"), ccd("staff"), 1)
	if moved == string(cfg) {
		t.Fatal("config has no ccd group to change")
	}
	if err := os.WriteFile(srv.Config, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := srv.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for tcp(cs[1].NS, vpne2e.LANHost4, tcpOpen) != ok {
		if time.Now().After(deadline) {
			t.Fatal("client1 still filtered as a contractor 5 s after the reload")
		}
		time.Sleep(200 * time.Millisecond)
	}
	check(t, "client1 moved to staff", cs[1].NS, want{ok, timeout, ok, ok})
	if n := strings.Count(cs[1].LogText(), "Initialization Sequence Completed"); n != ups || cs[1].Exited() {
		t.Errorf("client1 reconnected across the reload (%d connections, was %d)", n, ups)
	}
	if st, err := status.Fetch(srv.Status, 2*time.Second); err != nil || st.VPN == nil || len(st.VPN.Peers) != 2 {
		t.Fatalf("peers after the reload: %v", err)
	} else {
		for _, p := range st.VPN.Peers {
			if p.Name == "client1" && p.Group != "staff" {
				t.Errorf("status shows client1 in group %q", p.Group)
			}
		}
	}
}

// TestACLRoutedFastPath: a routed port's list gives the same answers with
// the XDP fast path forced on (the port with the list is kept off it and
// its traffic goes to the workers) and off.
func TestACLRoutedFastPath(t *testing.T) {
	for _, mode := range []string{"xdp", "off"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv(vpne2e.FastPathEnv, mode)
			l, bin := newLab(t, 1)
			lanServices(t, l.LAN)
			srv, err := l.StartOvfwd(bin, vpne2e.ServerOptions{Tail: ccd("contractors") + lists})
			if err != nil {
				t.Fatal(err)
			}
			host := routed(t, l, 0)
			check(t, "routed host", host, want{ok, timeout, ok, ok})
			st := aclStatus(t, srv)
			if st["outside"].DefaultPackets < 4 || rule(st["outside"], "tcp-open") < 4 {
				t.Errorf("outside counters %+v", st["outside"])
			}
			if mode == "xdp" {
				b, _ := os.ReadFile(srv.Log)
				if !regexp.MustCompile(`xdp fast path.*port\W{1,3}p1\W.*on\W{1,2}true`).Match(b) ||
					!regexp.MustCompile(`xdp fast path.*port\W{1,3}p0\W.*on\W{1,2}false.*acl`).Match(b) {
					t.Fatalf("fast path not on for p1 and off for p0 (its list):\n%s", b)
				}
			}
		})
	}
}

// TestACLAuthGroup: the group a user-pass-verify command prints wins over
// the certificate's: client1, a contractor by its [[vpn.ccd]], logs in as
// a user the command puts in staff, and is filtered as staff.
func TestACLAuthGroup(t *testing.T) {
	dir, err := os.MkdirTemp("", "ovfwd-acl-auth-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the unit's user runs the command
		t.Fatal(err)
	}
	script := dir + "/verify.sh"
	body := "#!/bin/sh\nu=$(sed -n 1p \"$1\"); p=$(sed -n 2p \"$1\")\n[ \"$u:$p\" = \"dave:secret\" ] || exit 1\necho \"group staff\"\nexit 0\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	l, bin := newLab(t, 2)
	lanServices(t, l.LAN)
	srv, err := l.StartOvfwd(bin, vpne2e.ServerOptions{VPN: fmt.Sprintf("auth_user_pass_verify = [%q]", script), Tail: ccd("contractors") + lists})
	if err != nil {
		t.Fatal(err)
	}
	creds := l.Dir + "/creds-dave"
	if err := os.WriteFile(creds, []byte("dave\nsecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prof, err := l.NewProfile(1, pki.Profile{Extra: []string{"auth-user-pass " + creds}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.StartClient(1, prof)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitUp(45 * time.Second); err != nil {
		t.Fatal(err)
	}
	check(t, "client1 placed in staff by the command", c.NS, want{ok, timeout, ok, ok})
	st, err := status.Fetch(srv.Status, 2*time.Second)
	if err != nil || st.VPN == nil {
		t.Fatalf("status: %v", err)
	}
	if len(st.VPN.Peers) != 1 || st.VPN.Peers[0].Group != "staff" {
		t.Fatalf("status peers %+v, want one in group staff", st.VPN.Peers)
	}
}
