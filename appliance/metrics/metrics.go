package metrics

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// contentType is the Prometheus text format's media type.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves snap as Prometheus metrics.
func Handler(snap func() status.Snapshot) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := snap()
		w.Header().Set("Content-Type", contentType)
		bw := bufio.NewWriter(w)
		Write(bw, &s)
		_ = bw.Flush()
	})
}

// Write writes s in the text exposition format.
func Write(w *bufio.Writer, s *status.Snapshot) {
	m := &writer{w: w}
	m.family("ovfwd_port_rx_packets_total", "counter", "Frames received on a port.")
	for _, p := range s.Ports {
		m.sample(p.Rx.Packets, "port", p.Name)
	}
	m.family("ovfwd_port_rx_bytes_total", "counter", "Bytes received on a port.")
	for _, p := range s.Ports {
		m.sample(p.Rx.Bytes, "port", p.Name)
	}
	m.family("ovfwd_port_tx_packets_total", "counter", "Frames sent on a port.")
	for _, p := range s.Ports {
		m.sample(p.Tx.Packets, "port", p.Name)
	}
	m.family("ovfwd_port_tx_bytes_total", "counter", "Bytes sent on a port.")
	for _, p := range s.Ports {
		m.sample(p.Tx.Bytes, "port", p.Name)
	}
	m.family("ovfwd_port_backend_total", "counter", "A port backend's own counters (kernel ring drops, kick errors, …).")
	for _, p := range s.Ports {
		for _, k := range sortedKeys(p.Backend) {
			m.sample(p.Backend[k], "port", p.Name, "counter", k)
		}
	}
	m.family("ovfwd_port_up", "gauge", "1 when the port's link is up.")
	for _, p := range s.Ports {
		v := uint64(0)
		if p.Link == "up" {
			v = 1
		}
		m.sample(v, "port", p.Name, "driver", p.Driver)
	}
	m.family("ovfwd_drops_total", "counter", "Packets the engine dropped, by reason.")
	for _, k := range sortedKeys(s.Drops) {
		m.sample(s.Drops[k], "reason", k)
	}
	m.family("ovfwd_engine_total", "counter", "Other engine events (punts, ICMP errors sent, neighbour solicits, …).")
	for _, k := range sortedKeys(s.Engine) {
		m.sample(s.Engine[k], "event", k)
	}
	m.family("ovfwd_routes", "gauge", "Routes in the FIB by source.")
	m.sample(uint64(s.Routes.Connected), "source", "connected")
	m.sample(uint64(s.Routes.Static), "source", "static")
	m.sample(uint64(s.Routes.Kernel), "source", "kernel")
	m.sample(uint64(s.Routes.Tunnel), "source", "tunnel")
	m.family("ovfwd_neighbours", "gauge", "Entries in the engine's neighbour table.")
	m.sample(uint64(s.Neighbours))
	m.family("ovfwd_reloads_total", "counter", "SIGHUP reloads by result.")
	m.sample(uint64(s.Reload.Count), "result", "ok")
	m.sample(uint64(s.Reload.Failed), "result", "rejected")
	if v := s.VPN; v != nil {
		m.family("ovfwd_vpn_peers", "gauge", "Connected VPN clients.")
		m.sample(uint64(len(v.Peers)))
		m.family("ovfwd_vpn_peer_rx_bytes_total", "counter", "Tunnel bytes received from a VPN client.")
		for _, p := range v.Peers {
			m.sample(p.Rx.Bytes, "peer", p.Name)
		}
		m.family("ovfwd_vpn_peer_tx_bytes_total", "counter", "Tunnel bytes sent to a VPN client.")
		for _, p := range v.Peers {
			m.sample(p.Tx.Bytes, "peer", p.Name)
		}
		m.family("ovfwd_vpn_drops_total", "counter", "VPN packets dropped, by reason.")
		for _, k := range sortedKeys(v.Drops) {
			m.sample(v.Drops[k], "reason", k)
		}
	}
	m.family("ovfwd_start_time_seconds", "gauge", "Unix time the appliance started.")
	m.sample(uint64(s.Started.Unix()))
}

type writer struct {
	w    *bufio.Writer
	name string
}

func (m *writer) family(name, typ, help string) {
	m.name = name
	fmt.Fprintf(m.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// sample writes one line of the current family; labels are name, value pairs.
func (m *writer) sample(v uint64, labels ...string) {
	m.w.WriteString(m.name)
	for i := 0; i+1 < len(labels); i += 2 {
		if i == 0 {
			m.w.WriteByte('{')
		} else {
			m.w.WriteByte(',')
		}
		m.w.WriteString(labels[i])
		m.w.WriteString(`="`)
		m.w.WriteString(escape(labels[i+1]))
		m.w.WriteByte('"')
	}
	if len(labels) > 0 {
		m.w.WriteByte('}')
	}
	m.w.WriteByte(' ')
	m.w.WriteString(strconv.FormatUint(v, 10))
	m.w.WriteByte('\n')
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escape(s string) string { return labelEscaper.Replace(s) }

func sortedKeys(c status.Counters) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Server is the metrics HTTP endpoint.
type Server struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// Listen serves snap on addr at /metrics (and /, for curl).
func Listen(addr string, snap func() status.Snapshot) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	h := Handler(snap)
	mux.Handle("/metrics", h)
	mux.Handle("/", h)
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, addr: ln.Addr(), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns ErrServerClosed on Close
	}()
	return s, nil
}

// Addr is the address actually listened on.
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops the endpoint within a second.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.done
	return err
}
