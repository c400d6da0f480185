package dpsim

import (
	"errors"
	"fmt"
	"net"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// Config describes a model port and the driver port built on it.
type Config struct {
	Name   string
	MAC    net.HardwareAddr
	MTU    int // L3 MTU; 0 means 1500
	Queues int // 0 means 1
	PoolID uint16

	Layout Layout
	Seed   uint64

	LogWQEs       uint8 // RQ WQEs; 0 means 4 (16 WQEs)
	LogStrides    uint8 // strides per WQE; 0 means 6 (64)
	LogStrideSize uint8 // 0: the smallest power of two holding headroom + frame + shinfo
	LogSQ         uint8 // SQ WQEBBs; 0 means 10 (1024 = 16 fragments)
	Spare         int   // buffers for Alloc; 0 means 256

	StripVLAN  bool  // the RQ strips the outer tag into the CQE (rqc.vsd = 0)
	Compress   bool  // CQE compression on the RX CQ (basic layout)
	Enhanced   bool  // with Compress: the enhanced layout
	MiniFormat uint8 // mini_cqe_res_format; default CSUM_STRIDX
	MinInline  int   // device requires inline headers (disables eMPWQE)
	NoMPW      bool  // device lacks enhanced MPW

	Flush         bool // no-DDIO DMA emulation
	FragmentCheck bool // model rejects WQEs crossing 4 KiB fragments
	DeferredTx    bool // TX runs on Device.Process, not in the doorbell
	Rx            dp.RxOptions
	Tx            dp.TxOptions
}

// Device is the model side of a port: per-queue RX and TX models and the
// BAR0 doorbell decoding.
type Device struct {
	mem *Memory
	RX  []*RxQueue
	TX  []*TxQueue
	// The last doorbell write, for the benchmark that times the model's
	// share of Tx (BenchmarkModelDoorbell).
	lastOff  uint32
	lastCtrl uint64
}

// Write64 decodes a send doorbell: UAR page q (one per queue) + 0x800.
func (d *Device) Write64(off uint32, v uint64) {
	q := int(off / pageSize)
	if off%pageSize != prm.UARBlueFlameOffset || q >= len(d.TX) {
		panic(fmt.Sprintf("dpsim: doorbell write to unmodelled BAR0 offset %#x", off))
	}
	d.lastOff, d.lastCtrl = off, v
	d.TX[q].doorbell(v)
}

// Process runs every deferred send queue.
func (d *Device) Process() int {
	n := 0
	for _, t := range d.TX {
		n += t.Process()
	}
	return n
}

// Err returns the first send-queue error.
func (d *Device) Err() error {
	for _, t := range d.TX {
		if t.err != nil {
			return t.err
		}
	}
	return nil
}

// Connect wires a's transmit side to b's receive side, queue q to queue q
// (so both ends of a wire belong to worker q and the synchronous model never
// crosses goroutines). Call Connect(b, a) too for a full-duplex link.
func Connect(a, b *Device) error {
	if len(a.TX) != len(b.RX) {
		return fmt.Errorf("dpsim: connecting %d TX queues to %d RX queues", len(a.TX), len(b.RX))
	}
	for i, t := range a.TX {
		t.Sink = b.RX[i].Inject
	}
	return nil
}

// NewPort builds a model device and the mlx5 driver port over it: the
// queue structs the command path would have created, laid out by the model,
// with the driver's own defaults (dp.Geometry) and queue constructor
// (dp.NewQueue), as mlx5.NewFwdPort uses them.
func NewPort(c Config) (*dp.Port, *Device, error) {
	if c.Queues == 0 {
		c.Queues = 1
	}
	g := dp.Geometry{MTU: c.MTU, LogWQEs: c.LogWQEs, LogStrides: c.LogStrides, LogSQ: c.LogSQ, Spare: c.Spare}.WithDefaults()
	c.MTU, c.LogWQEs, c.LogStrides, c.LogSQ, c.Spare = g.MTU, g.LogWQEs, g.LogStrides, g.LogSQ, g.Spare
	if c.Compress && c.MiniFormat == 0 {
		c.MiniFormat = prm.MiniCQECsumStridx
	}
	c.Rx = g.RxDefaults(c.Rx)
	maxFrame := c.MTU + dp.HWMTUOverhead
	if c.LogStrideSize == 0 {
		c.LogStrideSize = dp.StrideSizeLog(c.Rx.Headroom, c.Rx.MaxFrame)
	}
	if c.LogStrideSize > 12 {
		return nil, nil, errors.New("dpsim: frames above one 4 KiB stride are not supported")
	}
	bufBytes := g.WindowBytes(c.LogStrideSize)
	cqLog := c.LogWQEs + c.LogStrides
	ringBytes := (1<<cqLog)*prm.CQESize + (1<<c.LogWQEs)*prm.StridingRQWQEStride + (1<<c.LogSQ)*prm.SendWQEBB +
		(1<<c.LogSQ)*prm.CQESize + 4*pageSize
	mem, err := NewMemory(c.Queues*ringBytes, c.Queues*(bufBytes+pageSize), c.Layout, c.Seed)
	if err != nil {
		return nil, nil, err
	}
	dev := &Device{mem: mem}
	queues := make([]dp.Queue, c.Queues)
	fail := func(err error) (*dp.Port, *Device, error) { mem.Close(); return nil, nil, err }
	for q := 0; q < c.Queues; q++ {
		ring := func(n int) []byte {
			b, _, e := mem.AllocRing(n)
			if e != nil {
				err = e
			}
			return b
		}
		dbrs := ring(pageSize) // three 8-byte records in one page
		rxCQ := &dp.CQMem{CQN: uint32(0x100 + 2*q), Ring: ring((1 << cqLog) * prm.CQESize), LogSize: cqLog,
			DBRec: dbrs[0:8], Compressed: c.Compress, Enhanced: c.Enhanced, MiniFormat: c.MiniFormat}
		txCQ := &dp.CQMem{CQN: uint32(0x101 + 2*q), Ring: ring((1 << c.LogSQ) * prm.CQESize), LogSize: c.LogSQ, DBRec: dbrs[64:72]}
		pages, iova, e := mem.AllocBuffers(bufBytes)
		if e != nil {
			return fail(e)
		}
		rq := &dp.RQMem{RQN: uint32(0x200 + q), Ring: ring((1 << c.LogWQEs) * prm.StridingRQWQEStride), LogWQEs: c.LogWQEs,
			LogStrides: c.LogStrides, LogStrideSize: c.LogStrideSize, DBRec: dbrs[128:136], LKey: mem.LKey,
			IOVA: iova, Pages: pages, Spare: c.Spare}
		sq := &dp.SQMem{SQN: uint32(0x300 + q), Ring: ring((1 << c.LogSQ) * prm.SendWQEBB), LogWQEBBs: c.LogSQ,
			DBRec: dbrs[192:200], LKey: mem.LKey, MMIO: dev, Doorbell: uint32(q*pageSize + prm.UARBlueFlameOffset),
			MinInline: c.MinInline, EnhancedMPW: !c.NoMPW}
		if err != nil {
			return fail(err)
		}
		for _, r := range [][]byte{rxCQ.Ring, txCQ.Ring} {
			for i := prm.CQEOffOpOwn; i < len(r); i += prm.CQESize {
				r[i] = prm.CQEOpOwnInit
				r[i-1] = 0xFF
			}
		}
		mr := newRxQueue(mem, rxCQ, rq)
		mr.Flush = c.Flush
		mr.Strip = c.StripVLAN
		mr.MaxFrame = maxFrame
		mt := newTxQueue(mem, sq, txCQ)
		mt.Deferred = c.DeferredTx
		mt.MaxFrame = maxFrame
		if c.FragmentCheck {
			mt.FragmentWQEBBs = dp.DefaultFragment
		}
		dev.RX = append(dev.RX, mr)
		dev.TX = append(dev.TX, mt)
		if queues[q], err = dp.NewQueue(rxCQ, rq, txCQ, sq, c.PoolID, c.Rx, c.Tx); err != nil {
			return fail(err)
		}
	}
	mac := c.MAC
	if mac == nil {
		mac = net.HardwareAddr{0x02, 0, 0x5e, 0, 0, byte(c.PoolID)}
	}
	port, err := dp.NewPort(fwd.PortInfo{Name: c.Name, MAC: mac, MTU: c.MTU}, queues, mem.Close)
	if err != nil {
		return fail(err)
	}
	return port, dev, nil
}
