// Package porttest is an in-memory fwd.Port so the whole engine runs in
// `go test` without root or hardware.
//
// Ports that share a Pool share memory (the engine forwards between them
// without copying); ports on different pools exercise the engine's
// cross-pool copy. The pool checks ownership strictly: a buffer freed twice,
// or handed to a port of another pool, panics, because either is an engine
// bug that must fail a test.
//
// Threading: queue q of a port may be used by one worker plus a test
// goroutine; each queue and the pool take a mutex once per batch call (never
// per packet), which is fine for a test port.
package porttest

import (
	"fmt"
	"net"
	"sync"

	"github.com/ovfwd/ovfwd/fwd"
)

// Pool is a fixed set of equal buffers.
type Pool struct {
	id      uint16
	bufSize int
	mu      sync.Mutex
	bufs    [][]byte
	inUse   []bool
	free    []uint64
}

// NewPool makes n buffers of bufSize bytes (at least fwd.Headroom+2048).
func NewPool(id uint16, n, bufSize int) *Pool {
	if bufSize < fwd.Headroom+2048 {
		bufSize = fwd.Headroom + 2048
	}
	mem := make([]byte, n*bufSize)
	pl := &Pool{id: id, bufSize: bufSize, bufs: make([][]byte, n), inUse: make([]bool, n), free: make([]uint64, n)}
	for i := range n {
		pl.bufs[i] = mem[i*bufSize : (i+1)*bufSize : (i+1)*bufSize]
		pl.free[i] = uint64(n - 1 - i)
	}
	return pl
}

// ID is the pool id ports report in PortInfo.Pool.
func (pl *Pool) ID() uint16 { return pl.id }

// InUse is how many buffers are lent out: a test that drained every port
// expects 0, which proves the engine leaks no buffer.
func (pl *Pool) InUse() int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return len(pl.bufs) - len(pl.free)
}

func (pl *Pool) get(p *fwd.Packet) bool {
	if len(pl.free) == 0 {
		return false
	}
	h := pl.free[len(pl.free)-1]
	pl.free = pl.free[:len(pl.free)-1]
	pl.inUse[h] = true
	*p = fwd.Packet{Buf: pl.bufs[h], Handle: h, Off: fwd.Headroom, Pool: pl.id}
	return true
}

func (pl *Pool) put(p *fwd.Packet) {
	if p.Pool != pl.id || p.Handle >= uint64(len(pl.bufs)) || !pl.inUse[p.Handle] {
		pl.badPut(p)
	}
	if len(p.Buf) == 0 || &p.Buf[0] != &pl.bufs[p.Handle][0] {
		panic("porttest: packet Buf does not match its Handle")
	}
	pl.inUse[p.Handle] = false
	pl.free = append(pl.free, p.Handle)
}

// badPut is put's panic, out of line so that put stays small.
//
//go:noinline
func (pl *Pool) badPut(p *fwd.Packet) {
	panic(fmt.Sprintf("porttest: pool %d given foreign or free buffer (pool %d handle %d)", pl.id, p.Pool, p.Handle))
}

// Port is an in-memory port with per-queue RX and TX rings.
type Port struct {
	info fwd.PortInfo
	pool *Pool
	qs   []*queue
}

type queue struct {
	mu       sync.Mutex
	rx       []fwd.Packet // FIFO of injected frames
	tx       []fwd.Packet // transmitted, waiting for Drain (unless sink)
	sink     bool
	template [][]byte
	next     int
	txCount  uint64
	rxCount  uint64
}

// New makes a port on pool with the given queue count and L3 MTU.
func New(name string, mac net.HardwareAddr, mtu, queues int, pool *Pool) *Port {
	p := &Port{pool: pool, info: fwd.PortInfo{Name: name, MAC: mac, MTU: mtu, Queues: queues,
		Pool: pool.id, BufSize: pool.bufSize}}
	for range queues {
		p.qs = append(p.qs, &queue{rx: make([]fwd.Packet, 0, 1024), tx: make([]fwd.Packet, 0, 1024)})
	}
	return p
}

// Info implements fwd.Port.
func (p *Port) Info() fwd.PortInfo { return p.info }

// Inject queues a copy of frame for Rx on queue q. It reports false when
// the pool has no buffer.
func (p *Port) Inject(q int, frame []byte) bool {
	qu := p.qs[q]
	var pk fwd.Packet
	p.pool.mu.Lock()
	ok := p.pool.get(&pk)
	p.pool.mu.Unlock()
	if !ok {
		return false
	}
	pk.Len = uint16(copy(pk.Buf[pk.Off:], frame))
	qu.mu.Lock()
	qu.rx = append(qu.rx, pk)
	qu.mu.Unlock()
	return true
}

