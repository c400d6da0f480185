package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ovfwd/ovfwd/appliance/daemon"
	"github.com/ovfwd/ovfwd/appliance/daemon/mlx5sim"
	"github.com/ovfwd/ovfwd/cmd/ovfwd/version"
	"github.com/ovfwd/ovfwd/config"
)

// runCmd runs the appliance. The binary, not the daemon, links the mlx5
// device model: it registers driver "mlx5-sim" here.
func runCmd(args []string) error {
	fs := newFlags("run", "-c FILE")
	path := fs.String("c", defaultConfig, "config file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	daemon.Version = version.Version
	daemon.RegisterMLX5Backend(config.DriverMLX5Sim, mlx5sim.Mode, mlx5sim.Open)
	return daemon.Run(ctx, *path, nil)
}
