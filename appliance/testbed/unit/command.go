package unit

import (
	"fmt"
	"strconv"
	"strings"
)

// Argv is the command that runs argv (a program and its arguments) as the
// unit does, in the caller's namespace: prefix it with `ip netns exec NS`.
// The unit's umask (sh), its limits (prlimit, as systemd sets them before
// the exec), its user and group with no supplementary groups, exactly its
// capabilities and no_new_privs (setpriv). Each step execs the next, so the
// PID the caller starts is the daemon's.
func (u *Unit) Argv(argv ...string) []string {
	out := []string{"sh", "-c", fmt.Sprintf(`umask %04o && exec "$@"`, u.UMask), "ovfwd-unit", "prlimit"}
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
	out = append(out, "--", "setpriv", "--reuid", strconv.Itoa(u.UID), "--regid", strconv.Itoa(u.GID), "--clear-groups",
		"--inh-caps", plus(u.Ambient), "--ambient-caps", plus(u.Ambient), "--bounding-set", plus(u.Bounding))
	if u.NoNewPrivs {
		out = append(out, "--no-new-privs")
	}
	out = append(out, "--")
	return append(out, argv...)
}
