package metrics

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

const dashboardFile = "../../packaging/grafana/ovfwd-dashboard.json"

type dashboardQuery struct {
	panel, expr, legend string
}

func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr, LegendFormat string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var qs []dashboardQuery
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			qs = append(qs, dashboardQuery{p.Title, q.Expr, q.LegendFormat})
		}
	}
	return qs
}

// Every query of the shipped Grafana dashboard, run by a real Prometheus
// (Debian's) that scrapes a live metrics endpoint, returns series, and
// each series has the labels its legend shows: a renamed metric or label
// leaves a panel empty here before it does on an operator's screen.
func TestDashboardQueriesOnLiveScrape(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed (.ci/install-deps installs it)")
	}
	// Counters move between scrapes, as on a busy appliance.
	var scrapes atomic.Uint64
	srv, err := Listen("tcp", "127.0.0.1:0", func() status.Snapshot {
		n := scrapes.Add(1)
		s := sample()
		s.Ports[0].Rx.Bytes += 1000 * n
		s.Workers[0].Polls += 100 * n
		return s
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ovfwd
    static_configs:
      - targets: [%q]
`, srv.Addr().String())), 0o644); err != nil {
		t.Fatal(err)
	}
	web := freePort(t)
	cmd := exec.Command(prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web, "--log.level=warn")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", log.String())
		}
	})

	queries := append(dashboardQueries(t), alertSelectors(t)...)
	legendLabel := regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)
	pending := queries
	for end := time.Now().Add(60 * time.Second); len(pending) > 0 && time.Now().Before(end); {
		time.Sleep(time.Second)
		var still []dashboardQuery
		for _, q := range pending {
			if res, err := promQuery(web, q.expr); err != nil || len(res) == 0 {
				still = append(still, q)
			}
		}
		pending = still
	}
	for _, q := range pending {
		res, err := promQuery(web, q.expr)
		t.Errorf("panel %q: %s: no series (err %v, %d results)", q.panel, q.expr, err, len(res))
	}
	for _, q := range queries {
		res, _ := promQuery(web, q.expr)
		for _, series := range res {
			for _, m := range legendLabel.FindAllStringSubmatch(q.legend, -1) {
				if _, ok := series[m[1]]; !ok {
					t.Errorf("panel %q: %s: a series has no label %q for its legend: %v", q.panel, q.expr, m[1], series)
				}
			}
		}
	}
	t.Logf("%d dashboard queries and alert selectors checked over %d scrapes", len(queries), scrapes.Load())
}

// alertSelectors are the series selectors of the shipped alert rules
// (their thresholds keep the rules themselves quiet on a healthy scrape):
// each must find series.
func alertSelectors(t *testing.T) []dashboardQuery {
	t.Helper()
	b, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var qs []dashboardQuery
	for _, m := range regexp.MustCompile(`(?m)^\s*expr: (.*)$`).FindAllStringSubmatch(string(b), -1) {
		for _, sel := range regexp.MustCompile(`\b(?:ovfwd_\w+|up)(?:\{[^}]*\})?`).FindAllString(m[1], -1) {
			qs = append(qs, dashboardQuery{panel: "alert rule " + m[1], expr: sel})
		}
	}
	if len(qs) < 5 {
		t.Fatalf("%d selectors in %s", len(qs), alertRules)
	}
	return qs
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// promQuery runs a dashboard expression at the current time, with
// Grafana's variables as it would expand them for "All" instances, and
// returns each result series' labels.
func promQuery(addr, expr string) ([]map[string]string, error) {
	expr = strings.NewReplacer(`$__rate_interval`, "1m", `$instance`, ".*").Replace(expr)
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status, Error string
		Data          struct {
			Result []struct {
				Metric map[string]string
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", expr, r.Error)
	}
	var out []map[string]string
	for _, s := range r.Data.Result {
		out = append(out, s.Metric)
	}
	return out, nil
}
