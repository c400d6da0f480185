package fullsim

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/model/sim"
)

// Port is a forwarding port on its own modelled function: Close closes the
// port and then the function (teardown, page reclaim), and reports anything
// the model still holds.
type Port struct {
	*mlx5.FwdPort
	dev *Device
}

// Device is the modelled function under the port.
func (p *Port) Device() *Device { return p.dev }

// Close destroys the port's objects and buffers, tears the function down
// and checks the model is empty.
func (p *Port) Close() error {
	if p.dev == nil {
		return nil
	}
	err := p.FwdPort.Close()
	err = errors.Join(err, p.dev.Close())
	p.dev = nil
	return err
}

// NewPort runs the whole stack on the model for driver "mlx5-sim": a
// modelled function with MAC mac (nil: the model's default), bring-up
// (mlx5.Open), and a forwarding port of queues queue pairs with RSS
// (mlx5.NewFwdPort), promiscuous so it can bridge, stride-ahead prefetch at
// the default distance (docs/mlx5.md section 3). Frames the port transmits go nowhere until Connect or
// Device.SetSink; frames reach it through Device.Inject.
//
// Each port gets a process-unique buffer pool id from 0x8000 up (its
// buffers live in its own model's memory, which no other port can send
// from); use NewPortConfig to choose it.
func NewPort(name string, mac net.HardwareAddr, mtu, queues int) (fwd.Port, *Device, error) {
	pool := uint16(0x8000 | nextPool.Add(1)&0x7FFF)
	return NewPortConfig(Config{}, mac, mlx5.FwdPortConfig{Name: name, MTU: mtu, Queues: queues, PoolID: pool,
		Promiscuous: true, Rx: dp.RxOptions{PrefetchDistance: -1}})
}

var nextPool atomic.Uint32

// NewPortConfig is NewPort with every knob: the model's caps and DMA
// behaviour, and the port's rings and data-path options.
func NewPortConfig(cfg Config, mac net.HardwareAddr, pc mlx5.FwdPortConfig) (*Port, *Device, error) {
	if cfg.Sim.LogCmdqSize == 0 {
		flush, opt := cfg.Flush, cfg.HCA
		cfg = Config{Flush: flush, HCA: opt}
		cfg.Sim = sim.DefaultConfig()
	}
	if mac != nil {
		if len(mac) != 6 {
			return nil, nil, fmt.Errorf("fullsim: MAC %v is not 6 bytes", mac)
		}
		cfg.Sim.MAC = [6]byte(mac)
	}
	if pc.MTU > 0 && pc.MTU+22 > cfg.Sim.MaxMTU {
		return nil, nil, fmt.Errorf("fullsim: MTU %d above the port's maximum %d", pc.MTU, cfg.Sim.MaxMTU-22)
	}
	dev, err := Open(cfg)
	if err != nil {
		return nil, nil, err
	}
	fp, err := dev.OpenPort(pc)
	if err != nil {
		return nil, nil, errors.Join(err, dev.Close())
	}
	return &Port{FwdPort: fp, dev: dev}, dev, nil
}

// Connect wires a's transmit side to b's receive side: every frame a sends
// (on any queue) is injected into b, which steers it (RSS may put it on a
// different queue than the one it left on, as on a real wire). Call
// Connect(b, a) too for a full-duplex link.
func Connect(a, b *Device) error {
	if a == nil || b == nil {
		return errors.New("fullsim: Connect needs two devices")
	}
	a.mu.Lock()
	n := len(a.sqns)
	a.mu.Unlock()
	if n == 0 {
		return errors.New("fullsim: Connect before the port was opened")
	}
	for q := 0; q < n; q++ {
		a.SetSink(q, b.Inject)
	}
	return nil
}
