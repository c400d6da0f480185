package control_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/control/controltest"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

const openvpnBin = "/usr/sbin/openvpn"

// syncLog is a goroutine-safe log that stops forwarding to t after the
// test ends (server goroutines may outlive it by a tick).
type syncLog struct {
	mu    sync.Mutex
	t     *testing.T
	done  bool
	lines []string
}

func (l *syncLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	if !l.done {
		l.t.Logf(format, args...)
	}
}

// count is the number of logged lines containing s.
func (l *syncLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func newSyncLog(t *testing.T) *syncLog {
	l := &syncLog{t: t}
	t.Cleanup(func() { l.mu.Lock(); l.done = true; l.mu.Unlock() })
	return l
}

type realCase struct {
	name    string
	wrap    control.WrapMode
	digest  control.Digest
	auth    string // client "auth" line for tls-auth
	ciphers string // client data-ciphers
	want    vpn.Cipher
	v6      bool // client reaches the server over IPv6
	// renegotiation: server-initiated (srvReneg) or client-initiated
	// (client reneg-sec) after a few seconds; pings must then decrypt
	// with the new key_id.
	srvReneg time.Duration
	cliReneg int
	tls12    bool // client capped at TLS 1.2 (EKM over TLS 1.2 with EMS)
	// closeInReneg closes the server after the client has started a
	// renegotiation the server has not yet heard of (see closeDuringReneg).
	closeInReneg bool
	compLZO      bool // legacy profile line "comp-lzo no": server migrates it to stub-v2
}

// TestRealClient runs a stock openvpn 2.6 client against the server in a
// pair of namespaces: the client must complete initialisation, carry the
// pushed IPv4/IPv6 addresses on tun0, and its keepalive pings must decrypt
// with the data keys the server derived.
func TestRealClient(t *testing.T) {
	nstest.RequireRoot(t)
	if _, err := exec.LookPath(openvpnBin); err != nil {
		t.Fatalf("%s not installed", openvpnBin)
	}
	cases := []realCase{
		{name: "tls-crypt/AES-256-GCM/server-reneg", wrap: control.WrapTLSCrypt, want: vpn.AES256GCM, srvReneg: 4 * time.Second},
		{name: "tls-auth-sha1/AES-128-GCM/client-reneg", wrap: control.WrapTLSAuth, ciphers: "AES-128-GCM", want: vpn.AES128GCM, cliReneg: 4},
		// Server preference wins: the client lists CHACHA20 first.
		{name: "tls-auth-sha256/AES-128-GCM/udp6", wrap: control.WrapTLSAuth, digest: control.DigestSHA256, auth: "SHA256", ciphers: "CHACHA20-POLY1305:AES-128-GCM", want: vpn.AES128GCM, v6: true},
		{name: "tls-crypt/CHACHA20-POLY1305/udp6", wrap: control.WrapTLSCrypt, ciphers: "CHACHA20-POLY1305", want: vpn.ChaCha20Poly1305, v6: true},
		{name: "tls-crypt/TLS1.2/comp-lzo-no", wrap: control.WrapTLSCrypt, want: vpn.AES256GCM, tls12: true, compLZO: true},
		{name: "tls-auth-sha1/close-during-client-reneg", wrap: control.WrapTLSAuth, ciphers: "AES-128-GCM", want: vpn.AES128GCM, cliReneg: 4, closeInReneg: true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) { runRealClient(t, i, c) })
	}
}

