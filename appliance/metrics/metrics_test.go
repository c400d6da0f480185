package metrics

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

func TestExposition(t *testing.T) {
	rx := uint64(10)
	snap := func() status.Snapshot {
		rx += 5
		return status.Snapshot{
			Started: time.Unix(1700000000, 0),
			Ports:   []status.Port{{Name: `we"ird`, Driver: "afxdp", Link: "up", Rx: status.Traffic{Packets: rx, Bytes: 64 * rx}, Backend: status.Counters{"tx_full": 1}}},
			Drops:   status.Counters{"no_route": 3, "malformed": 0},
			Routes:  status.Routes{Static: 2, Kernel: 1},
			VPN:     &status.VPN{Peers: []status.VPNPeer{{Name: "alice", Rx: status.Traffic{Bytes: 99}}}},
		}
	}
	srv, err := Listen("127.0.0.1:0", snap)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	get := func() string {
		resp, err := http.Get("http://" + srv.Addr().String() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
			t.Errorf("content type %q", ct)
		}
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	first, second := get(), get()
	for _, want := range []string{
		"# TYPE ovfwd_port_rx_packets_total counter\n",
		`ovfwd_port_rx_packets_total{port="we\"ird"} 15` + "\n",
		`ovfwd_port_rx_bytes_total{port="we\"ird"} 960` + "\n",
		`ovfwd_port_backend_total{port="we\"ird",counter="tx_full"} 1` + "\n",
		`ovfwd_port_up{port="we\"ird",driver="afxdp"} 1` + "\n",
		`ovfwd_drops_total{reason="malformed"} 0` + "\n",
		`ovfwd_drops_total{reason="no_route"} 3` + "\n",
		`ovfwd_routes{source="static"} 2` + "\n",
		"ovfwd_vpn_peers 1\n",
		`ovfwd_vpn_peer_rx_bytes_total{peer="alice"} 99` + "\n",
		"ovfwd_start_time_seconds 1700000000\n",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("exposition lacks %q:\n%s", want, first)
		}
	}
	if !strings.Contains(second, `ovfwd_port_rx_packets_total{port="we\"ird"} 20`) {
		t.Errorf("second scrape did not re-read the counters:\n%s", second)
	}
	// Every line is a comment or "name[{labels}] value".
	sc := bufio.NewScanner(strings.NewReader(first))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 || !strings.HasPrefix(line, "ovfwd_") || strings.Trim(line[i+1:], "0123456789") != "" {
			t.Errorf("malformed sample line %q", line)
		}
	}
}
