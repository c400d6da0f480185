package daemon

import (
	"net/netip"
	"sync"

	"github.com/ovfwd/ovfwd/fwd"
)

// kernelQueue sits between the netlink mirror and the route table: the
// mirror's reader only records each change (the latest per prefix wins)
// and never waits for the engine, so a full table's burst does not back
// up into the netlink socket (ENOBUFS, a resubscription and a re-dump);
// the flusher applies what piled up meanwhile as one batch.
type kernelQueue struct {
	mu      sync.Mutex
	pending map[netip.Prefix]*route // nil: withdraw
	wake    chan struct{}
	// apply is held while a batch is applied, so a reload can drop what
	// is queued and reset the kernel routes without a batch landing after.
	apply sync.Mutex
}

func newKernelQueue() *kernelQueue {
	return &kernelQueue{pending: map[netip.Prefix]*route{}, wake: make(chan struct{}, 1)}
}

func (q *kernelQueue) put(p netip.Prefix, nh fwd.NextHop, ok bool) {
	var r *route
	if ok {
		r = &route{nh: nh}
	}
	q.mu.Lock()
	q.pending[p] = r
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *kernelQueue) take() map[netip.Prefix]*route {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return nil
	}
	b := q.pending
	q.pending = map[netip.Prefix]*route{}
	return b
}

// run applies batches to t until stop closes.
func (q *kernelQueue) run(t *routeTable, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-q.wake:
		}
		q.apply.Lock()
		if b := q.take(); b != nil {
			t.setMany(srcKernel, b)
		}
		q.apply.Unlock()
	}
}

// reset drops what is queued and withdraws every kernel route (a reload
// that restarts the mirror, which then replays the table).
func (q *kernelQueue) reset(t *routeTable) {
	q.apply.Lock()
	defer q.apply.Unlock()
	q.take()
	t.replace(srcKernel, map[netip.Prefix]route{})
}
