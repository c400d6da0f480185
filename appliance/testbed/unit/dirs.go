package unit

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Access modes for Access.
const (
	Read    = 4
	Write   = 2
	Execute = 1
)

// Layout makes dir the daemon's tree, as the package lays it out: dir
// itself 0755 for config files (write them 0644, as /etc/ovfwd/ovfwd.toml),
// dir/state and dir/run the unit's user's, mode 0750 (StateDirectory,
// RuntimeDirectory). Like systemd before each start, it gives everything
// under state/ and run/ to the user, so a harness may lay out again before
// each start after writing state as root (a PKI, a key). dir's parents must
// let the user through (MkdirTemp's do; a testing.T's TempDir does not).
func (u *Unit) Layout(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"state", "run"} {
		p := filepath.Join(dir, d)
		if err := os.MkdirAll(p, 0o750); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o750); err != nil {
			return err
		}
		if err := u.Own(p); err != nil {
			return err
		}
	}
	return u.Access(dir, Read|Execute)
}

// MkdirTemp makes a fresh Layout tree in the system's temporary directory
// (pattern as os.MkdirTemp's). The caller removes it.
func (u *Unit) MkdirTemp(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	if err := u.Layout(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// Own gives path and everything under it to the unit's user: state the
// daemon owns, like the PKI `ovfwd pki` makes in /var/lib/ovfwd (Layout
// does this for state/ and run/).
func (u *Unit) Own(path string) error {
	return filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, u.UID, u.GID)
	})
}

// Access says why the unit's user (no supplementary groups, no DAC
// capabilities) cannot use path for want (Read, Write, Execute or'ed), or
// returns nil. Every directory on the way needs search permission.
func (u *Unit) Access(path string, want uint32) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	check := func(p string, want uint32) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		perm := uint32(fi.Mode().Perm())
		switch {
		case int(st.Uid) == u.UID:
			perm >>= 6
		case int(st.Gid) == u.GID:
			perm >>= 3
		}
		if perm&want != want {
			return fmt.Errorf("unit: uid %d gid %d cannot %s %s (%v, owner %d:%d): the daemon runs as the unit's user",
				u.UID, u.GID, modeWords(want), p, fi.Mode(), st.Uid, st.Gid)
		}
		return nil
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		if err := check(d, Execute); err != nil {
			return err
		}
		if d == "/" {
			break
		}
	}
	return check(abs, want)
}

func modeWords(m uint32) string {
	s := ""
	for _, w := range []struct {
		bit  uint32
		word string
	}{{Read, "read"}, {Write, "write"}, {Execute, "execute/search"}} {
		if m&w.bit != 0 {
			if s != "" {
				s += "+"
			}
			s += w.word
		}
	}
	return s
}

// Executable is bin when the unit's user can run it, else a copy of it in
// dir (0755), which must let the user through.
func (u *Unit) Executable(bin, dir string) (string, error) {
	if u.Access(bin, Read|Execute) == nil {
		return bin, nil
	}
	dst := filepath.Join(dir, filepath.Base(bin))
	in, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		return "", err
	}
	return dst, u.Access(dst, Read|Execute)
}
