package metrics

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/ovfwd/ovfwd/appliance/status"
)

func sample() status.Snapshot {
	return status.Snapshot{
		Version: "v1.2.3", Started: time.Unix(1700000000, 0), Mode: "router", Poll: "adaptive",
		Ports: []status.Port{
			{Name: `we"ird`, Driver: "afxdp", Link: "up", Rx: status.Traffic{Packets: 15, Bytes: 960}, Tx: status.Traffic{Packets: 7, Bytes: 448},
				Queues:  []status.Queue{{Queue: 0, Mode: "zero-copy, native XDP"}, {Queue: 1, Mode: "copy, generic XDP"}},
				Backend: status.Counters{"tx_full": 1, "kick_errors": 0, "fast_forwarded": 5, "fast_bytes": 700, "fast_punt_ttl": 1}},
			{Name: "p1", Driver: "vfio", Link: "down", Rx: status.Traffic{Packets: 1 << 40, Bytes: 3}},
		},
		Drops: status.Counters{"no_route": 3, "malformed": 0},
		Engine: status.Counters{"copies": 4, "icmp_sent": 5, "punts": 6, "learn_dropped": 2,
			"neighbour_evicted": 3, "neighbours_mirrored": 7, "neighbours_pinned": 1},
		Routes:     status.Routes{Connected: 2, Static: 2, Kernel: 1, Tunnel: 3, Uplink: 1, Total: 8},
		Neighbours: 9,
		Reload:     status.Reload{Count: 2, Failed: 1},
		VPN: &status.VPN{
			Peers: []status.VPNPeer{
				{Name: "alice", ClientID: 4, Rx: status.Traffic{Packets: 10, Bytes: 99}, Tx: status.Traffic{Packets: 11, Bytes: 120}, LastSeen: time.Unix(1700000100, 500e6)},
				{Name: "bob", ClientID: 7, Rx: status.Traffic{Packets: 1, Bytes: 2}},
			},
			Drops: status.Counters{"data_replay": 8, "control_wrap_auth": 2, "control_auth_failed": 3},
		},
		Uplinks: []status.Uplink{
			{Name: "site-b", State: "connected", Counters: status.Counters{"tx_packets": 12, "rx_packets": 13, "tx_down": 0}},
			{Name: "site-c", State: "connecting", Counters: status.Counters{"attempts": 4}},
		},
		NAT: &status.NAT{
			Sessions: status.Counters{"tcp": 3, "udp": 2, "icmp": 1},
			Counters: status.Counters{"translated": 100, "hairpinned": 2, "sessions_created": 9, "sessions_expired": 3,
				"blocks_allocated": 5, "blocks_released": 4, "block_logs_lost": 0, "mappings": 4, "clients": 1, "blocks": 1},
			Drops:   status.Counters{"no_port": 1},
			Clients: []status.NATClient{{Inside: "198.19.0.2", Outside: "198.18.1.1", Blocks: []string{"1024-1279"}, Ports: 256}},
		},
		ACL: []status.ACL{{Name: "contractors", Ingress: []string{"group:contractors"}, Default: "deny", DefaultPackets: 7,
			Rules: []status.ACLRule{{Name: "web", Action: "allow", Packets: 40}, {Name: "ssh", Action: "reject", Packets: 2}}}},
		Ready:   true,
		Workers: []status.Worker{{Queue: 0, CPU: 1, Polls: 12345}},
		Export:  &status.Export{Table: 200, Protocol: 201, Routes: []string{"198.19.0.0/24", "198.18.186.0/24"}},
	}
}

