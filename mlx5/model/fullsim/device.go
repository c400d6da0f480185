package fullsim

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/model/dpsim"
	"github.com/ovfwd/ovfwd/mlx5/model/sim"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// Config selects the modelled function and how its DMA behaves.
type Config struct {
	// Sim is the function's identity and caps; the zero value means
	// sim.DefaultConfig().
	Sim sim.Config
	// Flush evicts every line the device writes (no-DDIO DMA, for benchmarks).
	Flush bool
	// HCA are the driver's bring-up options.
	HCA mlx5.Options
}

// Device is one modelled function with the driver brought up on it.
type Device struct {
	cfg   Config
	model *sim.Device
	mem   *sim.Memory
	view  *dpsim.Memory // the IOMMU as the data-path engines see it
	iommu *iommu
	hca   *mlx5.HCA

	// gen counts command doorbells: any command may create or destroy
	// objects, so cached bindings are revalidated when it moves.
	gen atomic.Uint64

	mu     sync.Mutex // receive engines, routes, vport filter, bindings
	rx     []*rxEngine
	tx     []*txEngine
	routes [16]route
	victim int
	vport  vportFilter
	sinks  []dpsim.Sink
	sqns   []uint32 // queue index → SQN of the open port
	rqns   []uint32 // queue index → RQN
	errs   []error

	// Counters of frames the device dropped before any RQ.
	Stats Stats
}

// Stats counts receive-side drops before an RQ was chosen.
type Stats struct {
	Filtered uint64 // destination MAC not accepted by the vport
	NoRoute  uint64 // no flow table entry / TIR / RQ reached
	NotReady uint64 // the RQ reached is not RDY or cannot be served
	// Reflected counts sent frames the vport's local loopback fed back.
	Reflected uint64
}

// Open creates the model and brings the driver up on it (mlx5.Open).
func Open(cfg Config) (*Device, error) {
	if cfg.Sim.LogCmdqSize == 0 {
		cfg.Sim = sim.DefaultConfig()
	}
	d := &Device{cfg: cfg, mem: sim.NewMemory()}
	d.model = sim.New(cfg.Sim, d.mem)
	d.view = dpsim.NewMappedMemory(d.model.LKeyValid)
	d.iommu = &iommu{mem: d.mem, view: d.view, sizes: map[uint64]int{}}
	d.model.OnUARWrite(d.uarWrite)
	h, err := mlx5.Open(mlx5.Bus{MMIO: &mmio{d}, DMA: d.iommu, Config: d.model}, cfg.HCA)
	if err != nil {
		return nil, err
	}
	d.hca = h
	return d, nil
}

// HCA is the driver's handle.
func (d *Device) HCA() *mlx5.HCA { return d.hca }

// Model is the command model.
func (d *Device) Model() *sim.Device { return d.model }

// OpenPort creates a forwarding port (mlx5.NewFwdPort) and records its
// queue order, so sinks and statistics can be given per queue index.
func (d *Device) OpenPort(cfg mlx5.FwdPortConfig) (*mlx5.FwdPort, error) {
	p, err := mlx5.NewFwdPort(d.hca, cfg)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.sqns = d.sqns[:0]
	d.rqns = d.rqns[:0]
	for q, sq := range p.Objects.SQs {
		d.sqns = append(d.sqns, sq.SQN)
		d.rqns = append(d.rqns, p.Objects.RQs[q].RQN)
	}
	d.mu.Unlock()
	return p, nil
}

// SetSink sets where queue q's transmitted frames go (nil: counted only).
// The frame slice is valid only during the call.
func (d *Device) SetSink(q int, s dpsim.Sink) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.sinks) <= q {
		d.sinks = append(d.sinks, nil)
	}
	d.sinks[q] = s
	for _, e := range d.tx {
		if e.queue == q {
			e.q.Sink = d.wire(s)
		}
	}
}

// Err reports every error the device met: doorbells it could not serve,
// send queues in the error state (bad lkey, unmapped IOVA, malformed WQE)
// and receive WQEs it refused (bad lkey, byte count, unmapped buffer).
func (d *Device) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	errs := append([]error(nil), d.errs...)
	for _, e := range d.tx {
		if err := e.q.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range d.rx {
		if n := e.q.Stats.Faults; n > 0 {
			errs = append(errs, fmt.Errorf("fullsim: RQ %#x: %d frames dropped on a WQE with an invalid lkey or byte count, or an unmapped buffer", e.rqn, n))
		}
	}
	return errors.Join(errs...)
}

func (d *Device) fail(err error) {
	if len(d.errs) < 64 {
		d.errs = append(d.errs, err)
	}
}

// Close tears the driver down (mlx5.HCA.Close: EQ, UAR, TEARDOWN_HCA, page
// reclaim, DISABLE_HCA) and then checks that the model holds nothing: no
// objects, no firmware pages, no DMA mappings in either view, no DMA fault.
// Close the ports first.
func (d *Device) Close() error {
	if d.hca == nil {
		return nil
	}
	err := d.hca.Close()
	d.hca = nil
	d.mu.Lock()
	d.rx, d.tx = nil, nil
	d.routes = [16]route{}
	d.mu.Unlock()
	return errors.Join(err, d.Leaks())
}

// Leaks lists what the model still holds, as an error (nil: nothing).
func (d *Device) Leaks() error {
	var errs []error
	if o := d.model.Objects(); len(o) > 0 {
		errs = append(errs, fmt.Errorf("fullsim: objects alive: %v", o))
	}
	if n := d.model.PagesHeld(); n > 0 {
		errs = append(errs, fmt.Errorf("fullsim: firmware holds %d pages", n))
	}
	if n := d.mem.Mapped(); n > 0 {
		errs = append(errs, fmt.Errorf("fullsim: %d DMA regions still mapped", n))
	}
	if n := d.view.Mapped(); n > 0 {
		errs = append(errs, fmt.Errorf("fullsim: %d IOMMU pages still mapped", n))
	}
	if f := d.mem.Faults(); len(f) > 0 {
		errs = append(errs, fmt.Errorf("fullsim: DMA faults: %v", f))
	}
	return errors.Join(errs...)
}

// mmio is BAR0 as the driver sees it: the command model, with the command
// doorbell counted so cached bindings get revalidated.
type mmio struct{ d *Device }

func (m *mmio) Read32(off uint32) uint32 { return m.d.model.Read32(off) }

func (m *mmio) Write32(off uint32, v uint32) {
	if off == prm.InitCmdDoorbell {
		m.d.gen.Add(1)
	}
	m.d.model.Write32(off, v)
	if off == prm.InitCmdDoorbell {
		// Also after: a command's effects are visible once it completed.
		m.d.gen.Add(1)
	}
}

func (m *mmio) Write64(off uint32, v uint64) { m.d.model.Write64(off, v) }

// iommu is the DMA seam: the command model's memory, with every region also
// mapped into the engines' page table, whole pages at a time.
type iommu struct {
	mu    sync.Mutex
	mem   *sim.Memory
	view  *dpsim.Memory
	sizes map[uint64]int
}

func (m *iommu) Alloc(size, align int) ([]byte, uint64, error) {
	size = (size + 4095) &^ 4095
	buf, iova, err := m.mem.Alloc(size, align)
	if err != nil {
		return nil, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.view.Map(iova, buf); err != nil {
		m.mem.Free(iova)
		return nil, 0, err
	}
	m.sizes[iova] = size
	return buf, iova, nil
}

func (m *iommu) Free(iova uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mem.Free(iova); err != nil {
		return err
	}
	m.view.Unmap(iova, m.sizes[iova])
	delete(m.sizes, iova)
	return nil
}
