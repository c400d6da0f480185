package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"sync"
	"time"

	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
)

// mlx5PortConfig maps [[port]] and [port.mlx5] onto the userspace driver's
// port configuration (shared by vfio and the registered mlx5 backends).
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

// serviceInterval is how often the control plane services each mlx5
// function's event queue and health (mlx5.HCA.Service).
const mlx5ServiceInterval = time.Second

// openVFIO brings up the ConnectX function at p.PCI through VFIO and
// creates the forwarding port on it, with the function's events and health
// serviced every second. closeAll stops that, closes the port, tears the
// function down and unmaps its memory.
func openVFIO(p *config.Port, pc mlx5.FwdPortConfig, log *slog.Logger) (fp *mlx5.FwdPort, closeAll func() error, err error) {
	if p.PCI == "" {
		return nil, nil, errors.New("driver vfio needs pci")
	}
	budget := vfioHugepages(pc)
	v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, p.PCI, budget)
	if err != nil {
		return nil, nil, err
	}
	h, err := mlx5.Open(v.Bus(), mlx5.Options{})
	var pb *mlx5.PageBudgetError
	if errors.As(err, &pb) {
		// The firmware wants more pages than the estimate: size the
		// budget from its request and try once more.
		v.Close()
		budget += (pb.Asked*4096+2<<20-1)/(2<<20) + 1
		if v, err = mlx5.OpenVFIO(mlx5.DefaultPaths, p.PCI, budget); err != nil {
			return nil, nil, err
		}
		h, err = mlx5.Open(v.Bus(), mlx5.Options{})
	}
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("%s: bring-up: %w", p.PCI, err), v.Close())
	}
	if fp, err = mlx5.NewFwdPort(h, pc); err != nil {
		return nil, nil, errors.Join(err, h.Close(), v.Close())
	}
	stop := h.RunService(mlx5ServiceInterval, serviceReport(log, p.Name))
	return fp, func() error { stop(); return errors.Join(fp.Close(), h.Close(), v.Close()) }, nil
}

// serviceReport logs what an mlx5 function's service found.
func serviceReport(log *slog.Logger, port string) func(error) {
	return func(err error) { log.Error("mlx5 function service", "port", port, "err", err) }
}

// An MLX5Opener brings the userspace mlx5 driver up on something other
// than a VFIO function: it returns the forwarding port, which releases
// everything on Close, and the function the daemon services.
type MLX5Opener func(p *config.Port, pc mlx5.FwdPortConfig) (fwd.Port, *mlx5.HCA, error)

type mlx5Backend struct {
	mode string
	open MLX5Opener
}

// mlx5Backends are the drivers registered with RegisterMLX5Backend. The
// daemon builds in only the hardware backends (AF_XDP, VFIO); the device
// model ("mlx5-sim") is registered by the binary, so the daemon links no
// model.
var mlx5Backends struct {
	sync.Mutex
	m map[string]mlx5Backend
}

// RegisterMLX5Backend makes ports with `driver = driver` open through
// open; mode is what status says of each of their queues. Call it before
// Run.
func RegisterMLX5Backend(driver, mode string, open MLX5Opener) {
	mlx5Backends.Lock()
	defer mlx5Backends.Unlock()
	if mlx5Backends.m == nil {
		mlx5Backends.m = map[string]mlx5Backend{}
	}
	mlx5Backends.m[driver] = mlx5Backend{mode: mode, open: open}
}

func registeredMLX5(driver string) (mlx5Backend, bool) {
	mlx5Backends.Lock()
	defer mlx5Backends.Unlock()
	b, ok := mlx5Backends.m[driver]
	return b, ok
}

// openRegistered opens p on a registered backend, its function serviced
// as a VFIO one is.
func openRegistered(b mlx5Backend, p *config.Port, pc mlx5.FwdPortConfig, log *slog.Logger) (fwd.Port, func() error, error) {
	fp, hca, err := b.open(p, pc)
	if err != nil {
		return nil, nil, err
	}
	stop := hca.RunService(mlx5ServiceInterval, serviceReport(log, p.Name))
	return fp, func() error { stop(); return fp.Close() }, nil
}
