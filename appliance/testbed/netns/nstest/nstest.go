// Package nstest is the namespace helpers (package netns) for tests: each
// fails its test on error and cleans up when the test ends. It is apart from
// netns so that nothing but tests links the testing package.
package nstest

import (
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// RequireRoot skips t when not root, unless OVFWD_REQUIRE_PRIV=1 (set by
// `make test`), in which case a missing privilege fails the test: CI must
// never count a skipped privileged test as a pass.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
		t.Fatal("this test needs root (run `sudo make test`)")
	}
	t.Skip("needs root; `sudo make test` runs it")
}

// New creates a namespace for the test and deletes it when the test ends,
// whether it passed or failed.
func New(t testing.TB, tag string) *netns.NS {
	t.Helper()
	RequireRoot(t)
	ns, err := netns.Create(tag)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Delete)
	return ns
}

// Run runs a command in ns and fails the test on error.
func Run(t testing.TB, ns *netns.NS, args ...string) string {
	t.Helper()
	out, err := ns.Run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Link creates a veth pair between a and b or fails the test.
func Link(t testing.TB, a *netns.NS, ifA string, b *netns.NS, ifB string) {
	t.Helper()
	if err := netns.Veth(a, ifA, b, ifB); err != nil {
		t.Fatal(err)
	}
}

// CountUDP counts the UDP datagrams to addr that arrive in ns from now
// until the test ends.
func CountUDP(t testing.TB, ns *netns.NS, addr netip.AddrPort) *atomic.Int64 {
	t.Helper()
	network := "udp4"
	if addr.Addr().Is6() {
		network = "udp6"
	}
	var l *net.UDPConn
	if err := ns.Do(func() (err error) {
		l, err = net.ListenUDP(network, net.UDPAddrFromAddrPort(addr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	n := new(atomic.Int64)
	go func() {
		buf := make([]byte, 256)
		for {
			if _, err := l.Read(buf); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	return n
}

// BuildOvfwd is netns.OvfwdBinary for one test: a build goes into the test's
// temporary directory, and a failed build fails the test.
func BuildOvfwd(t testing.TB) string {
	t.Helper()
	bin, err := netns.OvfwdBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
