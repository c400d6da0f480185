package vpne2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// IperfBasePort is the first LAN iperf3 server's port; client i uses
// IperfBasePort+i (an iperf3 server runs one test at a time).
const IperfBasePort = 5201

// StartIperfServers starts n iperf3 servers on the LAN host.
func (l *Lab) StartIperfServers(n int) error {
	for i := 0; i < n; i++ {
		log := filepath.Join(l.Dir, fmt.Sprintf("iperf3-s%d.log", i))
		p, err := start(l.LAN, log, "iperf3", "-s", "-p", strconv.Itoa(IperfBasePort+i))
		if err != nil {
			return err
		}
		l.procs = append(l.procs, p)
	}
	time.Sleep(300 * time.Millisecond)
	return nil
}

// IperfResult is one iperf3 TCP test as the receiver saw it.
type IperfResult struct {
	Bytes   int64   // received by the receiving side
	Sent    int64   // sent by the sending side
	Seconds float64 // the receiver's measured interval
	Mbps    float64 // receiver's rate
	Retrans int64
	MSS     int // the client socket's TCP MSS (what the path's clamps left)
}

// Iperf runs an iperf3 TCP test from ns to the LAN host's server for
// client index i (port IperfBasePort+i) at to, with extra flags
// (e.g. "-n", "50M", "-R", "-t", "10").
//
// An iperf3 server refuses a test while it is still winding down the
// previous one ("the server is busy"); Iperf retries that, up to 10 times.
func Iperf(ns *netns.NS, to netip.Addr, i int, extra ...string) (IperfResult, error) {
	for try := 0; ; try++ {
		r, err := iperfOnce(ns, to, i, extra...)
		if err == nil || try == 9 || !strings.Contains(err.Error(), "busy") {
			return r, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func iperfOnce(ns *netns.NS, to netip.Addr, i int, extra ...string) (IperfResult, error) {
	args := append([]string{"iperf3", "-c", to.String(), "-p", strconv.Itoa(IperfBasePort + i), "-J", "--connect-timeout", "5000"}, extra...)
	out, runErr := ns.Run(args...)
	var r struct {
		Error string `json:"error"`
		Start struct {
			MSS int `json:"tcp_mss_default"`
		} `json:"start"`
		End struct {
			SumSent struct {
				Bytes   int64   `json:"bytes"`
				Retrans int64   `json:"retransmits"`
				Seconds float64 `json:"seconds"`
			} `json:"sum_sent"`
			SumReceived struct {
				Bytes   int64   `json:"bytes"`
				Seconds float64 `json:"seconds"`
				BPS     float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return IperfResult{}, fmt.Errorf("vpne2e: iperf3 %v: %v (%v): %.500s", extra, err, runErr, out)
	}
	if r.Error != "" {
		return IperfResult{}, fmt.Errorf("vpne2e: iperf3 %v: %s", extra, r.Error)
	}
	if runErr != nil {
		return IperfResult{}, fmt.Errorf("vpne2e: iperf3 %v: %v", extra, runErr)
	}
	e := r.End
	return IperfResult{Bytes: e.SumReceived.Bytes, Sent: e.SumSent.Bytes, Seconds: e.SumReceived.Seconds,
		Mbps: e.SumReceived.BPS / 1e6, Retrans: e.SumSent.Retrans, MSS: r.Start.MSS}, nil
}