func runRealClient(t *testing.T, idx int, c realCase) {
	log := newSyncLog(t)
	srvNS := nstest.New(t, "vpcs")
	cliNS := nstest.New(t, "vpcc")
	if err := netns.Veth(srvNS, "vpcs0", cliNS, "vpcc0"); err != nil {
		t.Fatal(err)
	}
	nstest.Run(t, srvNS, "ip", "addr", "add", "198.18.70.1/24", "dev", "vpcs0")
	nstest.Run(t, srvNS, "ip", "addr", "add", "2001:db8:70::1/64", "dev", "vpcs0", "nodad")
	nstest.Run(t, cliNS, "ip", "addr", "add", "198.18.70.2/24", "dev", "vpcc0")
	nstest.Run(t, cliNS, "ip", "addr", "add", "2001:db8:70::2/64", "dev", "vpcc0", "nodad")

	dir := t.TempDir()
	if err := pki.Init(dir); err != nil {
		t.Fatal(err)
	}
	remote := "198.18.70.1:1194"
	if c.v6 {
		remote = "[2001:db8:70::1]:1194"
	}
	extra := []string{"verb 3", "explicit-exit-notify 1"}
	if c.tls12 {
		extra = append(extra, "tls-version-max 1.2")
	}
	if c.compLZO {
		extra = append(extra, "comp-lzo no")
	}
	if c.cliReneg > 0 {
		extra = append(extra, fmt.Sprintf("reneg-sec %d", c.cliReneg))
	}
	profile, err := pki.ClientProfile(dir, pki.Profile{
		Name: fmt.Sprintf("client%d", idx), Remotes: []string{remote},
		TLSAuth: c.wrap == control.WrapTLSAuth, Auth: c.auth, Ciphers: c.ciphers,
		Extra: extra,
	})
	if err != nil {
		t.Fatal(err)
	}
	ld, err := pki.Load(dir)
	if err != nil {
		t.Fatal(err)
	}

	dp := controltest.New()
	type opened struct {
		plain []byte
		kid   uint8
		err   error
	}
	data := make(chan opened, 64)
	cfg := control.Config{
		Certificate: ld.Certificate, ClientCAs: ld.ClientCAs,
		Wrap: c.wrap, WrapKey: ld.StaticKey, AuthDigest: c.digest, KeyDirection: control.KeyDir0,
		Pool4: netip.MustParsePrefix("198.18.71.0/24"),
		Pool6: netip.MustParsePrefix("2001:db8:71::/64"),
		Ping:  time.Second, PingRestart: 30 * time.Second, RenegSec: c.srvReneg,
		Logf: log.logf,
		// Kernel-socket mode: data packets reach the control socket; open
		// them with the keys the control plane installed.
		DataPacket: func(src netip.AddrPort, pkt []byte) {
			if len(pkt) < 4 {
				return
			}
			peerID := binary.BigEndian.Uint32(pkt) & 0xffffff
			kid := pkt[0] & 7
			ps, ok := dp.Peer(peerID)
			if !ok {
				data <- opened{err: fmt.Errorf("data for unknown peer %d", peerID)}
				return
			}
			km, ok := ps.Keys[kid]
			if !ok {
				data <- opened{err: fmt.Errorf("data for unknown key %d", kid)}
				return
			}
			dk, err := vpn.NewDataKey(&km)
			if err != nil {
				data <- opened{err: err}
				return
			}
			dp.Touch(peerID, time.Now(), time.Time{})
			plain, _, err := dk.Open(append([]byte(nil), pkt...))
			select {
			case data <- opened{plain: append([]byte(nil), plain...), kid: kid, err: err}:
			default:
			}
		},
	}
	srv, err := control.NewServer(cfg, dp)
	if err != nil {
		t.Fatal(err)
	}
	var conn net.PacketConn
	if err := srvNS.Do(func() error {
		var err error
		conn, err = net.ListenPacket("udp", "[::]:1194") // dual-stack
		return err
	}); err != nil {
		srv.Close()
		t.Fatal(err)
	}
	var held *holdConn
	if c.closeInReneg {
		held = newHoldConn(conn)
		conn = held
	}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(conn) }()
	defer func() {
		srv.Close()
		select {
		case <-serveDone:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	}()

	logFile := dir + "/client.log"
	cmd, err := cliNS.Start(nil, nil, openvpnBin, "--config", profile, "--log", logFile)
	if err != nil {
		t.Fatal(err)
	}
	clientLog := func() string { b, _ := os.ReadFile(logFile); return string(b) }
	defer func() {
		if t.Failed() {
			t.Logf("client log:\n%s", clientLog())
			t.Logf("server drops: %v", srv.Drops())
		}
	}()
	if !waitFor(30*time.Second, func() bool { return strings.Contains(clientLog(), "Initialization Sequence Completed") }) {
		t.Fatalf("client did not complete initialisation (pid %d)", cmd.Process.Pid)
	}
	ids := dp.Peers()
	if len(ids) != 1 {
		t.Fatalf("data plane has peers %v, want one", ids)
	}
	ps, _ := dp.Peer(ids[0])
	if c.closeInReneg {
		closeDuringReneg(t, srv, held, clientLog)
		return
	}
	if km := ps.Keys[0]; km.Cipher != c.want {
		t.Errorf("negotiated cipher %v, want %v", km.Cipher, c.want)
	}
	if ps.Peer.VPNIPv4 != netip.MustParseAddr("198.18.71.2") || ps.Peer.VPNIPv6 != netip.MustParseAddr("2001:db8:71::1000") {
		t.Errorf("peer addresses %v %v", ps.Peer.VPNIPv4, ps.Peer.VPNIPv6)
	}
	addrs := nstest.Run(t, cliNS, "ip", "addr", "show", "dev", "tun0")
	for _, want := range []string{"inet 198.18.71.2/24", "inet6 2001:db8:71::1000/64"} {
		if !strings.Contains(addrs, want) {
			t.Errorf("tun0 lacks %q:\n%s", want, addrs)
		}
	}
	if want := "cipher '" + c.want.String() + "'"; !strings.Contains(clientLog(), want) {
		t.Errorf("client log lacks %q", want)
	}
	if c.tls12 && !strings.Contains(clientLog(), "Control Channel: TLSv1.2") {
		t.Errorf("client did not use TLS 1.2")
	}
	wantComp := vpn.CompNone
	if c.compLZO {
		wantComp = vpn.CompStubV2
	}
	if ps.Peer.Comp != wantComp {
		t.Errorf("peer compression framing %v, want %v", ps.Peer.Comp, wantComp)
	}

	if c.want == vpn.ChaCha20Poly1305 && !dataPlaneHasChaCha() {
		t.Log("vpn built without CHACHA20-POLY1305 (needs -tags ovfwd_xcrypto): data packets not checked")
		srv.Close()
		return
	}
	// The client pings every second (pushed "ping 1"); its pings must
	// decrypt to the keepalive magic with the derived keys.
	pings, newKeyPings := 0, 0
	wantNew := 0
	limit := 10 * time.Second
	if c.srvReneg > 0 || c.cliReneg > 0 {
		wantNew, limit = 2, 25*time.Second
	}
	deadline := time.After(limit)
	for pings < 2 || newKeyPings < wantNew {
		select {
		case d := <-data:
			if d.err != nil {
				t.Fatalf("data packet: %v", d.err)
			}
			switch {
			case bytes.Equal(d.plain, vpn.PingMagic[:]):
				pings++
				if d.kid > 0 {
					newKeyPings++
				}
			case len(d.plain) >= 20 && (d.plain[0]>>4 == 4 || d.plain[0]>>4 == 6):
				// the client's own IPv6 router/multicast chatter
			default:
				t.Fatalf("data plaintext %x is neither ping magic nor IP", d.plain)
			}
		case <-deadline:
			t.Fatalf("got %d decrypted pings from the client (%d on a renegotiated key), want 2 (%d)", pings, newKeyPings, wantNew)
		}
	}
	if wantNew > 0 {
		if ids := dp.Peers(); len(ids) != 1 || ids[0] != ps.Peer.PeerID {
			t.Errorf("after renegotiation the data plane has peers %v, want [%d]", ids, ps.Peer.PeerID)
		}
		t.Logf("data plane calls: %v", dp.Log())
	}

	// Shutdown: the server's RESTART notice reaches the client.
	srv.Close()
	if !waitFor(10*time.Second, func() bool { return strings.Contains(clientLog(), "server-pushed-connection-reset") }) {
		t.Errorf("client never saw the server's RESTART")
	}
}

func waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cond()
}

func dataPlaneHasChaCha() bool {
	_, err := vpn.NewDataKey(&vpn.KeyMaterial{Cipher: vpn.ChaCha20Poly1305})
	return err == nil
}

// closeDuringReneg: the server is closed after the client has moved to a
// new key the server has not yet heard of (its soft reset is held at the
// server's socket). The RESTART sent on the old key is dropped by the
// client ("key IDs out of sync"); once the soft reset gets through, the
// server must send RESTART again on the new key.
func closeDuringReneg(t *testing.T, srv *control.Server, held *holdConn, clientLog func() string) {
	held.hold()
	if !waitFor(15*time.Second, func() bool { return strings.Contains(clientLog(), "TLS: soft reset") }) {
		held.release()
		t.Fatal("the client did not start its renegotiation")
	}
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	const outOfSync = "key IDs out of sync"
	provoked := waitFor(10*time.Second, func() bool { return strings.Contains(clientLog(), outOfSync) })
	held.release()
	if !provoked {
		t.Fatalf("the client never refused a message on its old key (%q): the case was not provoked", outOfSync)
	}
	if !waitFor(15*time.Second, func() bool { return strings.Contains(clientLog(), "server-pushed-connection-reset") }) {
		t.Errorf("client never saw the server's RESTART on its new key")
	}
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Error("Close did not return")
	}
}

// holdConn is the server's socket with a switch that holds received
// datagrams (Serve blocks in ReadFrom) until release.
type holdConn struct {
	net.PacketConn
	mu   sync.Mutex
	cond *sync.Cond
	held bool
}

func newHoldConn(c net.PacketConn) *holdConn {
	h := &holdConn{PacketConn: c}
	h.cond = sync.NewCond(&h.mu)
	return h
}

func (h *holdConn) hold() { h.mu.Lock(); h.held = true; h.mu.Unlock() }

func (h *holdConn) release() {
	h.mu.Lock()
	h.held = false
	h.cond.Broadcast()
	h.mu.Unlock()
}

func (h *holdConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, addr, err := h.PacketConn.ReadFrom(b)
	h.mu.Lock()
	for h.held {
		h.cond.Wait()
	}
	h.mu.Unlock()
	return n, addr, err
}
