package daemon

import (
	"errors"
	"fmt"
	"math/bits"
	"net"

	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/model/fullsim"
)

// mlx5PortConfig maps [[port]] and [port.mlx5] onto the userspace driver's
// port configuration (shared by vfio and mlx5-sim).
func mlx5PortConfig(p *config.Port, index, queues int, bridge bool) mlx5.FwdPortConfig {
	c := mlx5.FwdPortConfig{
		Name:        p.Name,
		Queues:      queues,
		MTU:         p.MTU,
		PoolID:      uint16(index + 1),
		Promiscuous: bridge, // a bridge must see every destination MAC
		LogWQEs:     uint8(p.MLX5.RQLogSize),
		LogSQ:       uint8(p.MLX5.SQLogSize),
	}
	if n := p.MLX5.StridesPerWQE; n > 0 { // 0: auto, from the caps
		c.LogStrides = uint8(bits.TrailingZeros(uint(n)))
	}
	// Config 0 turns prefetching off, as the data path's 0 does.
	c.Rx.PrefetchDistance = p.MLX5.PrefetchDistance
	c.Tx.FragmentWQEBBs = p.MLX5.TxFragmentSize / 64
	c.Tx.PadToEdge = p.MLX5.TxEdgePolicy == config.TxEdgeNOP
	return c
}

// vfioHugepages is the 2 MiB-page DMA budget of a VFIO port: bring-up
// (command queue, mailboxes, firmware pages, EQ: what `ovfwd probe` uses)
// plus per queue the RX window (2^(rq_log_size+6) strides of ≤ 4 KiB and
// the spares) and the SQ and CQ rings.
func vfioHugepages(c mlx5.FwdPortConfig) int {
	const probe, page = 4, 2 << 20
	logWQEs := max(int(c.LogWQEs), 4)
	perQueue := (1<<(logWQEs+6))*4096 + 256*4096 + (64 << max(int(c.LogSQ), 10)) + 4*65536
	return probe + max(c.Queues, 1)*((perQueue+page-1)/page)
}

// openVFIO brings up the ConnectX function at p.PCI through VFIO and
// creates the forwarding port on it. Closing the port (fp) releases its
// objects; closeAll then tears the function down and unmaps its memory.
func openVFIO(p *config.Port, pc mlx5.FwdPortConfig) (fp *mlx5.FwdPort, closeAll func() error, err error) {
	if p.PCI == "" {
		return nil, nil, errors.New("driver vfio needs pci")
	}
	v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, p.PCI, vfioHugepages(pc))
	if err != nil {
		return nil, nil, err
	}
	h, err := mlx5.Open(v.Bus(), mlx5.Options{})
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("%s: bring-up: %w", p.PCI, err), v.Close())
	}
	if fp, err = mlx5.NewFwdPort(h, pc); err != nil {
		return nil, nil, errors.Join(err, h.Close(), v.Close())
	}
	return fp, func() error { return errors.Join(fp.Close(), h.Close(), v.Close()) }, nil
}

// openSim brings up the mlx5 device model (mlx5/model/fullsim: the command model
// and the data-path engines) with the whole userspace driver on top: the
// same bring-up, objects and data path as vfio, on modelled hardware. The
// modelled port has no cable: frames it sends are dropped by the model and
// none arrive, so it serves labs that inject traffic, not forwarding.
func openSim(p *config.Port, pc mlx5.FwdPortConfig) (fwd.Port, error) {
	mac := p.MAC
	if mac == nil {
		// Locally administered, unicast, distinct per port.
		mac = net.HardwareAddr{0x02, 'o', 'v', 's', 0, byte(pc.PoolID)}
	}
	fp, _, err := fullsim.NewPortConfig(fullsim.Config{}, mac, pc)
	if err != nil {
		return nil, err
	}
	return fp, nil
}
