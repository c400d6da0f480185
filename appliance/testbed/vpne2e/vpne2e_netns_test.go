package vpne2e_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// tag names this package's namespaces.
const tag = "v2e"

// setup builds a lab for n clients with ovfwd serving o, and iperf3
// servers for each client (two per client: one per direction when a test
// runs both at once).
func setup(t testing.TB, n int, o vpne2e.ServerOptions) (*vpne2e.Lab, *vpne2e.Server) {
	t.Helper()
	l, bin := newLab(t, n, "openvpn", "iperf3", "ethtool")
	if err := l.StartIperfServers(2 * n); err != nil {
		t.Fatal(err)
	}
	srv, err := l.StartOvfwd(bin, o)
	if err != nil {
		t.Fatal(err)
	}
	checkFastPath(t, srv)
	return l, srv
}

// newLab checks that the tools are installed, builds ovfwd and makes a
// lab for n clients, closed when the test ends (its logs dumped when the
// test failed).
func newLab(t testing.TB, n int, tools ...string) (*vpne2e.Lab, string) {
	t.Helper()
	nstest.RequireRoot(t)
	for _, tool := range tools {
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
			dumpLogs(t, dir)
		}
	})
	return l, bin
}

// checkFastPath: with the suite's fast path forced on (FastPathEnv), both
// ports' XDP programs run it (the daemon logs it per port).
func checkFastPath(t testing.TB, srv *vpne2e.Server) {
	t.Helper()
	if !vpne2e.FastPathForced() {
		return
	}
	b, err := os.ReadFile(srv.Log)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"p0", "p1"} {
		if !regexp.MustCompile(`xdp fast path.*port\W{1,3}` + p + `\W.*on\W{1,2}true`).Match(b) {
			t.Fatalf("%s=xdp but the fast path is not on for %s:\n%s", vpne2e.FastPathEnv, p, b)
		}
	}
}

