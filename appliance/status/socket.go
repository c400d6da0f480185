package status

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// ListenUnix listens on a unix socket at path that never exists with
// other permissions than perm: the socket is bound in a private (0700)
// directory beside path, given perm there, and hard-linked into place,
// which fails rather than replace anything that appeared meanwhile.
//
// What sits at path already must be a stale socket, one nobody listens on
// (a crashed run's), which is removed. A live socket is another process's;
// anything else (a regular file, a directory, a symlink) is not ovfwd's to
// remove, and both are errors.
//
// The listener does not unlink path on Close; the caller removes it.
func ListenUnix(path string, perm os.FileMode) (*net.UnixListener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".bind-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, perm); err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.Link(tmp, path); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// removeStale removes the socket at path if nobody listens on it, and
// fails for anything else at path.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket (%v); remove it or choose another path", path, fi.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, 200*time.Millisecond)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s: another process (another ovfwd?) is listening on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s: cannot tell whether the socket is stale: %w", path, err)
	}
	return os.Remove(path)
}
