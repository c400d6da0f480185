package adversary_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// The bounds every attack is held to, over the daemon's figures before
// the first one: its resident memory and its goroutines (go_goroutines).
const (
	rssBound       = 32 << 20
	goroutineBound = 100
)

// lab is one daemon with username/password logins (good/pw) and a CRL,
// a stock client in client namespace 0, and the attacker's namespace 1.
type lab struct {
	l       *vpne2e.Lab
	srv     *vpne2e.Server
	metrics string
	stock   *vpne2e.Client
	creds   string // the stock client's auth-user-pass file
	// profiles for ovfwd's own client, in the attacker's namespace
	profile  func(name string) control.ClientConfig
	revoked  control.ClientConfig // a certificate on the CRL
	dir      string
	v2Server string // the tls-crypt-v2 server key, or ""
}

// v2ClientKey makes a tls-crypt-v2 client key as openvpn does.
func (a *lab) v2ClientKey(t *testing.T, name string) []byte {
	path := filepath.Join(a.dir, name+".v2key")
	if out, err := exec.Command("openvpn", "--tls-crypt-v2", a.v2Server, "--genkey", "tls-crypt-v2-client", path).CombinedOutput(); err != nil {
		t.Fatalf("openvpn --genkey tls-crypt-v2-client: %v\n%s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newLab(t *testing.T) *lab { return newLabV2(t, false) }

// newLabV2 with v2 serves tls-crypt-v2 instead of tls-crypt (a.v2Server
// is the server key; every client needs its own key from it).
func newLabV2(t *testing.T, v2 bool) *lab {
	nstest.RequireRoot(t)
	for _, tool := range []string{"openvpn", "ping", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make deps installs it)", tool)
		}
	}
	bin := nstest.BuildOvfwd(t)
	dir := unittest.TempDir(t, unittest.Load(t))
	l, err := vpne2e.NewLab("adv", dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	l.Logf = t.Logf
	t.Cleanup(func() {
		l.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "ovfwd.log"))
			t.Logf("ovfwd.log (tail):\n%s", tail(string(b), 6000))
		}
	})
	a := &lab{l: l, metrics: filepath.Join(dir, "run", "metrics.sock")}
	remote := netip.AddrPortFrom(vpne2e.ServerAddr, vpne2e.VPNPort).String()
	a.profile = func(name string) control.ClientConfig {
		path, err := pki.Client(l.PKI, name, remote)
		if err != nil {
			t.Fatal(err)
		}
		return parseProfile(t, path, "good", "pw")
	}
	// rv's certificate is revoked before the daemon starts.
	rvPath, err := pki.Client(l.PKI, "rv", remote)
	if err != nil {
		t.Fatal(err)
	}
	a.revoked = parseProfile(t, rvPath, "good", "pw")
	crlPath, err := pki.Revoke(l.PKI, "rv", "")
	if err != nil {
		t.Fatal(err)
	}
	crl := filepath.Join(dir, "crl.pem")
	if err := os.Rename(crlPath, crl); err != nil {
		t.Fatal(err)
	}
	script := verifyScript(t)
	opts := vpne2e.ServerOptions{Ciphers: []string{"AES-256-GCM"}, MaxPeers: 64, MetricsSocket: a.metrics,
		VPN: fmt.Sprintf("auth_user_pass_verify = [%q]\nauth_fail_limit = 5\ncrl = %q\nhandshake_rate = 1000", script, crl)}
	stockPKI := pki.Profile{Name: "stock"}
	a.dir = dir
	if v2 {
		a.v2Server = filepath.Join(l.PKI, "adversary-v2-server.key") // the daemon's user reads the PKI directory
		if out, err := exec.Command("openvpn", "--genkey", "tls-crypt-v2-server", a.v2Server).CombinedOutput(); err != nil {
			t.Fatalf("openvpn --genkey tls-crypt-v2-server: %v\n%s", err, out)
		}
		opts.TLSCryptV2 = a.v2Server
		stockPKI.TLSCryptV2 = a.v2ClientKey(t, "stock")
	}
	a.srv, err = l.StartOvfwd(bin, opts)
	if err != nil {
		t.Fatal(err)
	}
	a.creds = filepath.Join(dir, "stock-creds")
	if err := os.WriteFile(a.creds, []byte("good\npw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stockPKI.Extra = []string{"auth-user-pass " + a.creds}
	stockProfile, err := l.NewProfile(0, stockPKI)
	if err != nil {
		t.Fatal(err)
	}
	if a.stock, err = l.StartClient(0, stockProfile); err != nil {
		t.Fatal(err)
	}
	if err := a.stock.WaitUp(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	a.stock.Stop()
	return a
}

// verifyScript admits good/pw and refuses everyone else after 200 ms.
func verifyScript(t *testing.T) string {
	dir, err := os.MkdirTemp("", "ovfwd-adversary-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "verify.sh")
	script := "#!/bin/sh\n[ \"$(sed -n 1p \"$1\"):$(sed -n 2p \"$1\")\" = good:pw ] && exit 0\nsleep 0.2\nexit 1\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func parseProfile(t *testing.T, path, user, pass string) control.ClientConfig {
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := control.ParseProfile(text)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Username, cfg.Password, cfg.NoReconnect = user, pass, true
	return cfg
}

// dial connects ovfwd's client from the attacker's namespace.
func (a *lab) dial(t *testing.T, cfg control.ClientConfig, d time.Duration) (*control.Client, error) {
	var c *control.Client
	err := a.l.Clients[1].Do(func() (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		c, err = control.Dial(ctx, cfg)
		return err
	})
	if c != nil {
		t.Cleanup(c.Drop)
	}
	return c, err
}

// nft installs (or with rules == "" removes) a filter on the attacker's
// input from the server.
func (a *lab) nft(t *testing.T, rule string) {
	t.Helper()
	_, _ = a.l.Clients[1].Run("nft", "delete", "table", "inet", "adv")
	if rule == "" {
		return
	}
	if out, err := a.l.Clients[1].Run("nft", "add table inet adv; add chain inet adv in { type filter hook input priority 0; }; add rule inet adv in "+rule); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
}

// figures are the daemon's resident memory and goroutines.
func (a *lab) figures(t *testing.T) (rss, goroutines float64) {
	rss, goroutines, err := a.scrape()
	if err != nil {
		t.Fatal(err)
	}
	return rss, goroutines
}

func (a *lab) scrape() (rss, goroutines float64, err error) {
	// No keep-alive: each idle connection would hold a goroutine of the
	// daemon's and count against the figure measured.
	hc := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", a.metrics)
	}}}
	resp, err := hc.Get("http://ovfwd/metrics")
	if err != nil {
		return 0, 0, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "process_resident_memory_bytes":
			rss = v
		case "go_goroutines":
			goroutines = v
		}
	}
	if rss == 0 || goroutines == 0 {
		return 0, 0, fmt.Errorf("metrics lack process_resident_memory_bytes or go_goroutines")
	}
	return rss, goroutines, nil
}

