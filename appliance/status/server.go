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

// Server answers each connection on a unix socket with one request: a
// JSON Snapshot, or the Reply to a command (see Request).
type Server struct {
	ln     net.Listener
	path   string
	snap   func() Snapshot
	cmd    func(Request) Reply
	access Access
	wg     sync.WaitGroup
}

// Listen creates the socket at path (its directory too, mode 0750) and
// serves snap on it, read-only. A stale socket left by a crashed run is
// replaced; a live one (another ovfwd answering), or anything at path that
// is not a socket, is an error (see ListenUnix).
func Listen(path string, snap func() Snapshot) (*Server, error) {
	return ListenCommands(path, snap, nil)
}

// ListenCommands is Listen with the write operations handled by cmd (nil:
// refused). The socket is mode 0660, so only the daemon's user and group
// can connect; write operations are also checked against the connecting
// process's credentials (Authorized), so loosening the file mode for a
// monitoring user never lets it disconnect clients.
func ListenCommands(path string, snap func() Snapshot, cmd func(Request) Reply) (*Server, error) {
	return ListenAccess(path, snap, cmd, DefaultAccess())
}

// ListenAccess is ListenCommands with a's roles. With a read group the
// socket is mode 0666 and every request is checked instead (Readable,
// Authorized): a file mode cannot admit two groups, and the check admits
// no one the mode would have kept out who is not in one of them. The
// socket's directory must let the read group through.
func ListenAccess(path string, snap func() Snapshot, cmd func(Request) Reply, a Access) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	mode := os.FileMode(0o660)
	if a.ReadGID >= 0 {
		mode = 0o666
	}
	ln, err := ListenUnix(path, mode)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	s := &Server{ln: ln, path: path, snap: snap, cmd: cmd, access: a}
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
			s.handle(c)
		}()
	}
}

func (s *Server) handle(c net.Conn) {
	// A client that writes nothing (an older ovfwd status, nc -U) gets the
	// snapshot after a second.
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	req, err := readRequest(c)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err != nil {
		_ = json.NewEncoder(c).Encode(Reply{Error: err.Error()})
		return
	}
	if err := s.access.Readable(c); err != nil {
		_ = json.NewEncoder(c).Encode(Reply{Error: err.Error()})
		return
	}
	if req.Op == OpStatus {
		_ = json.NewEncoder(c).Encode(s.snap())
		return
	}
	var r Reply
	switch {
	case s.cmd == nil:
		r.Error = "this ovfwd takes no commands on its status socket"
	default:
		if err := s.access.Authorized(c); err != nil {
			r.Error = err.Error()
		} else {
			r = s.cmd(req)
		}
	}
	_ = json.NewEncoder(c).Encode(r)
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
	if _, err := c.Write([]byte(OpStatus + "\n")); err != nil {
		return nil, fmt.Errorf("status: %s: %w", path, err)
	}
	var raw json.RawMessage
	if err := json.NewDecoder(c).Decode(&raw); err != nil {
		return nil, fmt.Errorf("status: %s: %w", path, err)
	}
	// A refusal is a Reply, whose only field is its error.
	var refused struct {
		Error string `json:"error"`
		PID   int    `json:"pid"`
	}
	if json.Unmarshal(raw, &refused) == nil && refused.Error != "" && refused.PID == 0 {
		return nil, fmt.Errorf("status: %s: %s", path, refused.Error)
	}
	var s Snapshot
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("status: %s: %w", path, err)
	}
	return &s, nil
}
