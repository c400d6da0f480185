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
