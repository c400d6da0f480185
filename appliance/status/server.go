package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Server answers every connection on a unix socket with one JSON Snapshot.
type Server struct {
	ln   net.Listener
	path string
	snap func() Snapshot
	wg   sync.WaitGroup
}

// Listen creates the socket at path (its directory too, mode 0750) and
// serves snap on it. A stale socket left by a crashed run is replaced;
// a live one (another ovfwd answering) is an error.
func Listen(path string, snap func() Snapshot) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("status: %s: another ovfwd is running", path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	_ = os.Chmod(path, 0o660)
	s := &Server{ln: ln, path: path, snap: snap}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

func (s *Server) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_ = json.NewEncoder(c).Encode(s.snap())
		}()
	}
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Close stops serving, waits for open connections and removes the socket.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.wg.Wait()
	_ = os.Remove(s.path)
	return err
}

// Fetch asks the appliance listening on path for a Snapshot.
func Fetch(path string, timeout time.Duration) (*Snapshot, error) {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return nil, fmt.Errorf("status: is ovfwd running? %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	var s Snapshot
	if err := json.NewDecoder(c).Decode(&s); err != nil {
		return nil, fmt.Errorf("status: %s: %w", path, err)
	}
	return &s, nil
}
