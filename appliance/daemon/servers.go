package daemon

import (
	"github.com/ovfwd/ovfwd/appliance/metrics"
	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
)

func (d *daemon) startServers(cfg *config.Config) error {
	if cfg.Status.Socket != "" {
		s, err := status.ListenCommands(cfg.Status.Socket, d.snapshot, d.command)
		if err != nil {
			return err
		}
		d.status = s
		d.log.Info("status socket", "path", cfg.Status.Socket)
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
