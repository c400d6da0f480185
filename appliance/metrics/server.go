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

// Server is the metrics HTTP endpoint.
type Server struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// Listen serves snap at /metrics only (other paths: 404) on a TCP
// address, or on a unix socket when network is "unix" (a stale socket file
// at addr is replaced; the socket is 0660, so the ovfwd group can scrape).
func Listen(network, addr string, snap func() status.Snapshot) (*Server, error) {
	if network == "unix" {
		if fi, err := os.Lstat(addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(addr)
		}
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if network == "unix" {
		if err := os.Chmod(addr, 0o660); err != nil {
			ln.Close()
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(snap))
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
