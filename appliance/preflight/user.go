package preflight

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// ChildEnv marks the `ovfwd check` that runs as the unit's user.
const ChildEnv = "OVFWD_CHECK_AS_USER"

// User is an account checks run as.
type User struct {
	Name     string
	UID, GID int
	Groups   []uint32 // supplementary groups, as systemd's User= sets them (initgroups)
}

func (u *User) String() string {
	return fmt.Sprintf("user %s (uid %d, gid %d, groups %v)", u.Name, u.UID, u.GID, u.Groups)
}

// LookupUser finds name's ids and groups.
func LookupUser(name string) (*User, error) {
	usr, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	u := &User{Name: name}
	u.UID, _ = strconv.Atoi(usr.Uid)
	u.GID, _ = strconv.Atoi(usr.Gid)
	gids, _ := usr.GroupIds()
	for _, g := range gids {
		if n, err := strconv.Atoi(g); err == nil && n != u.GID {
			u.Groups = append(u.Groups, uint32(n))
		}
	}
	return u, nil
}

// Command is this program run again with args as u: a child with u's
// uid, gid and groups and, as for any non-root process, no capabilities,
// so it can read, write and run exactly what the unit's daemon can (ACLs
// included). ChildEnv is set in it.
func Command(u *User, args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := exec.Command(self, args...)
	c.Env = append(os.Environ(), ChildEnv+"="+u.Name)
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: u.Groups}}
	return c, nil
}
