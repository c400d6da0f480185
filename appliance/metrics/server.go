package metrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// limits bound what the endpoint holds for its clients. A scrape is one
// small GET answered within the handler's 10 s; Prometheus keeps the
// connection between scrapes (every minute by default), so an idle one may
// wait a little longer than that before it is closed.
type limits struct {
	readHeader, read, write, idle time.Duration
	conns                         int // open connections in all
	perSource                     int // from one IPv4 address or IPv6 /64 (TCP)
}

var defaultLimits = limits{
	readHeader: 5 * time.Second,
	read:       10 * time.Second,
	write:      15 * time.Second, // past the handler's 10 s Timeout
	idle:       90 * time.Second,
	conns:      64,
	perSource:  8,
}

// Server is the metrics HTTP endpoint.
type Server struct {
	srv  *http.Server
	ln   *capListener
	addr net.Addr
	path string // the unix socket's, removed on Close; "" for TCP
	done chan struct{}
}

// Listen serves snap at /metrics only (other paths: 404) on a TCP
// address, or on a unix socket when network is "unix" (mode 0660, so the
// ovfwd group can scrape; a stale socket file at addr is replaced, anything
// else there is an error: see status.ListenUnix).
//
// It holds at most 64 connections, 8 from one IPv4 address or IPv6 /64;
// one more is closed at once and counted in
// ovfwd_metrics_connections_refused_total. Requests must arrive within 10 s
// (headers 5 s), answers leave within 15 s, and an idle keep-alive
// connection is closed after 90 s.
func Listen(network, addr string, snap func() status.Snapshot) (*Server, error) {
	return listen(network, addr, snap, defaultLimits)
}

func listen(network, addr string, snap func() status.Snapshot, lim limits) (*Server, error) {
	var ln net.Listener
	var err error
	path := ""
	if network == "unix" {
		ln, err = status.ListenUnix(addr, 0o660)
		path = addr
	} else {
		ln, err = net.Listen(network, addr)
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	capped := newCapListener(ln, lim.conns, lim.perSource)
	reg := NewRegistry(snap)
	reg.MustRegister(capped)
	mux := http.NewServeMux()
	mux.Handle("/metrics", handlerFor(reg))
	s := &Server{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: lim.readHeader,
			ReadTimeout:       lim.read,
			WriteTimeout:      lim.write,
			IdleTimeout:       lim.idle,
		},
		ln: capped, addr: ln.Addr(), path: path, done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(capped) // returns ErrServerClosed on Close
	}()
	return s, nil
}

// Addr is the address actually listened on.
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops the endpoint within a second and removes its unix socket.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.done
	if s.path != "" {
		_ = os.Remove(s.path)
	}
	return err
}
