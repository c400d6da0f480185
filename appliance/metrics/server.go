package metrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

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
