// Command ovfwd is the appliance's one binary. It parses flags and hands off
// to the packages that hold the logic.
package main

import (
	"fmt"
	"os"

	"github.com/ovfwd/ovfwd/cmd/ovfwd/version"
)

const usage = `usage: ovfwd <command> [flags]

commands:
  run      run the appliance from a config file
  check    validate a config file
  status   show a running appliance's state
  lab      run the namespace lab
  pki      make a CA, server and client profiles
  bench    measure (fwd, vpn, mlx5)
  probe    list ConnectX functions and their VFIO state
  version  print the version
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "version":
		fmt.Println("ovfwd", version.Version)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "ovfwd: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
}
