package unit

import (
	"bufio"
	"fmt"
	"os/user"
	"strconv"
	"strings"

	"github.com/ovfwd/ovfwd/packaging"
	"golang.org/x/sys/unix"
)

// Unit is what the unit file gives the daemon.
type Unit struct {
	User, Group string
	// UID and GID are what the daemon runs as: User's, or 65534 where
	// there is no such user here (NoUser says so).
	UID, GID int
	NoUser   bool
	// Ambient and Bounding are lower-case capability names without CAP_.
	Ambient, Bounding []string
	Limits            []Limit
	NoNewPrivs        bool
	UMask             uint32 // 0o022 when the unit sets none (systemd's default)
	// TunNode is set where this machine's /dev/net/tun is closed to the
	// user (a container's 0600 node; udev makes it 0666 on a host, and
	// the unit's DeviceAllow=/dev/net/tun rw relies on that): the daemon
	// then gets a 0666 node of the same device in a mount namespace of its
	// own (Argv). It is the node's device number.
	TunNode uint64
}

// Limit is one Limit*= line as an rlimit: systemd sets soft and hard alike.
type Limit struct {
	Name     string // prlimit's option name: memlock, nofile, nice
	Resource int
	Unit     uint64 // the unit's value; Infinity for infinity
	// Value is what the daemon gets: Unit, or this machine's hard limit
	// where Unit is above it and the harness cannot raise it (Capped).
	Value  uint64
	Capped bool
}

// Infinity is an rlimit of infinity.
const Infinity = ^uint64(0)

const tunPath = "/dev/net/tun"

// nobody is the uid and gid the daemon runs as where the package's user does
// not exist.
const nobody = 65534

// Load parses the packaged unit and resolves its user and limits on this
// machine.
func Load() (*Unit, error) {
	u, err := Parse(packaging.Unit)
	if err != nil {
		return nil, err
	}
	if err := u.resolve(); err != nil {
		return nil, err
	}
	return u, nil
}

// Parse reads the [Service] lines the daemon's privileges come from. A
// Limit*= line it does not know how to apply is an error: a limit the unit
// gains must be applied in the tests too.
func Parse(text string) (*Unit, error) {
	u := &Unit{UMask: 0o022}
	caps := func(v string) []string {
		var out []string
		for _, c := range strings.Fields(v) {
			out = append(out, strings.ToLower(strings.TrimPrefix(c, "CAP_")))
		}
		return out
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(err error) error { return fmt.Errorf("unit: ovfwd.service line %d: %s=%s: %v", n, k, v, err) }
		switch k {
		case "User":
			u.User = v
		case "Group":
			u.Group = v
		case "AmbientCapabilities":
			u.Ambient = append(u.Ambient, caps(v)...)
		case "CapabilityBoundingSet":
			u.Bounding = append(u.Bounding, caps(v)...)
		case "NoNewPrivileges":
			u.NoNewPrivs = v == "yes" || v == "true"
		case "UMask":
			m, err := strconv.ParseUint(v, 8, 32)
			if err != nil {
				return nil, bad(err)
			}
			u.UMask = uint32(m)
		case "LimitMEMLOCK", "LimitNOFILE":
			l := Limit{Name: "memlock", Resource: unix.RLIMIT_MEMLOCK, Unit: Infinity}
			if k == "LimitNOFILE" {
				l.Name, l.Resource = "nofile", unix.RLIMIT_NOFILE
			}
			if v != "infinity" {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return nil, bad(fmt.Errorf("teach package unit this form (%v)", err))
				}
				l.Unit = n
			}
			u.Limits = append(u.Limits, l)
		case "LimitNICE":
			// systemd.exec(5): "+N"/"-N" is a nice level, a bare number
			// the raw rlimit (20 - nice).
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, bad(err)
			}
			if strings.HasPrefix(v, "+") || strings.HasPrefix(v, "-") {
				n = 20 - n
			}
			u.Limits = append(u.Limits, Limit{Name: "nice", Resource: unix.RLIMIT_NICE, Unit: uint64(n)})
		default:
			if strings.HasPrefix(k, "Limit") {
				return nil, bad(fmt.Errorf("teach package unit to apply %s", k))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if u.User == "" || len(u.Ambient) == 0 || len(u.Bounding) == 0 {
		return nil, fmt.Errorf("unit: ovfwd.service gives user %q, ambient %v, bounding %v", u.User, u.Ambient, u.Bounding)
	}
	for _, c := range append(u.Ambient, u.Bounding...) {
		if _, ok := capBits[c]; !ok {
			return nil, fmt.Errorf("unit: ovfwd.service names capability %q, unknown to package unit", c)
		}
	}
	return u, nil
}

// resolve finds the uid and gid and what each limit can be here.
func (u *Unit) resolve() error {
	u.UID, u.GID, u.NoUser = nobody, nobody, true
	if usr, err := user.Lookup(u.User); err == nil {
		u.UID, _ = strconv.Atoi(usr.Uid)
		u.GID, _ = strconv.Atoi(usr.Gid)
		u.NoUser = false
	}
	if u.Access(tunPath, Read|Write) != nil {
		var st unix.Stat_t
		if err := unix.Stat(tunPath, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR {
			u.TunNode = st.Rdev
		}
	}
	self, err := readStatus(unix.Getpid())
	if err != nil {
		return err
	}
	eff, _ := strconv.ParseUint(self["CapEff"], 16, 64)
	canRaise := eff&(1<<capBits["sys_resource"]) != 0
	for i := range u.Limits {
		l := &u.Limits[i]
		var cur unix.Rlimit
		if err := unix.Getrlimit(l.Resource, &cur); err != nil {
			return fmt.Errorf("unit: getrlimit %s: %v", l.Name, err)
		}
		l.Value, l.Capped = l.Unit, false
		if l.Unit > cur.Max && !canRaise {
			l.Value, l.Capped = cur.Max, true
		}
	}
	return nil
}

// Limit returns the unit's limit by prlimit name (memlock, nofile, nice).
func (u *Unit) Limit(name string) (Limit, bool) {
	for _, l := range u.Limits {
		if l.Name == name {
			return l, true
		}
	}
	return Limit{}, false
}

func (l Limit) String() string {
	s := func(v uint64) string {
		if v == Infinity {
			return "unlimited"
		}
		return strconv.FormatUint(v, 10)
	}
	if l.Capped {
		return fmt.Sprintf("%s=%s (unit: %s; this machine's hard limit, which the harness cannot raise without CAP_SYS_RESOURCE)", l.Name, s(l.Value), s(l.Unit))
	}
	return l.Name + "=" + s(l.Value)
}

// String says what the daemon runs with, for the suites' logs.
func (u *Unit) String() string {
	who := fmt.Sprintf("uid %d gid %d (user %s)", u.UID, u.GID, u.User)
	if u.NoUser {
		who = fmt.Sprintf("uid %d gid %d (no user %s here: nobody/nogroup stands in)", u.UID, u.GID, u.User)
	}
	var ls []string
	for _, l := range u.Limits {
		ls = append(ls, l.String())
	}
	s := fmt.Sprintf("%s, ambient caps %s, bounding set %s, no_new_privs %v, umask %04o, limits %s",
		who, strings.Join(u.Ambient, ","), strings.Join(u.Bounding, ","), u.NoNewPrivs, u.UMask, strings.Join(ls, " "))
	if u.TunNode != 0 {
		s += "; " + tunPath + " is closed to that user here (udev makes it 0666 on a host): the daemon gets a 0666 node of it in a mount namespace of its own"
	}
	return s
}
