package main

import (
	"context"
	"fmt"
	"os"

	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/simlab"
)

func labCmd(args []string) error {
	fs := newFlags("lab", "[-duration D] [-keep] [-clean] [-no-vpn] [-driver afxdp|mlx5-sim]")
	d := fs.Duration("duration", 0, "stop after this long (0: until Ctrl-C)")
	keep := fs.Bool("keep", false, "leave the lab up at exit (remove it later with -clean)")
	clean := fs.Bool("clean", false, "remove a kept or crashed lab and exit")
	noVPN := fs.Bool("no-vpn", false, "leave out the openvpn client")
	driver := fs.String("driver", "afxdp", "appliance ports: afxdp (the daemon on AF_XDP) or mlx5-sim (the engine on the mlx5 device model)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *clean:
		return lab.Clean(os.Stdout)
	case *driver == "mlx5-sim":
		return simlab.Run(context.Background(), simlab.Options{Duration: *d})
	case *driver != "afxdp":
		fmt.Fprintf(os.Stderr, "ovfwd lab: unknown driver %q (afxdp or mlx5-sim)\n", *driver)
		return errUsage
	}
	return lab.Run(context.Background(), lab.Options{Duration: *d, Keep: *keep, NoVPN: *noVPN})
}