// fastCounters is port's fast-path counters in the server's status.
func fastCounters(t testing.TB, srv *vpne2e.Server, port int) status.Counters {
	t.Helper()
	s, err := status.Fetch(srv.Status, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out := status.Counters{}
	for k, v := range s.Ports[port].Backend {
		if strings.HasPrefix(k, "fast_") {
			out[k] = v
		}
	}
	return out
}

// dumpLogs logs the end of every server and client log in dir.
func dumpLogs(t testing.TB, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, p := range logs {
		if strings.Contains(p, "iperf3") {
			continue
		}
		b, _ := os.ReadFile(p)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Logf("--- %s (end):\n%s", filepath.Base(p), b)
	}
}

// connect starts client i with profile p and waits for its addresses,
// which must come from the pools.
func connect(t testing.TB, l *vpne2e.Lab, i int, p pki.Profile) *vpne2e.Client {
	t.Helper()
	profile, err := l.NewProfile(i, p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.StartClient(i, profile)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitUp(45 * time.Second); err != nil {
		t.Fatal(err)
	}
	checkPushed(t, c)
	return c
}

// checkPushed: tun0 carries addresses from both pools.
func checkPushed(t testing.TB, c *vpne2e.Client) {
	t.Helper()
	if !vpne2e.Pool4.Contains(c.V4) || !vpne2e.Pool6.Contains(c.V6) {
		t.Fatalf("client %d got %v and %v on tun0, want addresses in %v and %v", c.Index, c.V4, c.V6, vpne2e.Pool4, vpne2e.Pool6)
	}
}

// transfer moves n checksummed bytes over TCP each way, over IPv4 and
// over IPv6 inside the tunnel, between client c and the LAN host, failing
// unless every byte arrived intact. (iperf3's -n counts on the receiver
// stop at the test end, so it cannot prove that every byte arrived.)
func transfer(t *testing.T, l *vpne2e.Lab, c *vpne2e.Client, n int64) {
	t.Helper()
	if err := transferErr(l, c, n, t.Logf); err != nil {
		t.Fatal(err)
	}
}

// transferErr is transfer for any goroutine: it reports instead of failing.
func transferErr(l *vpne2e.Lab, c *vpne2e.Client, n int64, logf func(string, ...any)) error {
	for _, fam := range []struct{ lan, client netip.Addr }{{vpne2e.LANHost4, c.V4}, {vpne2e.LANHost6, c.V6}} {
		for _, up := range []bool{true, false} {
			src, dst, to, dir := c.NS, l.LAN, fam.lan, "up"
			if !up {
				src, dst, to, dir = l.LAN, c.NS, fam.client, "down"
			}
			r, err := lab.TCPTransfer(context.Background(), src, dst, to, n, 120*time.Second)
			if err != nil || !r.OK(n) {
				return fmt.Errorf("client %d %s to %s: %d of %d bytes, checksums match %v, err %v", c.Index, dir, to, r.Bytes, n, r.Sent == r.Received, err)
			}
			logf("client %d %-4s to %-22s %d MiB intact in %v (%.0f Mb/s)", c.Index, dir, to, n>>20,
				r.Elapsed.Round(time.Millisecond), float64(8*n)/r.Elapsed.Seconds()/1e6)
		}
	}
	return nil
}

// logDrops logs the server's non-zero drop and port counters: TCP hides
// loss, these show where it happened.
func logDrops(t testing.TB, srv *vpne2e.Server) {
	t.Helper()
	s, err := status.Fetch(srv.Status, 2*time.Second)
	if err != nil {
		t.Error(err)
		return
	}
	var parts []string
	add := func(where string, cs status.Counters) {
		for k, v := range cs {
			if v != 0 {
				parts = append(parts, fmt.Sprintf("%s.%s=%d", where, k, v))
			}
		}
	}
	add("engine", s.Drops)
	for _, p := range s.Ports {
		add(p.Name, p.Backend)
	}
	if s.VPN != nil {
		add("vpn", s.VPN.Drops)
	}
	sort.Strings(parts)
	t.Logf("server drop counters: %v", parts)
}

// logClientDrops logs where the client's namespace dropped packets: its
// UDP socket's receive buffer and tun0's queues (the openvpn client is
// single-threaded; when it falls behind, loss happens here).
func logClientDrops(t *testing.T, c *vpne2e.Client) {
	t.Helper()
	udp, _ := c.NS.Run("nstat", "-az", "UdpRcvbufErrors", "Udp6RcvbufErrors")
	tun, _ := c.NS.Run("ip", "-s", "link", "show", "dev", "tun0")
	t.Logf("client %d namespace: %s\n%s", c.Index, strings.Join(strings.Fields(udp), " "), tun)
}

// peers is the server's view of its clients.
func peers(t *testing.T, srv *vpne2e.Server) []status.VPNPeer {
	t.Helper()
	s, err := status.Fetch(srv.Status, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s.VPN == nil {
		t.Fatal("status has no VPN section")
	}
	return s.VPN.Peers
}

const mb = 1 << 20

// TestOneClient: a stock openvpn 2.6 client with an `ovfwd pki client`
// profile gets its pushed IPv4 and IPv6 addresses from ovfwd on AF_XDP
// ports and moves 50 MB each way over IPv4 and over IPv6 inside the
// tunnel to a host behind ovfwd.
func TestOneClient(t *testing.T) {
	l, srv := setup(t, 1, vpne2e.ServerOptions{})
	c := connect(t, l, 0, pki.Profile{})
	if got := c.Cipher(); got != "AES-256-GCM" {
		t.Errorf("negotiated cipher %q, want AES-256-GCM (the first both offer)", got)
	}
	transfer(t, l, c, 50*mb)
	logDrops(t, srv)
	ps := peers(t, srv)
	if len(ps) != 1 {
		t.Fatalf("server has %d peers, want 1: %+v", len(ps), ps)
	}
	// Four 50 MB transfers went through this peer: the server counted them.
	if ps[0].Rx.Bytes < 100*mb || ps[0].Tx.Bytes < 100*mb {
		t.Errorf("peer counters rx %d tx %d bytes, want ≥ 100 MiB each", ps[0].Rx.Bytes, ps[0].Tx.Bytes)
	}
	// With the fast path forced on, the LAN host's traffic to the pool
	// crossed it on p1 and was left to the engine (the tunnel is the
	// engine's): the fast path saw it, and forwarded none of it.
	if vpne2e.FastPathForced() {
		fc := fastCounters(t, srv, 1)
		t.Logf("p1 fast path: %v", fc)
		if fc["fast_punt_next_hop"] == 0 || fc["fast_forwarded"] != 0 {
			t.Errorf("p1 fast path: punt_next_hop %d (want > 0: tunnel-bound), forwarded %d (want 0)", fc["fast_punt_next_hop"], fc["fast_forwarded"])
		}
	}
}

// TestCiphers: the same with each data cipher, the client offering only
// that one.
func TestCiphers(t *testing.T) {
	l, _ := setup(t, 1, vpne2e.ServerOptions{})
	var c *vpne2e.Client
	for _, cipher := range []string{"AES-128-GCM", "AES-256-GCM", "CHACHA20-POLY1305"} {
		t.Run(cipher, func(t *testing.T) {
			if c != nil {
				c.Stop() // explicit-exit-notify is not set: the server reaps by timeout
			}
			c = connect(t, l, 0, pki.Profile{Name: "ciph-" + strings.ToLower(cipher[:3]) + fmt.Sprint(len(cipher)), Ciphers: cipher})
			if got := c.Cipher(); got != cipher {
				t.Fatalf("negotiated cipher %q, want %q", got, cipher)
			}
			transfer(t, l, c, 50*mb)
		})
	}
}

// TestTLSAuth: tls-auth instead of tls-crypt on the control channel.
func TestTLSAuth(t *testing.T) {
	l, _ := setup(t, 1, vpne2e.ServerOptions{TLSAuth: true})
	c := connect(t, l, 0, pki.Profile{TLSAuth: true})
	if b, err := os.ReadFile(c.Profile); err != nil || !strings.Contains(string(b), "<tls-auth>") || strings.Contains(string(b), "<tls-crypt>") {
		t.Fatalf("the client profile is not a tls-auth profile (%v)", err)
	}
	transfer(t, l, c, 50*mb)
}

// TestRenegotiation: with `reneg-sec 10` on the client, a 40 s iperf3
// test each way (IPv4 up, IPv6 down, at once) completes across at least
// three data-key renegotiations, and the client never restarts.
func TestRenegotiation(t *testing.T) {
	l, srv := setup(t, 1, vpne2e.ServerOptions{})
	c := connect(t, l, 0, pki.Profile{Extra: []string{"reneg-sec 10"}})
	type res struct {
		r   vpne2e.IperfResult
		err error
	}
	// Sample the server's neighbour-hold drops every 5 s: when they grow
	// says whether they are a start-up burst or a steady leak.
	stopSampling := make(chan struct{})
	sampled := make(chan []uint64, 1)
	go func() {
		var seq []uint64
		defer func() { sampled <- seq }()
		for i := 0; i < 20; i++ {
			if s, err := status.Fetch(srv.Status, time.Second); err == nil {
				seq = append(seq, s.Drops["neighbour_full"])
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
	up, down := make(chan res, 1), make(chan res, 1)
	go func() { r, err := vpne2e.Iperf(c.NS, vpne2e.LANHost4, 0, "-t", "40"); up <- res{r, err} }()
	go func() { r, err := vpne2e.Iperf(c.NS, vpne2e.LANHost6, 1, "-t", "40", "-R"); down <- res{r, err} }()
	for name, ch := range map[string]chan res{"IPv4 up": up, "IPv6 down": down} {
		r := <-ch
		if r.err != nil {
			t.Errorf("%s: %v", name, r.err)
			continue
		}
		if r.r.Seconds < 39 || r.r.Bytes == 0 {
			t.Errorf("%s: %d bytes in %.1f s, want a 40 s test", name, r.r.Bytes, r.r.Seconds)
		}
		t.Logf("%s: %d MiB in %.1f s (%.0f Mb/s, %d retransmits)", name, r.r.Bytes>>20, r.r.Seconds, r.r.Mbps, r.r.Retrans)
	}
	close(stopSampling)
	t.Logf("server neighbour_full drops every 5 s: %v", <-sampled)
	logDrops(t, srv)
	logClientDrops(t, c)
	// The client installed a new data key at least three times, the
	// server saw key_ids go 1, 2, 3, … (its "key N established" lines),
	// and the tunnel never restarted.
	if n := c.KeyInstalls() - 1; n < 3 {
		t.Errorf("client installed %d renegotiated data keys, want ≥ 3", n)
	}
	ids := srv.KeyIDs()
	t.Logf("client %d data keys, server key_ids %v", c.KeyInstalls(), ids)
	if len(ids) < 4 {
		t.Errorf("server established keys %v, want key_id 0 and ≥ 3 more", ids)
	}
	for i, id := range ids {
		if want := keyIDAfter(i); id != want {
			t.Errorf("server key_ids %v: #%d is %d, want %d", ids, i, id, want)
			break
		}
	}
	log := c.LogText()
	if n := strings.Count(log, "Initialization Sequence Completed"); n != 1 || strings.Contains(log, "process restarting") {
		t.Errorf("the client restarted its tunnel (%d initializations)", n)
	}
}

// keyIDAfter is the key_id of the i-th key of a session: 0, then 1..7
// round and round (key_id 0 is only ever the first).
func keyIDAfter(i int) int {
	if i == 0 {
		return 0
	}
	return (i-1)%7 + 1
}

// TestClientRestart: a client killed without notice (SIGKILL) and started
// again reconnects, gets its addresses and passes traffic; the server
// keeps serving it while the dead session waits for its ping-restart.
func TestClientRestart(t *testing.T) {
	l, srv := setup(t, 1, vpne2e.ServerOptions{})
	c := connect(t, l, 0, pki.Profile{})
	transfer(t, l, c, 5*mb)
	first := c.V4
	c.Kill()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitUp(45 * time.Second); err != nil {
		t.Fatal(err)
	}
	checkPushed(t, c)
	t.Logf("reconnected: %v → %v, %v", first, c.V4, c.V6)
	transfer(t, l, c, 50*mb)
	if n := strings.Count(c.LogText(), "Initialization Sequence Completed"); n != 2 {
		t.Errorf("client initialized %d times, want 2", n)
	}
	// The new session is a peer of its own, addressed as tun0 says.
	found := false
	for _, p := range peers(t, srv) {
		for _, a := range p.Addrs {
			found = found || a == c.V4.String()
		}
	}
	if !found {
		t.Errorf("no server peer holds the reconnected client's address %v: %+v", c.V4, peers(t, srv))
	}
}

// TestTenClients: ten clients, each in its own namespace behind one
// switch, connect at once and each passes checksummed traffic both ways
// over IPv4 and IPv6 while the others do.
func TestTenClients(t *testing.T) {
	const n = 10
	l, srv := setup(t, n, vpne2e.ServerOptions{})
	clients := make([]*vpne2e.Client, n)
	for i := range clients {
		profile, err := l.NewProfile(i, pki.Profile{})
		if err != nil {
			t.Fatal(err)
		}
		if clients[i], err = l.StartClient(i, profile); err != nil {
			t.Fatal(err)
		}
	}
	v4s, v6s := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	for _, c := range clients {
		if err := c.WaitUp(60 * time.Second); err != nil {
			t.Fatal(err)
		}
		checkPushed(t, c)
		v4s[c.V4], v6s[c.V6] = true, true
	}
	if len(v4s) != n || len(v6s) != n {
		t.Fatalf("clients share addresses: %d distinct IPv4, %d distinct IPv6", len(v4s), len(v6s))
	}
	if ps := peers(t, srv); len(ps) != n {
		t.Fatalf("server has %d peers, want %d", len(ps), n)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// t.Fatal must stay on the test's goroutine: report errors.
			errs <- transferErr(l, c, 5*mb, func(string, ...any) {})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for _, p := range peers(t, srv) {
		if p.Rx.Bytes < 10*mb || p.Tx.Bytes < 10*mb {
			t.Errorf("peer %s moved rx %d tx %d bytes, want ≥ 10 MiB each", p.Name, p.Rx.Bytes, p.Tx.Bytes)
		}
	}
}

// TestIPv6Transport: a client reaching ovfwd over IPv6 (the dual-stack
// listener; outer packets IPv6 both ways through the AF_XDP data path)
// gets its addresses and passes traffic over both inner families.
func TestIPv6Transport(t *testing.T) {
	l, srv := setup(t, 1, vpne2e.ServerOptions{})
	remote := netip.AddrPortFrom(vpne2e.ServerAddr6, vpne2e.VPNPort).String()
	c := connect(t, l, 0, pki.Profile{Remotes: []string{remote}})
	transfer(t, l, c, 20*mb)
	ps := peers(t, srv)
	if len(ps) != 1 {
		t.Fatalf("server has %d peers, want 1", len(ps))
	}
	real, err := netip.ParseAddrPort(ps[0].Real)
	if err != nil || real.Addr() != vpne2e.ClientAddr6(0) {
		t.Errorf("peer's real address %q, want [%v]:port (%v)", ps[0].Real, vpne2e.ClientAddr6(0), err)
	}
	if ps[0].Rx.Bytes < 40*mb || ps[0].Tx.Bytes < 40*mb {
		t.Errorf("peer counters rx %d tx %d bytes, want ≥ 40 MiB each", ps[0].Rx.Bytes, ps[0].Tx.Bytes)
	}
}

// TestRoutedBesideTunnel: plain routed UDP from a client's outside address
// to the LAN host, beside the VPN, arrives whole. With the suite's fast
// path forced on (FastPathEnv): while the client keeps its default
// checksum offload its datagrams' checksums are unfinished, and the fast
// path finishes and forwards them (none left to the engine); with the
// client's offload off it forwards them as they are. With the default
// (auto, veths) it never sends out of a veth and the workers do.
func TestRoutedBesideTunnel(t *testing.T) {
	l, srv := setup(t, 1, vpne2e.ServerOptions{})
	c := l.Clients[0]
	nstest.Run(t, c, "ip", "route", "add", vpne2e.LANHost4.String()+"/32", "via", vpne2e.ServerAddr.String())
	// Datagrams of 4 to 1,400 bytes (odd and even lengths, so that
	// finishing a checksum covers every tail), each saying what it must
	// hold; the LAN host counts those that arrive intact. Its kernel drops
	// one whose checksum is wrong (UDP InCsumErrors, checked below).
	payload := func(seq uint32) []byte {
		b := make([]byte, 4+int(seq*37%1397))
		binary.BigEndian.PutUint32(b, seq)
		for i := 4; i < len(b); i++ {
			b[i] = byte(int(seq)*7 + i*13)
		}
		return b
	}
	var got, bad atomic.Int64
	var lc *net.UDPConn
	if err := l.LAN.Do(func() (err error) {
		lc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(vpne2e.LANHost4, 9009)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			k, err := lc.Read(buf)
			if err != nil {
				return
			}
			if k >= 4 && bytes.Equal(buf[:k], payload(binary.BigEndian.Uint32(buf))) {
				got.Add(1)
			} else {
				bad.Add(1)
			}
		}
	}()
	const n = 300
	var seq uint32
	send := func(want int64) {
		t.Helper()
		if err := c.Do(func() error {
			s, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: vpne2e.LANHost4.AsSlice(), Port: 9009})
			if err != nil {
				return err
			}
			defer s.Close()
			for range n {
				seq++
				if _, err := s.Write(payload(seq)); err != nil {
					return err
				}
				time.Sleep(time.Millisecond)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(5 * time.Second); got.Load() < want && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		// The first datagrams wait for the LAN host's address to resolve
		// (the engine holds a few), so a handful may be lost.
		if g := got.Load(); g < want-10 || bad.Load() != 0 {
			t.Fatalf("the LAN host received %d of %d datagrams intact, %d damaged", g, want, bad.Load())
		}
		if e := udpCsumErrors(t, l.LAN); e != 0 {
			t.Fatalf("the LAN host dropped %d datagrams with a bad checksum", e)
		}
	}
	// The client keeps its veth's default offloads: its datagrams leave c0
	// with the checksum unfinished (CHECKSUM_PARTIAL), which the fast path
	// finishes itself.
	send(n)
	fc := fastCounters(t, srv, 0)
	t.Logf("p0 fast path, client offloads on: %v", fc)
	if vpne2e.FastPathForced() {
		if fc["fast_csum_finished"] < n/2 || fc["fast_csum_finished"] > fc["fast_forwarded"] || fc["fast_punt_csum_partial"] != 0 {
			t.Errorf("fast path forced on, client checksum offload on: finished %d unfinished checksums of %d datagrams, forwarded %d, punted %d for them; want at least %d finished and forwarded, none punted",
				fc["fast_csum_finished"], n, fc["fast_forwarded"], fc["fast_punt_csum_partial"], n/2)
		}
		// Offload off: finished checksums, forwarded as they are.
		nstest.Run(t, c, "ethtool", "-K", "c0", "tx", "off")
		before := fc
		send(2 * n)
		fc = fastCounters(t, srv, 0)
		t.Logf("p0 fast path, client checksum offload off: %v", fc)
		if d := fc["fast_forwarded"] - before["fast_forwarded"]; d < n/2 {
			t.Errorf("fast path forced on but it forwarded %d of %d datagrams with finished checksums", d, n)
		}
		if d := fc["fast_csum_finished"] - before["fast_csum_finished"]; d != 0 {
			t.Errorf("the fast path finished %d checksums that the client had finished", d)
		}
	} else if fc["fast_forwarded"] != 0 {
		t.Errorf("fast_path = auto sent %d frames out of a veth", fc["fast_forwarded"])
	}
}

// udpCsumErrors is ns's UDP InCsumErrors (/proc/net/snmp).
func udpCsumErrors(t *testing.T, ns *netns.NS) int64 {
	t.Helper()
	var head []string
	for _, line := range strings.Split(nstest.Run(t, ns, "cat", "/proc/net/snmp"), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i, h := range head {
			if h == "InCsumErrors" && i < len(f) {
				v, err := strconv.ParseInt(f[i], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
	}
	t.Fatal("no UDP InCsumErrors in /proc/net/snmp")
	return 0
}
