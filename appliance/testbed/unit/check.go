package unit

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// capBits are the capability numbers of linux/capability.h.
var capBits = map[string]uint{
	"chown": 0, "dac_override": 1, "dac_read_search": 2, "fowner": 3, "fsetid": 4, "kill": 5, "setgid": 6,
	"setuid": 7, "setpcap": 8, "linux_immutable": 9, "net_bind_service": 10, "net_broadcast": 11,
	"net_admin": 12, "net_raw": 13, "ipc_lock": 14, "ipc_owner": 15, "sys_module": 16, "sys_rawio": 17,
	"sys_chroot": 18, "sys_ptrace": 19, "sys_pacct": 20, "sys_admin": 21, "sys_boot": 22, "sys_nice": 23,
	"sys_resource": 24, "sys_time": 25, "sys_tty_config": 26, "mknod": 27, "lease": 28, "audit_write": 29,
	"audit_control": 30, "setfcap": 31, "mac_override": 32, "mac_admin": 33, "syslog": 34, "wake_alarm": 35,
	"block_suspend": 36, "audit_read": 37, "perfmon": 38, "bpf": 39, "checkpoint_restore": 40,
}

// Mask is the kernel's capability bit set for names.
func Mask(names []string) uint64 {
	var m uint64
	for _, n := range names {
		m |= 1 << capBits[n]
	}
	return m
}

// wrappers are the commands of Argv's chain (and taskset, which harnesses
// put in front): a PID still showing one has not reached the daemon.
var wrappers = []string{"ip", "unshare", "sh", "prlimit", "setpriv", "taskset"}

// Verify checks that process pid, started through Argv, runs as the unit
// says: its uid and gid, no supplementary groups, exactly the unit's
// effective, ambient and bounding capabilities, no_new_privs and the
// limits (soft and hard). It waits up to 10 s for the chain of execs to
// reach the program.
func (u *Unit) Verify(pid int) error {
	var st map[string]string
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 1000; i++ {
		if st, err = readStatus(pid); err != nil {
			return err
		}
		if strings.HasPrefix(st["State"], "Z") {
			return fmt.Errorf("unit: pid %d (%s) exited", pid, st["Name"])
		}
		if !slices.Contains(wrappers, st["Name"]) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("unit: pid %d is still %s after 10 s", pid, st["Name"])
		}
		time.Sleep(10 * time.Millisecond)
	}
	var bad []string
	ids := func(field string, want int) {
		for _, f := range strings.Fields(st[field]) { // real, effective, saved, fs
			if f != strconv.Itoa(want) {
				bad = append(bad, fmt.Sprintf("%s %q, want %d", field, st[field], want))
				return
			}
		}
	}
	ids("Uid", u.UID)
	ids("Gid", u.GID)
	if g := st["Groups"]; g != "" {
		bad = append(bad, fmt.Sprintf("supplementary groups %q, want none", g))
	}
	for _, c := range []struct {
		field string
		want  uint64
	}{{"CapEff", Mask(u.Ambient)}, {"CapAmb", Mask(u.Ambient)}, {"CapBnd", Mask(u.Bounding)}} {
		if got, err := strconv.ParseUint(st[c.field], 16, 64); err != nil || got != c.want {
			bad = append(bad, fmt.Sprintf("%s %s, want %016x", c.field, st[c.field], c.want))
		}
	}
	if u.NoNewPrivs && st["NoNewPrivs"] != "1" {
		bad = append(bad, fmt.Sprintf("NoNewPrivs %q, want 1", st["NoNewPrivs"]))
	}
	limits, err := readLimits(pid)
	if err != nil {
		return err
	}
	for _, l := range u.Limits {
		want := "unlimited"
		if l.Value != Infinity {
			want = strconv.FormatUint(l.Value, 10)
		}
		if got := limits[l.Name]; got != [2]string{want, want} {
			bad = append(bad, fmt.Sprintf("limit %s %v, want %s soft and hard", l.Name, got, want))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("unit: pid %d (%s) does not run as the unit says: %s", pid, st["Name"], strings.Join(bad, "; "))
	}
	return nil
}

var reported sync.Once

// Report verifies pid (see Verify) and, the first time in this process,
// logs what the daemon runs with: each suite says it once.
func (u *Unit) Report(pid int, logf func(format string, args ...any)) error {
	if err := u.Verify(pid); err != nil {
		return err
	}
	reported.Do(func() { logf("started as packaging/ovfwd.service runs ovfwd (verified in /proc/%d): %s", pid, u) })
	return nil
}

// readStatus reads /proc/PID/status into a map.
func readStatus(pid int) (map[string]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, fmt.Errorf("unit: %v", err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, nil
}

// limitRows are /proc/PID/limits' row names for prlimit's.
var limitRows = map[string]string{"Max locked memory": "memlock", "Max open files": "nofile", "Max nice priority": "nice"}

// readLimits reads the soft and hard limits of /proc/PID/limits by
// prlimit name.
func readLimits(pid int) (map[string][2]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return nil, fmt.Errorf("unit: %v", err)
	}
	m := map[string][2]string{}
	for _, l := range strings.Split(string(data), "\n") {
		for row, name := range limitRows {
			if rest, ok := strings.CutPrefix(l, row); ok {
				if f := strings.Fields(rest); len(f) >= 2 {
					m[name] = [2]string{f[0], f[1]}
				}
			}
		}
	}
	return m, nil
}
