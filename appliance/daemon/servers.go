package daemon

import (
	"fmt"
	"os/user"
	"strconv"

	"github.com/ovfwd/ovfwd/appliance/metrics"
	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
)

func (d *daemon) startServers(cfg *config.Config) error {
	if cfg.Status.Socket != "" {
		a, err := statusAccess(cfg.Status)
		if err != nil {
			return err
		}
		s, err := status.ListenAccess(cfg.Status.Socket, d.snapshot, d.command, a)
		if err != nil {
			return err
		}
		d.status = s
		d.log.Info("status socket", "path", cfg.Status.Socket, "read_gid", a.ReadGID, "write_gid", a.WriteGID)
	}
	if cfg.Metrics.Listen.IsValid() {
		m, err := metrics.Listen("tcp", cfg.Metrics.Listen.String(), d.snapshot)
		if err != nil {
			return err
		}
		d.metrics = append(d.metrics, m)
		d.log.Info("metrics endpoint", "addr", m.Addr().String())
	}
	if cfg.Metrics.Socket != "" {
		m, err := metrics.Listen("unix", cfg.Metrics.Socket, d.snapshot)
		if err != nil {
			return err
		}
		d.metrics = append(d.metrics, m)
		d.log.Info("metrics endpoint", "socket", cfg.Metrics.Socket)
	}
	return nil
}

// statusAccess resolves [status] read_group and write_group to the roles
// of the status and management sockets.
func statusAccess(c config.Status) (status.Access, error) {
	a := status.DefaultAccess()
	for _, g := range []struct {
		key, name string
		gid       *int
	}{{"read_group", c.ReadGroup, &a.ReadGID}, {"write_group", c.WriteGroup, &a.WriteGID}} {
		if g.name == "" {
			continue
		}
		grp, err := user.LookupGroup(g.name)
		if err != nil {
			return a, fmt.Errorf("[status] %s: %w", g.key, err)
		}
		if *g.gid, err = strconv.Atoi(grp.Gid); err != nil {
			return a, fmt.Errorf("[status] %s: gid %q: %w", g.key, grp.Gid, err)
		}
	}
	return a, nil
}
