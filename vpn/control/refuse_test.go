package control_test

import (
	"fmt"
	"net"
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
	"github.com/ovfwd/ovfwd/vpn/control/controltest"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// refuseRig is a server in one namespace and stock openvpn clients in
// another, for the refusal paths.
type refuseRig struct {
	t     *testing.T
	dir   string
	cli   *netns.NS
	log   *syncLog
	srv   *control.Server
	nextN int
}

func newRefuseRig(t *testing.T, tweak func(*control.Config)) *refuseRig {
	nstest.RequireRoot(t)
	if _, err := exec.LookPath(openvpnBin); err != nil {
		t.Fatalf("%s not installed", openvpnBin)
	}
	r := &refuseRig{t: t, dir: t.TempDir(), log: newSyncLog(t)}
	srvNS := nstest.New(t, "vprs")
	r.cli = nstest.New(t, "vprc")
	if err := netns.Veth(srvNS, "vprs0", r.cli, "vprc0"); err != nil {
		t.Fatal(err)
	}
	nstest.Run(t, srvNS, "ip", "addr", "add", "198.18.76.1/24", "dev", "vprs0")
	nstest.Run(t, r.cli, "ip", "addr", "add", "198.18.76.2/24", "dev", "vprc0")
	if err := pki.Init(r.dir); err != nil {
		t.Fatal(err)
	}
	ld, err := pki.Load(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := control.Config{
		Certificate: ld.Certificate, ClientCAs: ld.ClientCAs,
		Wrap: control.WrapTLSCrypt, WrapKey: ld.StaticKey,
		Pool4: netip.MustParsePrefix("198.18.77.0/24"),
		Ping:  time.Second, PingRestart: 30 * time.Second,
		Logf: r.log.logf,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	if r.srv, err = control.NewServer(cfg, controltest.New()); err != nil {
		t.Fatal(err)
	}
	var conn net.PacketConn
	if err := srvNS.Do(func() error {
		conn, err = net.ListenPacket("udp", "198.18.76.1:1194")
		return err
	}); err != nil {
		r.srv.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.srv.Serve(conn) }()
	t.Cleanup(func() {
		r.srv.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return r
}

// refuseClient is one stock openvpn client process.
type refuseClient struct {
	log string
	pid int
}

func (c *refuseClient) text() string { b, _ := os.ReadFile(c.log); return string(b) }

// hasExited reads the process state: the namespace's cleanup reaps it
// (netns waits for what it started), so a zombie counts as exited.
func (c *refuseClient) hasExited() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

// start runs a client named name; p fills in the rest of its profile.
func (r *refuseRig) start(name string, p pki.Profile) *refuseClient {
	r.t.Helper()
	p.Name = name
	p.Remotes = []string{"198.18.76.1:1194"}
	p.Extra = append([]string{"verb 3"}, p.Extra...)
	profile, err := pki.ClientProfile(r.dir, p)
	if err != nil {
		r.t.Fatal(err)
	}
	r.nextN++
	c := &refuseClient{log: filepath.Join(r.dir, fmt.Sprintf("%s-%d.log", name, r.nextN))}
	cmd, err := r.cli.Start(nil, nil, openvpnBin, "--config", profile, "--log", c.log)
	if err != nil {
		r.t.Fatal(err)
	}
	c.pid = cmd.Process.Pid
	r.t.Cleanup(func() {
		if r.t.Failed() {
			r.t.Logf("%s log:\n%s", name, c.text())
		}
	})
	return c
}

func (r *refuseRig) up(c *refuseClient) {
	r.t.Helper()
	if !waitFor(30*time.Second, func() bool { return strings.Contains(c.text(), "Initialization Sequence Completed") }) {
		r.t.Fatal("client did not come up")
	}
}

// refused asserts the stock client's own view of a refusal: it logs the
// AUTH_FAILED reason, exits with auth-failure, and made one attempt only
// (before the fix it read AUTH_FAILED as a broken key method 2 reply,
// soft-restarted and retried forever).
func (r *refuseRig) refused(c *refuseClient, reason string) {
	r.t.Helper()
	want := "AUTH: Received control message: AUTH_FAILED," + reason
	if !waitFor(30*time.Second, func() bool { return strings.Contains(c.text(), want) }) {
		r.t.Fatalf("client log lacks %q", want)
	}
	if !waitFor(15*time.Second, c.hasExited) {
		r.t.Fatal("client did not exit after AUTH_FAILED")
	}
	log := c.text()
	if !strings.Contains(log, "SIGTERM[soft,auth-failure]") {
		r.t.Error("client did not exit with SIGTERM[soft,auth-failure]")
	}
	if n := strings.Count(log, "TLS: Initial packet from"); n != 1 {
		r.t.Errorf("client started %d TLS sessions, want 1 (no retries)", n)
	}
	if strings.Contains(log, "Unknown key_method") {
		r.t.Error("client could not parse our key method 2 reply")
	}
}

func TestRealClientRefusedNoCipher(t *testing.T) {
	r := newRefuseRig(t, func(c *control.Config) { c.Ciphers = []vpn.Cipher{vpn.AES256GCM} })
	c := r.start("nocipher", pki.Profile{Ciphers: "AES-128-GCM"})
	r.refused(c, "no common data cipher")
	if n := r.srv.Drop(control.DropAuthFailed); n != 1 {
		t.Errorf("server counted %d refusals, want 1", n)
	}
}

func TestRealClientRefusedPoolFull(t *testing.T) {
	// A /30 holds one client address.
	r := newRefuseRig(t, func(c *control.Config) { c.Pool4 = netip.MustParsePrefix("198.18.77.0/30") })
	first := r.start("first", pki.Profile{})
	r.up(first)
	r.refused(r.start("second", pki.Profile{}), "address pool exhausted")
	if first.hasExited() {
		t.Error("the connected client went away")
	}
}

func TestRealClientRefusedMaxPeers(t *testing.T) {
	r := newRefuseRig(t, func(c *control.Config) { c.MaxPeers = 1 })
	first := r.start("first", pki.Profile{})
	r.up(first)
	r.refused(r.start("second", pki.Profile{}), "server full (max_peers reached)")
}