func (a *lab) counter(t *testing.T, name string) uint64 {
	s, err := status.Fetch(a.srv.Status, 2*time.Second)
	if err != nil || s.VPN == nil {
		t.Fatalf("status: %v", err)
	}
	return s.VPN.Drops["control_"+name]
}

var received = regexp.MustCompile(`(\d+) received`)

// attack is one misbehaviour: start begins it in the background and
// returns what stops it.
type attack struct {
	name    string
	counter string // the status counter that names it
	start   func(t *testing.T, a *lab) (stop func())
}

func TestAdversaries(t *testing.T) {
	a := newLab(t)
	baseRSS, baseG := a.figures(t)
	t.Logf("before: rss %.1f MiB, %v goroutines; bounds +%d MiB, +%d goroutines", baseRSS/(1<<20), baseG, rssBound>>20, goroutineBound)
	for _, at := range attacks {
		t.Run(at.name, func(t *testing.T) { a.run(t, at, baseRSS, baseG) })
	}
	t.Run("stock-client-renegotiates", func(t *testing.T) { stockRenegotiates(t, a) })
}

// run holds one attack to the suite's bounds over the daemon's figures
// before the first attack.
func (a *lab) run(t *testing.T, at attack, baseRSS, baseG float64) {
	before := a.counter(t, at.counter)
	stop := at.start(t, a)
	var peakRSS, peakG atomic.Uint64
	sampling := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			rss, g, err := a.scrape()
			if err != nil {
				t.Error(err)
				return
			}
			peakRSS.Store(max(peakRSS.Load(), uint64(rss)))
			peakG.Store(max(peakG.Load(), uint64(g)))
			select {
			case <-sampling:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	// A stock client connects while it runs, and its tunnel
	// keeps passing traffic.
	if err := a.stock.Start(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	upErr := a.stock.WaitUp(5 * time.Second)
	took := time.Since(began)
	var lost int
	if upErr == nil {
		out, _ := a.stock.NS.Run("ping", "-c", "200", "-i", "0.05", "-W", "1", "-q", vpne2e.LANHost4.String())
		m := received.FindStringSubmatch(out)
		got := 0
		if m != nil {
			got, _ = strconv.Atoi(m[1])
		}
		lost = 200 - got
	}
	moved := waitFor(20*time.Second, func() bool { return a.counter(t, at.counter) > before })
	stop()
	a.stock.Stop()
	close(sampling)
	wg.Wait()
	rss, g := float64(peakRSS.Load()), float64(peakG.Load())
	t.Logf("stock client up in %v, %d of 200 pings lost; peak rss %.1f MiB, %v goroutines; %s %d → %d",
		took.Round(10*time.Millisecond), lost, rss/(1<<20), g, at.counter, before, a.counter(t, at.counter))
	if upErr != nil {
		t.Errorf("the stock client did not connect within 5 s: %v", upErr)
	} else if lost > 2 {
		t.Errorf("the stock client's tunnel lost %d of 200 pings", lost)
	}
	if !moved {
		t.Errorf("counter control_%s did not move", at.counter)
	}
	if rss > baseRSS+rssBound || g > baseG+goroutineBound {
		t.Errorf("daemon peaked at %.1f MiB and %v goroutines, bounds %.1f MiB and %v", rss/(1<<20), g, (baseRSS+rssBound)/(1<<20), baseG+goroutineBound)
	}
}

// TestAdversaries ends with the other side of re-authorisation: a stock
// client that renegotiates every few seconds with its unchanged
// certificate and password stays up.
func stockRenegotiates(t *testing.T, a *lab) {
	profile, err := a.l.NewProfile(0, pki.Profile{Name: "stock-reneg", Extra: []string{"auth-user-pass " + a.creds, "reneg-sec 3"}})
	if err != nil {
		t.Fatal(err)
	}
	refused := a.counter(t, "reneg_refused")
	installs := a.stock.KeyInstalls() // the namespace's log so far
	c, err := a.l.StartClient(0, profile)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := c.WaitUp(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !waitFor(15*time.Second, func() bool { return c.KeyInstalls()-installs >= 3 }) {
		t.Fatalf("stock client installed %d data keys in 15 s with reneg-sec 3", c.KeyInstalls()-installs)
	}
	out, _ := c.NS.Run("ping", "-c", "20", "-i", "0.1", "-W", "1", "-q", vpne2e.LANHost4.String())
	if m := received.FindStringSubmatch(out); m == nil || m[1] != "20" {
		t.Errorf("after renegotiations: %s", out)
	}
	if n := a.counter(t, "reneg_refused"); n != refused {
		t.Errorf("reneg_refused moved %d → %d for an unchanged client", refused, n)
	}
}

var attacks = []attack{
	{"stream-flood", "ignored_text", func(t *testing.T, a *lab) func() {
		c, err := a.dial(t, a.profile("flooder"), 15*time.Second)
		if err != nil {
			t.Fatalf("attacker: %v", err)
		}
		junk := strings.Repeat("J", 1500)
		done := make(chan struct{})
		go func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if c.SendControl(junk) != nil {
					return
				}
				if i%64 == 63 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
		return func() { close(done); c.Drop() }
	}},
	{"half-open-flood", "half_open_source", func(t *testing.T, a *lab) func() {
		// The attacker sees the server's resets only: each connection
		// gets past the cookie and then stalls in TLS.
		a.nft(t, "udp sport 1194 @th,64,5 != 8 drop")
		cfg := a.profile("halfopen")
		var wg sync.WaitGroup
		for range 300 { // more than the 256 half-open slots
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = a.dial(t, cfg, 3*time.Second) }()
		}
		return func() { wg.Wait(); a.nft(t, "") }
	}},
	{"never-reading", "handshake_timeout", func(t *testing.T, a *lab) func() {
		c, err := a.dial(t, a.profile("deaf"), 15*time.Second)
		if err != nil {
			t.Fatalf("attacker: %v", err)
		}
		a.nft(t, "udp sport 1194 drop")
		c.Renegotiate()
		return func() { a.nft(t, ""); c.Drop() }
	}},
	{"reneg-other-certificate", "reneg_refused", func(t *testing.T, a *lab) func() {
		c, err := a.dial(t, a.profile("swapper"), 15*time.Second)
		if err != nil {
			t.Fatalf("attacker: %v", err)
		}
		other := a.profile("someone-else")
		c.SetCredentials(other.Certificate, "good", "pw")
		c.Renegotiate()
		return c.Drop
	}},
	{"reneg-revoked-certificate", "reneg_refused", func(t *testing.T, a *lab) func() {
		c, err := a.dial(t, a.profile("revoker"), 15*time.Second)
		if err != nil {
			t.Fatalf("attacker: %v", err)
		}
		c.SetCredentials(a.revoked.Certificate, "good", "pw")
		c.Renegotiate()
		return c.Drop
	}},
	{"bad-logins", "login_limited", func(t *testing.T, a *lab) func() {
		cfg := a.profile("guesser")
		cfg.Password = "wrong"
		var wg sync.WaitGroup
		for range 200 {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = a.dial(t, cfg, 10*time.Second) }()
		}
		return wg.Wait
	}},
}

func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