// gather collects c once through a registry, which also checks the
// metrics against Describe and rejects duplicate label sets.
func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// value is the sample of family name whose labels are exactly the given
// name, value pairs; ok is false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		if len(m.Label) != len(labels)/2 {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.Counter.GetValue(), true
		case dto.MetricType_GAUGE:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func TestCollectorEqualsSnapshot(t *testing.T) {
	s := sample()
	fams := gather(t, NewCollector(func() status.Snapshot { return s }))
	check := func(want float64, name string, labels ...string) {
		t.Helper()
		got, ok := value(fams, name, labels...)
		if !ok {
			t.Errorf("no %s%q", name, labels)
		} else if got != want {
			t.Errorf("%s%q = %v, want %v", name, labels, got, want)
		}
	}
	for _, p := range s.Ports {
		check(float64(p.Rx.Packets), "ovfwd_port_rx_packets_total", "port", p.Name)
		check(float64(p.Rx.Bytes), "ovfwd_port_rx_bytes_total", "port", p.Name)
		check(float64(p.Tx.Packets), "ovfwd_port_tx_packets_total", "port", p.Name)
		check(float64(p.Tx.Bytes), "ovfwd_port_tx_bytes_total", "port", p.Name)
		for k, v := range p.Backend {
			switch k {
			case "fast_bytes":
				check(float64(v), "ovfwd_port_fast_bytes_total", "port", p.Name)
			case "kick_errors":
				check(float64(v), "ovfwd_port_backend_events_total", "port", p.Name, "counter", k)
			default:
				check(float64(v), "ovfwd_port_backend_packets_total", "port", p.Name, "counter", k)
			}
		}
		up := 0.0
		if p.Link == "up" {
			up = 1
		}
		check(up, "ovfwd_port_up", "port", p.Name, "driver", p.Driver)
		for _, q := range p.Queues {
			check(1, "ovfwd_port_queue_info", "port", p.Name, "queue", strconv.Itoa(q.Queue), "mode", q.Mode)
		}
	}
	for k, v := range s.Drops {
		check(float64(v), "ovfwd_drops_total", "reason", k)
	}
	for k, family := range map[string]string{"copies": "ovfwd_engine_packets_total", "icmp_sent": "ovfwd_engine_packets_total",
		"punts": "ovfwd_engine_packets_total", "learn_dropped": "ovfwd_engine_events_total",
		"neighbour_evicted": "ovfwd_neighbour_events_total", "neighbours_mirrored": "ovfwd_neighbour_events_total"} {
		check(float64(s.Engine[k]), family, "event", k)
	}
	check(1, "ovfwd_neighbours_pinned")
	for k, v := range s.NAT.Counters {
		switch k {
		case "translated", "hairpinned":
			check(float64(v), "ovfwd_nat_packets_total", "event", k)
		case "mappings", "clients", "blocks":
			check(float64(v), "ovfwd_nat_"+k)
		default:
			check(float64(v), "ovfwd_nat_"+k+"_total")
		}
	}
	check(float64(s.Routes.Connected), "ovfwd_routes", "source", "connected")
	check(float64(s.Routes.Static), "ovfwd_routes", "source", "static")
	check(float64(s.Routes.Kernel), "ovfwd_routes", "source", "kernel")
	check(float64(s.Routes.Tunnel), "ovfwd_routes", "source", "tunnel")
	check(float64(s.Routes.Uplink), "ovfwd_routes", "source", "uplink")
	check(1, "ovfwd_uplink_up", "uplink", "site-b")
	check(0, "ovfwd_uplink_up", "uplink", "site-c")
	for _, u := range s.Uplinks {
		for k, v := range u.Counters {
			if k == "attempts" {
				check(float64(v), "ovfwd_uplink_connect_attempts_total", "uplink", u.Name)
			} else {
				check(float64(v), "ovfwd_uplink_packets_total", "uplink", u.Name, "counter", k)
			}
		}
	}
	check(float64(s.Routes.Total), "ovfwd_fib_prefixes")
	check(float64(s.Neighbours), "ovfwd_neighbours")
	check(float64(s.Reload.Count), "ovfwd_reloads_total", "result", "ok")
	check(float64(s.Reload.Failed), "ovfwd_reloads_total", "result", "rejected")
	check(float64(len(s.VPN.Peers)), "ovfwd_vpn_peers")
	for _, p := range s.VPN.Peers {
		id := strconv.FormatUint(p.ClientID, 10)
		check(float64(p.Rx.Bytes), "ovfwd_vpn_peer_rx_bytes_total", "peer", p.Name, "client_id", id)
		check(float64(p.Tx.Bytes), "ovfwd_vpn_peer_tx_bytes_total", "peer", p.Name, "client_id", id)
		check(float64(p.Rx.Packets), "ovfwd_vpn_peer_rx_packets_total", "peer", p.Name, "client_id", id)
		check(float64(p.Tx.Packets), "ovfwd_vpn_peer_tx_packets_total", "peer", p.Name, "client_id", id)
	}
	check(1700000100.5, "ovfwd_vpn_peer_last_seen_seconds", "peer", "alice", "client_id", "4")
	if _, ok := value(fams, "ovfwd_vpn_peer_last_seen_seconds", "peer", "bob", "client_id", "7"); ok {
		t.Error("a peer never seen has a last-seen time")
	}
	check(8, "ovfwd_vpn_drops_total", "reason", "data_replay")
	check(2, "ovfwd_vpn_drops_total", "reason", "control_wrap_auth")
	check(3, "ovfwd_vpn_sessions_refused_total", "reason", "auth_failed")
	check(40, "ovfwd_acl_packets_total", "list", "contractors", "rule", "web", "action", "allow")
	check(2, "ovfwd_acl_packets_total", "list", "contractors", "rule", "ssh", "action", "reject")
	check(7, "ovfwd_acl_packets_total", "list", "contractors", "rule", "default", "action", "deny")
	check(1, "ovfwd_ready")
	check(12345, "ovfwd_worker_polls_total", "queue", "0")
	check(0, "ovfwd_draining")
	check(2, "ovfwd_exported_routes")
	if f := fams["ovfwd_build_info"]; f == nil || len(f.Metric) != 1 {
		t.Fatalf("build info: %v", f)
	}
	labels := map[string]string{}
	for _, l := range fams["ovfwd_build_info"].Metric[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] != s.Version || labels["mode"] != s.Mode || labels["poll"] != s.Poll || labels["goversion"] == "" {
		t.Errorf("build info labels %v", labels)
	}
	// Every family the collector describes is exported for this snapshot.
	for _, d := range allDescs {
		found := false
		for name := range fams {
			if strings.Contains(d.String(), `"`+name+`"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("nothing collected for %s", d)
		}
	}
}

func TestCollectorTypesAndLint(t *testing.T) {
	s := sample()
	c := NewCollector(func() status.Snapshot { return s })
	want := `
# HELP ovfwd_drops_total Packets the engine dropped, by reason.
# TYPE ovfwd_drops_total counter
ovfwd_drops_total{reason="malformed"} 0
ovfwd_drops_total{reason="no_route"} 3
# HELP ovfwd_vpn_peers Connected VPN clients.
# TYPE ovfwd_vpn_peers gauge
ovfwd_vpn_peers 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "ovfwd_drops_total", "ovfwd_vpn_peers"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestNoVPN(t *testing.T) {
	s := sample()
	s.VPN = nil
	fams := gather(t, NewCollector(func() status.Snapshot { return s }))
	for name := range fams {
		if strings.HasPrefix(name, "ovfwd_vpn_") {
			t.Errorf("%s exported without a VPN", name)
		}
	}
	if _, ok := value(fams, "ovfwd_port_rx_packets_total", "port", "p1"); !ok {
		t.Error("ports missing without a VPN")
	}
}

// Two sessions of one certificate are two series, told apart by client
// id, so when one leaves the other's counters do not fall (a sum over the
// name would, and Prometheus would read it as a counter reset); the
// scrape never fails on duplicate label sets.
func TestSameNameSessionsNeverDecrease(t *testing.T) {
	s := sample()
	second := status.VPNPeer{Name: "alice", ClientID: 9, Rx: status.Traffic{Packets: 1, Bytes: 1000}, LastSeen: time.Unix(1700000200, 0)}
	s.VPN.Peers = append(s.VPN.Peers, second)
	before := gather(t, NewCollector(func() status.Snapshot { return s }))
	if v, _ := value(before, "ovfwd_vpn_peers"); v != 3 {
		t.Errorf("vpn peers %v, want 3 sessions", v)
	}
	s.VPN.Peers = s.VPN.Peers[:2] // the second alice leaves
	after := gather(t, NewCollector(func() status.Snapshot { return s }))
	for _, f := range before {
		if f.GetType() != dto.MetricType_COUNTER || !strings.HasPrefix(f.GetName(), "ovfwd_vpn_peer_") {
			continue
		}
		for _, m := range f.Metric {
			var kv []string
			for _, l := range m.Label {
				kv = append(kv, l.GetName(), l.GetValue())
			}
			if v, ok := value(after, f.GetName(), kv...); ok && v < m.GetCounter().GetValue() {
				t.Errorf("%s%q fell from %v to %v", f.GetName(), kv, m.GetCounter().GetValue(), v)
			}
		}
	}
	if v, _ := value(after, "ovfwd_vpn_peer_rx_bytes_total", "peer", "alice", "client_id", "4"); v != 99 {
		t.Errorf("the remaining alice's rx bytes %v, want 99", v)
	}
}

func scrape(t *testing.T, url string) (body, contentType string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s:\n%s", resp.Status, b)
	}
	return string(b), resp.Header.Get("Content-Type")
}

// sampleValue finds "sample value" in a text exposition the way the
// daemon's netns test does: integers stay integers.
func sampleValue(t *testing.T, body, sample string) uint64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%q: %v", sc.Text(), err)
			}
			return n
		}
	}
	t.Fatalf("no %s in\n%s", sample, body)
	return 0
}

