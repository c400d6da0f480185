package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Line is the line of key (a dotted path as in Error.Key) in the file c
// came from, or 0 when the file does not set it.
func (c *Config) Line(key string) int {
	if c.lines == nil {
		return 0
	}
	return c.lines.lookup(key)
}

// Has reports whether the file c came from sets key.
func (c *Config) Has(key string) bool { return c.lines != nil && c.lines.has(key) }

// Access modes for PermissionFix, as access(2) takes them.
const (
	AccessRead    = unix.R_OK
	AccessWrite   = unix.W_OK
	AccessExecute = unix.X_OK
)

// PermissionFix says how to let this process's user (the unit's, when
// `ovfwd check` runs as it or the daemon starts) use path for want: the
// first directory on the way it cannot search, or the file itself, given
// to the process's group. "" when nothing stands in the way.
func PermissionFix(path string, want uint32) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	group := strconv.Itoa(os.Getegid())
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	var dirs []string
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		dirs = append([]string{d}, dirs...)
		if d == "/" {
			break
		}
	}
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return "" // not a permission problem
		}
		if unix.Access(d, unix.X_OK) != nil {
			if d == "/root" || filepath.Dir(d) == "/home" {
				return fmt.Sprintf("move the files out of the home directory %s, e.g. to /etc/ovfwd/pki, then as root: chgrp %s FILE && chmod 0640 FILE", d, group)
			}
			return fmt.Sprintf("as root: chgrp %s %s && chmod g+x %s (the directory must let group %s through), or keep the files where %s can read them, e.g. /etc/ovfwd",
				group, d, d, group, group)
		}
	}
	if unix.Access(abs, want) == nil {
		return ""
	}
	st, err := os.Stat(abs)
	if err != nil {
		return ""
	}
	mode := "0640"
	switch {
	case st.IsDir() && want&AccessWrite != 0:
		mode = "0770"
	case st.IsDir():
		mode = "0750"
	case want&AccessExecute != 0:
		mode = "0750"
	case want&AccessWrite != 0:
		mode = "0660"
	}
	return fmt.Sprintf("as root: chgrp %s %s && chmod %s %s", group, abs, mode, abs)
}

func isPermission(err error) bool { return errors.Is(err, fs.ErrPermission) }
