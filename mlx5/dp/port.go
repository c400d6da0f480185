package dp

import (
	"errors"
	"fmt"

	"github.com/ovfwd/ovfwd/fwd"
)

// Queue is one queue pair of a port: RX (with its buffer pool) and TX. The TX
// queue sends the RX pool's buffers, so forwarding on one port needs no copy;
// with SharePorts, it also sends those of the other ports' queue q.
type Queue struct {
	RX *RxQueue
	TX *TxQueue
}

// Port is an mlx5 port as a fwd.Port. It is built from queues constructed
// over created objects: on the device model by dpsim.NewPort (driver
// "mlx5-sim"); over VFIO by the bring-up code, which copies each
// mlx5.CompletionQueue/ReceiveQueue/SendQueue into CQMem/RQMem/SQMem and calls
// NewRxQueue, NewTxQueue and NewPort the same way.
type Port struct {
	info   fwd.PortInfo
	queues []Queue
	close  func() error
}

// NewPort makes a port of the given queues. closeFn (may be nil) runs on Close.
func NewPort(info fwd.PortInfo, queues []Queue, closeFn func() error) (*Port, error) {
	if len(queues) == 0 {
		return nil, errors.New("dp: port needs at least one queue")
	}
	for i, q := range queues {
		if q.RX == nil || q.TX == nil || q.TX.pool != q.RX.pool {
			return nil, errors.New("dp: queue pair must share its RX pool")
		}
		q.RX.inPort = 0
		q.RX.tx = q.TX
		_ = i
	}
	info.Queues = len(queues)
	info.Pool = queues[0].RX.pool.id
	info.BufSize = int(queues[0].RX.pool.strideSize)
	return &Port{info: info, queues: queues, close: closeFn}, nil
}

// SharePorts lets the ports send each other's receive buffers without a
// copy: queue q of every port joins one pool group, every pool takes the id
// pool, and the ports report it as fwd.PortInfo.Pool, so the engine hands a
// packet received on one port straight to another's Tx. The device side
// must allow it: every function reaches every port's receive memory with
// its own memory key (one IOMMU domain, the functions' groups in one VFIO
// container, each function's PA mkey covering it). Call it before the ports
// are given to fwd.New, with the workers not running; the ports need the
// same queue count and stride size (TX bounds frames by its own stride).
func SharePorts(pool uint16, ports ...*Port) error {
	if len(ports) == 0 {
		return nil
	}
	n := len(ports[0].queues)
	if len(ports) > 1<<packMemberBits {
		return fmt.Errorf("dp: SharePorts: more than %d ports", 1<<packMemberBits)
	}
	for _, p := range ports {
		if len(p.queues) != n {
			return fmt.Errorf("dp: SharePorts: %s has %d queues, %s %d", p.info.Name, len(p.queues), ports[0].info.Name, n)
		}
		for _, q := range p.queues {
			if q.RX.pool.strideSize != ports[0].queues[0].RX.pool.strideSize || len(q.RX.pool.group) != 1 {
				return fmt.Errorf("dp: SharePorts: %s: stride size differs or already shared", p.info.Name)
			}
			if q.RX.pool.handles() > packIndexMask {
				return fmt.Errorf("dp: SharePorts: %s: %d buffers per queue, at most %d can be shared", p.info.Name, q.RX.pool.handles(), packIndexMask)
			}
		}
	}
	for q := 0; q < n; q++ {
		group, iovas := make([]*Pool, len(ports)), make([]uint64, len(ports))
		for i, p := range ports {
			pl := p.queues[q].RX.pool
			pl.group, pl.member, pl.id = group, uint64(i)<<handleMemberShift, pool
			pl.iovas, pl.packIdx = iovas, packIndexMask
			group[i], iovas[i] = pl, pl.iova
		}
	}
	for _, p := range ports {
		p.info.Pool = pool
	}
	return nil
}

// SetInPort sets the ingress port index stamped on received packets.
func (p *Port) SetInPort(idx uint16) {
	for _, q := range p.queues {
		q.RX.inPort = idx
	}
}

func (p *Port) Info() fwd.PortInfo { return p.info }

// Queue returns queue pair q (for counters and tests).
func (p *Port) Queue(q int) Queue { return p.queues[q] }