func TestEndpointScrapesFreshSnapshots(t *testing.T) {
	var calls atomic.Uint64
	snap := func() status.Snapshot {
		n := calls.Add(1)
		s := sample()
		s.Ports[1].Rx.Packets = 100 * n
		return s
	}
	srv, err := Listen("tcp", "127.0.0.1:0", snap)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	url := "http://" + srv.Addr().String() + "/metrics"
	first, ct := scrape(t, url)
	if !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
	second, _ := scrape(t, url)
	if calls.Load() != 2 {
		t.Errorf("%d snapshots for 2 scrapes", calls.Load())
	}
	a := sampleValue(t, first, `ovfwd_port_rx_packets_total{port="p1"}`)
	b := sampleValue(t, second, `ovfwd_port_rx_packets_total{port="p1"}`)
	if a != 100 || b != 200 {
		t.Errorf("p1 rx packets %d then %d, want 100 then 200", a, b)
	}
	if v := sampleValue(t, first, `ovfwd_port_rx_packets_total{port="we\"ird"}`); v != 15 {
		t.Errorf("escaped port label: %d", v)
	}
	if v := sampleValue(t, first, `ovfwd_reloads_total{result="ok"}`); v != 2 {
		t.Errorf("reloads ok %d", v)
	}
	// The runtime and process collectors share the registry.
	for _, want := range []string{"\ngo_goroutines ", "\nprocess_start_time_seconds "} {
		if !strings.Contains(first, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

// Only /metrics serves the metrics; every other path is a 404 (the
// endpoint names VPN peers, so it answers nothing it need not).
func TestEndpointServesOnlyMetrics(t *testing.T) {
	srv, err := Listen("tcp", "127.0.0.1:0", func() status.Snapshot { return sample() })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, path := range []string{"/", "/index.html", "/metrics/x", "/debug/pprof/"} {
		resp, err := http.Get("http://" + srv.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "ovfwd_") {
			t.Errorf("%s: status %d, body %.60q; want 404 without metrics", path, resp.StatusCode, body)
		}
	}
}

// The endpoint on a unix socket: mode 0660, a stale socket file replaced.
func TestEndpointUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.sock")
	for range 2 { // the second Listen finds the first one's file
		srv, err := Listen("unix", path, func() status.Snapshot { return sample() })
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o660 {
			t.Fatalf("socket mode %v, err %v", fi.Mode(), err)
		}
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}}
		resp, err := c.Get("http://ovfwd/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.CloseIdleConnections()
		if v := sampleValue(t, string(body), `ovfwd_reloads_total{result="ok"}`); v != 2 {
			t.Errorf("reloads ok %d over the unix socket", v)
		}
		srv.Close()
		// Leave a stale socket file as a killed daemon would.
		l, err := net.Listen("unix", path)
		if err == nil {
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			l.Close()
		}
	}
}

// A label value that is not UTF-8 (a hostile certificate name) loses its
// own samples, not the scrape, and does not panic.
func TestInvalidLabelValueSkipped(t *testing.T) {
	s := sample()
	s.VPN.Peers[1].Name = "b\xffb"
	srv, err := Listen("tcp", "127.0.0.1:0", func() status.Snapshot { return s })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	body, _ := scrape(t, "http://"+srv.Addr().String()+"/metrics")
	if v := sampleValue(t, body, `ovfwd_vpn_peer_rx_bytes_total{client_id="4",peer="alice"}`); v != 99 {
		t.Errorf("alice rx bytes %d", v)
	}
	if strings.Contains(body, "b\xffb") || strings.Contains(body, `peer="b`) {
		t.Errorf("invalid label value exported:\n%s", body)
	}
	// Metrics collected after the bad one are still there.
	if v := sampleValue(t, body, `ovfwd_vpn_drops_total{reason="data_replay"}`); v != 8 {
		t.Errorf("vpn replay drops %d", v)
	}
	if !strings.Contains(body, "\novfwd_build_info{") {
		t.Errorf("scrape stopped at the invalid metric:\n%s", body)
	}
}

// BenchmarkScrape is one scrape of a large appliance: 4 ports and 1000
// VPN peers, through the registry and the text encoder.
func BenchmarkScrape(b *testing.B) {
	s := sample()
	s.Ports = append(s.Ports, s.Ports...)
	s.Ports[2].Name, s.Ports[3].Name = "p2", "p3"
	peers := make([]status.VPNPeer, 1000)
	for i := range peers {
		peers[i] = status.VPNPeer{Name: "client-" + strconv.Itoa(i), Rx: status.Traffic{Packets: uint64(i), Bytes: uint64(i) * 1000}, LastSeen: time.Unix(1700000000, 0)}
	}
	s.VPN.Peers = peers
	h := Handler(func() status.Snapshot { return s })
	req, _ := http.NewRequest("GET", "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
