// Package mlx5sim is the daemon's `driver = "mlx5-sim"` backend: the whole
// userspace mlx5 driver on the device model (mlx5/model/fullsim: the
// command model and the data-path engines), the same bring-up, objects and
// data path as vfio on modelled hardware. It stays out of package daemon
// so that the daemon links no device model; cmd/ovfwd registers it
// (daemon.RegisterMLX5Backend) for labs and tests.
package mlx5sim

import (
	"net"

	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/model/fullsim"
)

// Mode is what status says of each queue of a modelled port.
const Mode = "mlx5-sim (device model, no cable)"

// Open brings up a modelled function and the forwarding port on it. The
// modelled port has no cable: frames it sends are dropped by the model and
// none arrive, so it serves labs that inject traffic, not forwarding.
func Open(p *config.Port, pc mlx5.FwdPortConfig) (fwd.Port, *mlx5.HCA, error) {
	mac := p.MAC
	if mac == nil {
		// Locally administered, unicast, distinct per port.
		mac = net.HardwareAddr{0x02, 'o', 'v', 's', 0, byte(pc.PoolID)}
	}
	fp, dev, err := fullsim.NewPortConfig(fullsim.Config{}, mac, pc)
	if err != nil {
		return nil, nil, err
	}
	return fp, dev.HCA(), nil
}