// SetRxTemplate makes Rx on queue q return copies of frames, round robin,
// as many as the batch has room for — an endless source for benchmarks.
// nil returns to the injected-frame FIFO.
func (p *Port) SetRxTemplate(q int, frames [][]byte) {
	qu := p.qs[q]
	qu.mu.Lock()
	qu.template, qu.next = frames, 0
	qu.mu.Unlock()
}

// SetSink makes Tx on queue q free what it sends instead of keeping it.
func (p *Port) SetSink(q int, sink bool) {
	qu := p.qs[q]
	qu.mu.Lock()
	qu.sink = sink
	qu.mu.Unlock()
}

// Drain returns copies of the frames transmitted on queue q since the last
// Drain and frees their buffers.
func (p *Port) Drain(q int) [][]byte {
	qu := p.qs[q]
	qu.mu.Lock()
	defer qu.mu.Unlock()
	var out [][]byte
	p.pool.mu.Lock()
	for i := range qu.tx {
		out = append(out, append([]byte(nil), qu.tx[i].Data()...))
		p.pool.put(&qu.tx[i])
	}
	p.pool.mu.Unlock()
	qu.tx = qu.tx[:0]
	return out
}

// Counts reports the packets received and transmitted on queue q.
func (p *Port) Counts(q int) (rx, tx uint64) {
	qu := p.qs[q]
	qu.mu.Lock()
	defer qu.mu.Unlock()
	return qu.rxCount, qu.txCount
}

// Rx implements fwd.Port.
func (p *Port) Rx(q int, b *fwd.Batch) int {
	qu := p.qs[q]
	qu.mu.Lock()
	n := 0
	if qu.template != nil {
		// Descriptors are written in place in the batch, each field once:
		// this loop is the port cost inside the engine's benchmarks.
		pl := p.pool
		pl.mu.Lock()
		n = min(b.Room(), len(pl.free))
		k := len(b.Pkts)
		b.Pkts = b.Pkts[:k+n]
		next := qu.next
		for i := range b.Pkts[k:] {
			h := pl.free[len(pl.free)-1-i]
			pl.inUse[h] = true
			buf := pl.bufs[h]
			f := qu.template[next]
			if next++; next == len(qu.template) {
				next = 0
			}
			// Field stores, not a composite literal: the literal is built
			// on the stack from narrow stores and copied with wide loads,
			// which cannot be forwarded and wait for the stores to retire.
			pk := &b.Pkts[k+i]
			*pk = fwd.Packet{}
			pk.Buf, pk.Handle, pk.Off, pk.Pool = buf, h, fwd.Headroom, pl.id
			pk.Len = uint16(copy(buf[fwd.Headroom:], f))
		}
		pl.free = pl.free[:len(pl.free)-n]
		qu.next = next
		pl.mu.Unlock()
	} else {
		n = min(b.Room(), len(qu.rx))
		b.Pkts = append(b.Pkts, qu.rx[:n]...)
		m := copy(qu.rx, qu.rx[n:])
		qu.rx = qu.rx[:m]
	}
	qu.rxCount += uint64(n)
	qu.mu.Unlock()
	return n
}

// Tx implements fwd.Port.
func (p *Port) Tx(q int, b *fwd.Batch) int {
	qu := p.qs[q]
	n := b.Len()
	qu.mu.Lock()
	defer qu.mu.Unlock()
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	for i := range b.Pkts {
		pk := &b.Pkts[i]
		if pk.Pool != p.pool.id || int(pk.Off)+int(pk.Len) > len(pk.Buf) {
			p.badTx(pk)
		}
		if qu.sink {
			p.pool.put(pk)
		} else {
			qu.tx = append(qu.tx, *pk)
		}
	}
	qu.txCount += uint64(n)
	b.Reset()
	return n
}

//go:noinline
func (p *Port) badTx(pk *fwd.Packet) {
	panic(fmt.Sprintf("porttest: %s Tx of a buffer of pool %d", p.info.Name, pk.Pool))
}

// Free implements fwd.Port.
func (p *Port) Free(q int, b *fwd.Batch) {
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock() // put panics on engine bugs; keep the pool usable after
	for i := range b.Pkts {
		p.pool.put(&b.Pkts[i])
	}
	b.Reset()
}

// Alloc implements fwd.Port.
func (p *Port) Alloc(q int, b *fwd.Batch, n int) int {
	p.pool.mu.Lock()
	got := 0
	for got < n && b.Room() > 0 {
		var pk fwd.Packet
		if !p.pool.get(&pk) {
			break
		}
		b.Add(&pk)
		got++
	}
	p.pool.mu.Unlock()
	return got
}

// Close implements fwd.Port.
func (p *Port) Close() error { return nil }
