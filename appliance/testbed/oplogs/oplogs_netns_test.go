package oplogs

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// tag names this package's namespaces.
const tag = "olg"

// TestOperatorEvents: client 0 (mallory) logs in with a wrong password,
// client 1 (alice) with the right one and is then killed from the status
// socket. The daemon's log has event=auth_failed for mallory (a warning,
// her address first), event=connect, event=killed and event=disconnect
// with traffic for alice; fail2ban-regex with the shipped filter bans
// mallory's address only; the metrics endpoint counts the refused login in
// ovfwd_vpn_sessions_refused_total{reason="auth_failed"}, which the shipped
// alert rule reads, and alice's traffic under her name and client id.
func TestOperatorEvents(t *testing.T) {
	nstest.RequireRoot(t)
	for _, tool := range []string{"openvpn", "ping", "fail2ban-regex"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (.ci/install-deps installs it)", tool)
		}
	}
	bin := nstest.BuildOvfwd(t)
	dir := unittest.TempDir(t, unittest.Load(t))
	l, err := vpne2e.NewLab(tag, dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	l.Logf = t.Logf
	t.Cleanup(func() {
		l.Close()
		if t.Failed() {
			for _, p := range []string{"ovfwd.log", "client0.log", "client1.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, p))
				t.Logf("--- %s (end):\n%s", p, tail(string(b), 4000))
			}
		}
	})
	metricsSock := filepath.Join(dir, "run", "metrics.sock")
	srv, err := l.StartOvfwd(bin, vpne2e.ServerOptions{
		Ciphers: []string{"AES-256-GCM"},
		// The password file is the last argument: its second line must be
		// "secret".
		VPN:           `auth_user_pass_verify = ["/bin/sh", "-c", "test \"$(sed -n 2p \"$1\")\" = secret", "sh"]`,
		MetricsSocket: metricsSock,
	})
	if err != nil {
		t.Fatal(err)
	}
	start := func(i int, name, password string) *vpne2e.Client {
		up := filepath.Join(dir, name+".up")
		if err := os.WriteFile(up, []byte(name+"\n"+password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		profile, err := l.NewProfile(i, pki.Profile{Name: name, Extra: []string{"auth-user-pass " + up}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := l.StartClient(i, profile)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	logText := func() string { b, _ := os.ReadFile(srv.Log); return string(b) }
	waitLog := func(re string) string {
		t.Helper()
		r := regexp.MustCompile(re)
		for end := time.Now().Add(45 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if m := r.FindString(logText()); m != "" {
				return m
			}
		}
		t.Fatalf("no line matching %s in the daemon's log", re)
		return ""
	}

	mallory := start(0, "mallory", "wrong")
	line := waitLog(`(?m)^.*event=auth_failed.*$`)
	mallory.Kill()
	want := `level=WARN msg="vpn auth failed" event=auth_failed src=` + regexp.QuoteMeta(vpne2e.ClientAddr(0).String()) + `:\d+ cn=mallory user=mallory reason=`
	if !regexp.MustCompile(want).MatchString(line) {
		t.Errorf("auth failure line %q does not match %s", line, want)
	}

	alice := start(1, "alice", "secret")
	if err := alice.WaitUp(45 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.NS.Run("ping", "-c", "3", "-i", "0.2", "-W", "2", vpne2e.LANHost4.String()); err != nil {
		t.Fatalf("alice cannot reach the LAN: %v", err)
	}
	src := regexp.QuoteMeta(vpne2e.ClientAddr(1).String()) + `:\d+`
	waitLog(`event=connect src=` + src + ` cn=alice user=alice `)

	fams := scrapeUnix(t, metricsSock)
	if v := sample(fams, "ovfwd_vpn_sessions_refused_total", "reason", "auth_failed"); v < 1 {
		t.Errorf("ovfwd_vpn_sessions_refused_total{reason=\"auth_failed\"} = %v after a refused login", v)
	}
	if v := sample(fams, "ovfwd_vpn_peer_rx_bytes_total", "peer", "alice"); v <= 0 {
		t.Errorf("alice's rx bytes %v after pings", v)
	}
	if f := fams["ovfwd_worker_polls_total"]; f == nil || len(f.Metric) == 0 {
		t.Error("no ovfwd_worker_polls_total for the worker stall alert")
	}

	if n, err := status.Kill(srv.Status, "alice", true, 3*time.Second); err != nil || n != 1 {
		t.Fatalf("kill alice: %d, %v", n, err)
	}
	waitLog(`level=INFO msg="vpn client killed" event=killed src=` + src + ` cn=alice reason=`)
	down := waitLog(`event=disconnect src=` + src + ` cn=alice user=alice .*`)
	if m := regexp.MustCompile(`bytes_in=(\d+) bytes_out=(\d+) duration=\S+`).FindStringSubmatch(down); m == nil || m[1] == "0" || m[2] == "0" {
		t.Errorf("disconnect line without traffic: %q", down)
	}

	filter, err := filepath.Abs("../../../packaging/fail2ban/filter.d/ovfwd.conf")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("fail2ban-regex", "--raw", "-o", "ip", srv.Log, filter).CombinedOutput()
	if err != nil {
		t.Fatalf("fail2ban-regex: %v\n%s", err, out)
	}
	ips := strings.Fields(string(out))
	if len(ips) == 0 {
		t.Fatalf("fail2ban-regex matched nothing in the daemon's log")
	}
	for _, ip := range ips {
		if ip != vpne2e.ClientAddr(0).String() {
			t.Errorf("fail2ban-regex would ban %s; only mallory (%s) failed", ip, vpne2e.ClientAddr(0))
		}
	}
	t.Logf("fail2ban-regex: %d matches, all %s; %s", len(ips), vpne2e.ClientAddr(0), line)
}

func scrapeUnix(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}}
	resp, err := c.Get("http://ovfwd/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// sample is the value of the first series of family name whose label
// key has value val; 0 when there is none.
func sample(fams map[string]*dto.MetricFamily, name, key, val string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == key && l.GetValue() == val {
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
