package status

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The status socket's protocol: the client writes one line, the server
// answers with one JSON value and closes. An empty line (or none: a
// client that only half-closes) asks for the Snapshot.
//
//	status                  → Snapshot
//	kill TARGET [restart|halt] → Reply (write operation)
//
// TARGET is a client's certificate common name, real address (ip or
// ip:port) or tunnel address, as openvpn's management "kill". RESTART (the
// default) makes the client reconnect at once; HALT makes it exit.
const (
	OpStatus = "status"
	OpKill   = "kill"
)

// maxRequest bounds a request line.
const maxRequest = 512

// Request is one parsed request line.
type Request struct {
	Op     string
	Target string // kill
	Halt   bool   // kill: HALT instead of RESTART
}

// Reply answers a write operation.
type Reply struct {
	Killed int    `json:"killed,omitempty"`
	Error  string `json:"error,omitempty"`
	Drain  *Drain `json:"drain,omitempty"` // drain: the drain now
}

// ParseRequest parses one request line (without its newline).
func ParseRequest(line string) (Request, error) {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] == OpStatus && len(f) == 1 {
		return Request{Op: OpStatus}, nil
	}
	if f[0] == OpKill && (len(f) == 2 || len(f) == 3) {
		r := Request{Op: OpKill, Target: f[1]}
		if len(f) == 3 {
			switch f[2] {
			case "restart":
			case "halt":
				r.Halt = true
			default:
				return r, fmt.Errorf("kill: %q is neither restart nor halt", f[2])
			}
		}
		return r, nil
	}
	if f[0] == OpDrain {
		return parseDrain(f[1:])
	}
	return Request{}, fmt.Errorf("unknown request %q (status, kill TARGET [restart|halt], or drain [DEADLINE|cancel])", line)
}

func readRequest(c net.Conn) (Request, error) {
	br := bufio.NewReaderSize(io.LimitReader(c, maxRequest), maxRequest)
	line, err := br.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && line == "" {
			return Request{Op: OpStatus}, nil // a client that only reads
		}
		return Request{}, err
	}
	if err != nil && len(line) >= maxRequest {
		return Request{}, errors.New("request line too long")
	}
	return ParseRequest(strings.TrimSpace(line))
}

// Access is who may use a status or management socket, from the
// credentials the connecting process had when it connected: SO_PEERCRED,
// and SO_PEERGROUPS for its supplementary groups. Nothing is read from
// /proc/PID, which by the time of the request may describe another
// process. Root and the daemon's own user may always read and write.
type Access struct {
	// ReadGID's members may read the status but not kill, drain or run
	// other write commands; -1: reading is left to the socket's file mode.
	ReadGID int
	// WriteGID's members may also write: the daemon's group by default
	// (ovfwd under the packaged unit). They can always read.
	WriteGID int
}

// DefaultAccess leaves reading to the socket's mode and lets the daemon's
// group write.
func DefaultAccess() Access { return Access{ReadGID: -1, WriteGID: os.Getegid()} }

// Authorized allows write operations to root, the daemon's user and
// WriteGID's members.
func (a Access) Authorized(c net.Conn) error { return a.check(c, true) }

// Readable allows reading to those who may write and to ReadGID's
// members; with ReadGID -1, to whoever could connect.
func (a Access) Readable(c net.Conn) error {
	if a.ReadGID < 0 {
		return nil
	}
	return a.check(c, false)
}

// Authorized is DefaultAccess's write check.
func Authorized(c net.Conn) error { return DefaultAccess().Authorized(c) }

func (a Access) check(c net.Conn, write bool) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var groups []uint32
	var cerr, gerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		groups, gerr = peerGroups(int(fd))
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("peer credentials: %w", cerr)
	}
	err = authorize(cred, groups, gerr, os.Geteuid(), a.WriteGID)
	if err == nil || write {
		return err
	}
	return authorize(cred, groups, gerr, os.Geteuid(), a.ReadGID)
}

// authorize is the rule for a peer with credentials cred and supplementary
// groups groups: root, the daemon's user uid and members of gid pass.
// When the groups could not be read (groupsErr), only root, the daemon's
// user and a primary group gid pass, and the refusal says why.
func authorize(cred *unix.Ucred, groups []uint32, groupsErr error, uid, gid int) error {
	if cred.Uid == 0 || int(cred.Uid) == uid || int(cred.Gid) == gid || slices.Contains(groups, uint32(gid)) {
		return nil
	}
	if groupsErr != nil {
		return fmt.Errorf("permission denied: uid %d is not root or the daemon's user, its primary group is not gid %d, and its supplementary groups are unknown (SO_PEERGROUPS: %v)", cred.Uid, gid, groupsErr)
	}
	return fmt.Errorf("permission denied: uid %d is not root, the daemon's user or in group %d", cred.Uid, gid)
}

// Kill asks the appliance on path to disconnect target (see OpKill).
func Kill(path, target string, halt bool, timeout time.Duration) (int, error) {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return 0, fmt.Errorf("status: is ovfwd running? %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	how := "restart"
	if halt {
		how = "halt"
	}
	if strings.ContainsAny(target, " \t\n") || target == "" {
		return 0, fmt.Errorf("status: bad target %q", target)
	}
	if _, err := fmt.Fprintf(c, "%s %s %s\n", OpKill, target, how); err != nil {
		return 0, err
	}
	var r Reply
	if err := json.NewDecoder(c).Decode(&r); err != nil {
		return 0, fmt.Errorf("status: %s: %w", path, err)
	}
	if r.Error != "" {
		return r.Killed, errors.New(r.Error)
	}
	return r.Killed, nil
}
