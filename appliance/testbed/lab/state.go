package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// StateRoot holds one work directory per lab run, named by the lab's PID:
// the PKI, ovfwd.toml, the status socket, the logs and state.json, which
// lists what the run made so that a later run (or Clean) can remove it
// after a crash or a --keep.
const StateRoot = "/run/ovfwd-lab"

// state is a run's state.json.
type state struct {
	LabPID     int      `json:"lab_pid"`
	LabStart   uint64   `json:"lab_start"` // the lab process's start time (clock ticks since boot)
	Dir        string   `json:"dir"`
	Namespaces []string `json:"namespaces"`
	Procs      []proc   `json:"procs"`
}

// proc is a process the lab started. Start tells it from a later process
// that got the same PID: Clean signals only a PID whose start time still
// matches.
type proc struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

func (s *state) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.Dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.Dir, "state.json"))
}

// addProc records a started process and saves the state at once, so a
// crash right after still leaves its PID behind for Clean.
func (s *state) addProc(name string, pid int) error {
	start, err := procStart(pid)
	if err != nil {
		return err
	}
	s.Procs = append(s.Procs, proc{Name: name, PID: pid, Start: start})
	return s.save()
}

// procStart is field 22 of /proc/PID/stat, the process's start time.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: count
	// fields from the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("lab: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("lab: /proc/%d/stat: %d fields", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 is the 20th after the name
}

// alive reports whether p is still the process the lab started.
func (p proc) alive() bool {
	start, err := procStart(p.PID)
	return err == nil && start == p.Start
}

// stop ends p: SIGTERM, then SIGKILL after grace. It signals only the PID
// recorded, and only while its start time matches.
func (p proc) stop(grace time.Duration) {
	if !p.alive() {
		return
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for i := 0; i < 1000 && p.alive() && time.Now().Before(deadline); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if p.alive() {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
		for i := 0; i < 100 && p.alive(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// remove stops s's processes (newest first), deletes its namespaces and
// its work directory.
func (s *state) remove() error {
	for i := len(s.Procs) - 1; i >= 0; i-- {
		s.Procs[i].stop(5 * time.Second)
	}
	var errs []error
	for _, ns := range s.Namespaces {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil && !strings.Contains(string(out), "No such file") {
			errs = append(errs, fmt.Errorf("lab: ip netns del %s: %v: %s", ns, err, strings.TrimSpace(string(out))))
		}
	}
	for _, p := range s.Procs {
		if p.alive() {
			errs = append(errs, fmt.Errorf("lab: %s (pid %d) did not stop", p.Name, p.PID))
		}
	}
	if s.Dir != "" {
		errs = append(errs, os.RemoveAll(s.Dir))
	}
	return errors.Join(errs...)
}

// labAlive reports whether the lab process of s still runs.
func (s *state) labAlive() bool {
	return proc{PID: s.LabPID, Start: s.LabStart}.alive()
}

// Clean removes every lab whose `ovfwd lab` process is gone — one that
// crashed or one left up with Keep — stopping the ovfwd and openvpn
// processes it started (by recorded PID), deleting its namespaces (with
// their veths and XDP programs) and its work directory; then it sweeps any
// other stale ovfwd namespaces. A lab still running is left alone.
func Clean(out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	entries, err := os.ReadDir(StateRoot)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(StateRoot, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil {
			// Crashed before its first save: nothing was started yet.
			if pid, perr := strconv.Atoi(e.Name()); perr == nil && syscall.Kill(pid, 0) != nil {
				errs = append(errs, os.RemoveAll(dir))
			}
			continue
		}
		var s state
		if err := json.Unmarshal(b, &s); err != nil {
			errs = append(errs, fmt.Errorf("lab: %s: %w", dir, err))
			continue
		}
		if s.labAlive() {
			continue
		}
		s.Dir = dir
		var pids []string
		for _, p := range s.Procs {
			if p.alive() {
				pids = append(pids, fmt.Sprintf("%s %d", p.Name, p.PID))
			}
		}
		fmt.Fprintf(out, "lab: removing the lab of pid %d (namespaces %s; stopping %s)\n",
			s.LabPID, strings.Join(s.Namespaces, " "), orNone(strings.Join(pids, ", ")))
		errs = append(errs, s.remove())
	}
	if stale := netns.Sweep(); len(stale) > 0 {
		fmt.Fprintf(out, "lab: removed %d stale namespaces of an earlier run: %s\n", len(stale), strings.Join(stale, " "))
	}
	return errors.Join(errs...)
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}
