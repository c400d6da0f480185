// Command ovfwd is the appliance's one binary. It parses flags and hands off
// to the packages that hold the logic. Each command is in the file of its
// name; flags.go holds what they share.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/ovfwd/ovfwd/config"
)

const usage = `usage: ovfwd <command> [flags]

commands:
  run      run the appliance from a config file      ovfwd run -c /etc/ovfwd/ovfwd.toml
  check    validate a config file as the unit's user  ovfwd check [-c] FILE [-user NAME]
  import   translate an OpenVPN server.conf            ovfwd import SERVER.CONF [-o FILE] [-ccd DIR] [-port IFNAME=ADDR/LEN …]
  status   show a running appliance's state          ovfwd status [-s SOCKET | -c FILE] [-json]
  reload   reload the running daemon's config, fail if it rejects it  ovfwd reload [-s SOCKET | -c FILE] [-pid PID]
  kill     disconnect a VPN client                   ovfwd kill [-s SOCKET | -c FILE] [-halt] NAME|ADDR
  lab      run the namespace lab                      ovfwd lab [-duration D] [-keep] [-clean] [-no-vpn] [-driver afxdp|mlx5-sim]
  pki      make a CA, server and client profiles      ovfwd pki init DIR | pki client DIR NAME -remote HOST:PORT | pki site DIR NAME | pki revoke DIR NAME
  bench    measure                                    ovfwd bench fwd|vpn|mlx5
  probe    list ConnectX functions and their VFIO state  ovfwd probe [-pci ADDR]
  drain    move clients to other appliances          ovfwd drain [-s SOCKET | -c FILE] [-deadline D] [-cancel]
  version  print the version

Run "ovfwd <command> -h" for a command's flags.
`

// defaultConfig and defaultSocket are where the package installs them.
const (
	defaultConfig = "/etc/ovfwd/ovfwd.toml"
	defaultSocket = "/run/ovfwd/ovfwd.sock"
)

// errUsage marks a command-line mistake (exit status 2).
var errUsage = errors.New("usage")

var commands = map[string]func(args []string) error{
	"run":     runCmd,
	"check":   checkCmd,
	"import":  importCmd,
	"status":  statusCmd,
	"reload":  reloadCmd,
	"kill":    killCmd,
	"lab":     labCmd,
	"pki":     pkiCmd,
	"bench":   benchCmd,
	"probe":   probeCmd,
	"drain":   drainCmd,
	"version": versionCmd,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	name := os.Args[1]
	switch name {
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
		return
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "ovfwd: unknown command %q\n\n%s", name, usage)
		os.Exit(2)
	}
	err := cmd(os.Args[2:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		var list config.ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				fmt.Fprintln(os.Stderr, e)
			}
		} else {
			fmt.Fprintf(os.Stderr, "ovfwd %s: %v\n", name, err)
		}
		os.Exit(1)
	}
}
