package unit

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Argv is the command that runs argv (a program and its arguments) as the
// unit does, in the caller's namespace: prefix it with `ip netns exec NS`.
// The unit's umask (sh), /dev/net/tun where this machine's is closed to the
// user (see TunNode), its limits (prlimit, as systemd sets them before
// the exec), its user and group with no supplementary groups, exactly its
// capabilities and no_new_privs (setpriv). Each step execs the next, so the
// PID the caller starts is the daemon's. The kernel clears a parent-death
// signal when the credentials change (commit_creds); setpriv puts the
// caller's back (--pdeathsig keep), so a harness's Pdeathsig still holds.
func (u *Unit) Argv(argv ...string) []string {
	script := fmt.Sprintf(`umask %04o && exec "$@"`, u.UMask)
	var out []string
	if u.TunNode != 0 {
		// A tmpfs over /dev/net in a private mount namespace: the host's
		// /dev is untouched, and the node goes when the daemon does.
		out = []string{"unshare", "--mount", "--propagation", "private", "--"}
		script = fmt.Sprintf("mount -t tmpfs -o mode=0755,size=64k ovfwd-unit /dev/net && mknod -m 0666 %s c %d %d && %s",
			tunPath, unix.Major(u.TunNode), unix.Minor(u.TunNode), script)
	}
	out = append(out, "sh", "-c", script, "ovfwd-unit", "prlimit")
	for _, l := range u.Limits {
		v := "unlimited"
		if l.Value != Infinity {
			v = strconv.FormatUint(l.Value, 10)
		}
		out = append(out, "--"+l.Name+"="+v)
	}
	plus := func(cs []string) string {
		s := []string{"-all"}
		for _, c := range cs {
			s = append(s, "+"+c)
		}
		return strings.Join(s, ",")
	}
	out = append(out, "--", "setpriv", "--pdeathsig", "keep", "--reuid", strconv.Itoa(u.UID), "--regid", strconv.Itoa(u.GID), "--clear-groups",
		"--inh-caps", plus(u.Ambient), "--ambient-caps", plus(u.Ambient), "--bounding-set", plus(u.Bounding))
	if u.NoNewPrivs {
		out = append(out, "--no-new-privs")
	}
	out = append(out, "--")
	return append(out, argv...)
}

// Command lays dir out as the unit's (Layout, as systemd does before each
// start) and returns Argv for bin and args, bin copied into dir where the
// unit's user cannot run it where it is (Executable).
func (u *Unit) Command(dir, bin string, args ...string) ([]string, error) {
	if err := u.Layout(dir); err != nil {
		return nil, err
	}
	bin, err := u.Executable(bin, dir)
	if err != nil {
		return nil, err
	}
	return u.Argv(append([]string{bin}, args...)...), nil
}