func (p *Port) Rx(q int, b *fwd.Batch) int { return p.queues[q].RX.Rx(b) }

func (p *Port) Tx(q int, b *fwd.Batch) int { return p.queues[q].TX.Tx(b) }

// Free returns the buffers of b to queue q's pool.
func (p *Port) Free(q int, b *fwd.Batch) {
	pool := p.queues[q].RX.pool
	for i := range b.Pkts {
		if b.Pkts[i].Pool == pool.id {
			pool.release(b.Pkts[i].Handle)
		}
	}
	b.Reset()
	pool.repostGroup()
}

// Alloc lends up to n spare buffers of queue q's pool.
func (p *Port) Alloc(q int, b *fwd.Batch, n int) int {
	pool := p.queues[q].RX.pool
	got := 0
	for got < n && b.Room() > 0 && len(pool.spareFree) > 0 {
		h := pool.spareFree[len(pool.spareFree)-1]
		pool.spareFree = pool.spareFree[:len(pool.spareFree)-1]
		b.Pkts = append(b.Pkts, fwd.Packet{Buf: pool.buf(h), Handle: pool.member | uint64(h), Off: uint16(pool.headroom), Pool: pool.id})
		got++
	}
	return got
}

func (p *Port) Close() error {
	if p.close != nil {
		return p.close()
	}
	return nil
}

var _ fwd.Port = (*Port)(nil)

// Geometry is a port's ring sizes and MTU. Both constructors of a driver
// port — over VFIO or the full model (mlx5.NewFwdPort) and over the
// data-path model alone (mlx5/model/dpsim.NewPort) — take their defaults
// from WithDefaults, so the data path is tested with the geometry it runs.
type Geometry struct {
	MTU        int   // L3 MTU; 0 means 1500
	LogWQEs    uint8 // striding RQ WQEs; 0 means 4 (16)
	LogStrides uint8 // strides per WQE; 0 means 6 (64)
	LogSQ      uint8 // SQ WQEBBs; 0 means 10 (1024 = 16 fragments)
	Spare      int   // buffers per queue for Alloc; 0 means 256
}

// HWMTUOverhead is what the device counts beyond the L3 MTU: Ethernet
// header, one VLAN tag and FCS (kernel MLX5E_SW2HW_MTU).
const HWMTUOverhead = 22

// WithDefaults fills the zero fields.
func (g Geometry) WithDefaults() Geometry {
	if g.MTU == 0 {
		g.MTU = 1500
	}
	if g.LogWQEs == 0 {
		g.LogWQEs = 4
	}
	if g.LogStrides == 0 {
		g.LogStrides = 6
	}
	if g.LogSQ == 0 {
		g.LogSQ = 10
	}
	if g.Spare == 0 {
		g.Spare = 256
	}
	return g
}

// RxDefaults fills the receive options that follow from the port: the
// headroom and the largest frame (HW MTU).
func (g Geometry) RxDefaults(o RxOptions) RxOptions {
	if o.Headroom == 0 {
		o.Headroom = fwd.Headroom
	}
	if o.MaxFrame == 0 {
		o.MaxFrame = g.MTU + HWMTUOverhead
	}
	return o
}

// WindowBytes is one queue's RX buffer window: the receive strides, one
// guard page (an oversize frame in the last stride may run past the window
// by the headroom) and the spares, rounded up to whole pages.
func (g Geometry) WindowBytes(logStrideSize uint8) int {
	stride := 1 << logStrideSize
	w := (1<<(g.LogWQEs+g.LogStrides))*stride + PageSize + g.Spare*stride
	return (w + PageSize - 1) &^ (PageSize - 1)
}

// NewQueue builds one queue pair over created objects: RX over the RX CQ
// and striding RQ, TX over the SQ and its CQ sending the RX pool's buffers.
func NewQueue(rxcq *CQMem, rq *RQMem, txcq *CQMem, sq *SQMem, poolID uint16, rx RxOptions, tx TxOptions) (Queue, error) {
	r, err := NewRxQueue(rxcq, rq, poolID, rx)
	if err != nil {
		return Queue{}, err
	}
	t, err := NewTxQueue(sq, txcq, r.Pool(), tx)
	if err != nil {
		return Queue{}, err
	}
	return Queue{RX: r, TX: t}, nil
}
