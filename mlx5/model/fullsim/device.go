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
	// Container puts the function in an IOMMU domain shared with the other
	// functions opened with it (nil: a domain of its own).
	Container *Container
}

// Container is one IOMMU domain shared by several modelled functions: the
// model of their VFIO groups in one container. Every region any function's
// driver maps is reachable at the same IOVA by every function's engines,
// each still checking lkeys against its own command model, so a function
// transmits another's receive buffers with its own memory key.
type Container struct {
	mu      sync.Mutex
	mem     *sim.Memory
	views   []*dpsim.Memory
	regions map[uint64][]byte
}

// NewContainer is an empty shared IOMMU domain.
func NewContainer() *Container {
	return &Container{mem: sim.NewMemory(), regions: map[uint64][]byte{}}
}

// attach adds a function's engine view, with every region already mapped.
func (c *Container) attach(v *dpsim.Memory) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for iova, buf := range c.regions {
		if err := v.Map(iova, buf); err != nil {
			return err
		}
	}
	c.views = append(c.views, v)
	return nil
}

// detach removes a function's view; it reports whether it was the last.
func (c *Container) detach(v *dpsim.Memory) (last bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, w := range c.views {
		if w == v {
			c.views = append(c.views[:i], c.views[i+1:]...)
			break
		}
	}
	for iova, buf := range c.regions {
		v.Unmap(iova, len(buf))
	}
	return len(c.views) == 0
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
	c := cfg.Container
	if c == nil {
		c = NewContainer()
	}
	d := &Device{cfg: cfg, mem: c.mem}
	d.model = sim.New(cfg.Sim, d.mem)
	d.view = dpsim.NewMappedMemory(d.model.LKeyValid)
	if err := c.attach(d.view); err != nil {
		return nil, err
	}
	d.iommu = &iommu{c: c, sizes: map[uint64]int{}}
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
	err = errors.Join(err, d.Leaks())
	d.iommu.c.detach(d.view)
	return err
}

// Leaks lists what the model still holds, as an error (nil: nothing). In a
// shared Container the regions are the function's own; the domain-wide
// counts are checked while it is the only function left.
func (d *Device) Leaks() error {
	var errs []error
	if o := d.model.Objects(); len(o) > 0 {
		errs = append(errs, fmt.Errorf("fullsim: objects alive: %v", o))
	}
	if n := d.model.PagesHeld(); n > 0 {
		errs = append(errs, fmt.Errorf("fullsim: firmware holds %d pages", n))
	}
	if n := d.iommu.held(); n > 0 {
		errs = append(errs, fmt.Errorf("fullsim: %d DMA regions of this function still mapped", n))
	}
	if c := d.iommu.c; c.alone() {
		if n := d.mem.Mapped(); n > 0 {
			errs = append(errs, fmt.Errorf("fullsim: %d DMA regions still mapped", n))
		}
		if n := d.view.Mapped(); n > 0 {
			errs = append(errs, fmt.Errorf("fullsim: %d IOMMU pages still mapped", n))
		}
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

// iommu is one function's DMA seam: regions of its Container's memory,
// each also mapped into every attached function's engine view, whole pages
// at a time.
type iommu struct {
	c     *Container
	mu    sync.Mutex
	sizes map[uint64]int // this function's regions
}

func (c *Container) alone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.views) <= 1
}

func (m *iommu) held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sizes)
}

func (m *iommu) Alloc(size, align int) ([]byte, uint64, error) {
	size = (size + 4095) &^ 4095
	c := m.c
	buf, iova, err := c.mem.Alloc(size, align)
	if err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, v := range c.views {
		if err := v.Map(iova, buf); err != nil {
			for _, w := range c.views[:i] {
				w.Unmap(iova, size)
			}
			c.mem.Free(iova)
			return nil, 0, err
		}
	}
	c.regions[iova] = buf
	m.mu.Lock()
	m.sizes[iova] = size
	m.mu.Unlock()
	return buf, iova, nil
}

func (m *iommu) Free(iova uint64) error {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.mem.Free(iova); err != nil {
		return err
	}
	m.mu.Lock()
	size := m.sizes[iova]
	delete(m.sizes, iova)
	m.mu.Unlock()
	for _, v := range c.views {
		v.Unmap(iova, size)
	}
	delete(c.regions, iova)
	return nil
}
