package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ovfwd/ovfwd/appliance/preflight"
	"github.com/ovfwd/ovfwd/config"
)

// unitUser is the user the packaged unit runs ovfwd as.
const unitUser = "ovfwd"

func checkCmd(args []string) error {
	fs := newFlags("check", "[-c] FILE [-user NAME]")
	path := fs.String("c", "", "config file (or give it as the argument)")
	as := fs.String("user", unitUser, "check as this user, the one the unit runs ovfwd as (root runs the check in a child as it)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 0, 1); err != nil {
		return err
	}
	file := *path
	if len(pos) == 1 {
		file = pos[0]
	}
	if file == "" {
		file = defaultConfig
	}
	if os.Getenv(preflight.ChildEnv) == "" {
		if done, err := checkAsUser(file, *as); done {
			return err
		}
	}
	c, err := config.Load(file)
	if err != nil {
		return err
	}
	rep := preflight.Check(c)
	for _, w := range rep.Warnings {
		fmt.Fprintf(os.Stderr, "warning: %v\n", w)
	}
	if len(rep.Errors) > 0 {
		return rep.Errors
	}
	var ports []string
	for _, p := range c.Ports {
		where := p.IfName
		if where == "" {
			where = p.PCI
		}
		ports = append(ports, fmt.Sprintf("%s (%s %s)", p.Name, p.Driver, where))
	}
	vpn := "off"
	if c.VPN.Enabled {
		vpn = fmt.Sprintf("on, udp port %d", c.VPN.Port)
	}
	fmt.Printf("ok: %s: %s mode, %d ports [%s], %d static routes, vpn %s\n",
		file, c.Appliance.Mode, len(c.Ports), strings.Join(ports, ", "), len(c.Routes), vpn)
	return nil
}

// checkAsUser runs the check as user name when this process is someone
// else: root re-runs it in a child as that user; anyone else checks as
// itself and says so. done reports that the child ran (err its outcome).
func checkAsUser(file, name string) (done bool, err error) {
	u, lerr := preflight.LookupUser(name)
	switch {
	case lerr != nil && os.Geteuid() == 0:
		fmt.Fprintf(os.Stderr, "warning: no user %s here (the package creates it): checked as root, which reads what the unit's user may not\n", name)
		return false, nil
	case lerr != nil:
		fmt.Fprintf(os.Stderr, "warning: no user %s here: checked as uid %d\n", name, os.Getuid())
		return false, nil
	case u.UID == os.Geteuid():
		return false, nil
	case os.Geteuid() != 0:
		fmt.Fprintf(os.Stderr, "warning: checked as uid %d, not as %s: run ovfwd check as root (or as %s) to check what the unit can read\n", os.Getuid(), name, name)
		return false, nil
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return true, err
	}
	cmd, err := preflight.Command(u, "check", abs)
	if err != nil {
		return true, err
	}
	cmd.Dir = "/"
	fmt.Fprintf(os.Stderr, "checking as %s, as the unit runs ovfwd\n", u)
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		return true, fmt.Errorf("cannot run the check as %s: %v (the binary must be executable by that user)", name, err)
	}
	return true, nil
}
