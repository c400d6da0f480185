package dp

import (
	"errors"

	"github.com/ovfwd/ovfwd/fwd"
)

// Queue is one queue pair of a port: RX (with its buffer pool) and TX. The TX
// queue sends the RX pool's buffers, so forwarding on one port needs no copy.
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
	pool.repost()
}

// Alloc lends up to n spare buffers of queue q's pool.
func (p *Port) Alloc(q int, b *fwd.Batch, n int) int {
	pool := p.queues[q].RX.pool
	got := 0
	for got < n && b.Room() > 0 && len(pool.spareFree) > 0 {
		h := pool.spareFree[len(pool.spareFree)-1]
		pool.spareFree = pool.spareFree[:len(pool.spareFree)-1]
		b.Pkts = append(b.Pkts, fwd.Packet{Buf: pool.buf(h), Handle: uint64(h), Off: uint16(pool.headroom), Pool: pool.id})
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
