package afxdp

import (
	"sync/atomic"

	"github.com/ovfwd/ovfwd/fwd"
	"golang.org/x/sys/unix"
)

// queue is one AF_XDP socket with its UMEM, its own or one shared with the
// same queue of other ports (Share). Only its worker touches the rings and
// the free stack; counters are published with one atomic add per batch.
//
// The socket, its UMEM and its rings are made on x/sys (socket.go openXSK,
// ring_unsafe.go). Frame ownership is the free stack (one per UMEM), O(1)
// per frame.
type queue struct {
	sock      *umemSocket // when this socket registered the UMEM
	fd        int
	umem      []byte
	frameSize uint32
	fill      addrRing
	comp      addrRing
	rx        descRing
	tx        descRing
	free      *frameStack // frames owned by us and not lent out; shared with the UMEM's other sockets
	zeroCopy  bool
	// kickAlways: TX needs a sendto after every batch (copy mode, or no
	// need_wakeup), not only when the kernel flags the TX ring.
	kickAlways bool
	linkDown   bool   // the last TX kick said the device is down
	txBudget   uint32 // frames one copy-mode sendto sends (setTxBudget)
	pool       uint16
	inPort     uint16

	shared  *sharedUMEM // nil: the UMEM is this socket's alone
	shareOf *Share

	// Why a feature asked for at open was refused (for Port.Modes).
	zcErr       error // zero-copy, by the driver: bound in copy mode
	wakeErr     error // need_wakeup, by the kernel: bound without it
	txBudgetErr error // XDP_MAX_TX_SKB_BUDGET: the default budget

	st queueCounters
}

type queueCounters struct {
	rxPackets, rxBytes atomic.Uint64
	txPackets, txBytes atomic.Uint64
	txFull             atomic.Uint64 // TX ring full: dropped
	linkDown           atomic.Uint64 // dropped while the device was down
	kickErrors         atomic.Uint64 // sendto errors other than EAGAIN/EBUSY/EINTR
	txKicks            atomic.Uint64 // sendto calls made to push the TX ring
	allocShort         atomic.Uint64 // Alloc asked for more frames than were free
	badFree            atomic.Uint64 // Free of a frame that cannot be ours
}

// maxKicksPerTx bounds the sendto loop of one Tx call. In copy mode the
// kernel sends at most txBudget frames per sendto (net/xdp/xsk.c,
// __xsk_generic_xmit: TX_BATCH_SIZE, 32, unless XDP_MAX_TX_SKB_BUDGET
// took) and answers EAGAIN while more remain, so with 32 a full 256-packet
// batch needs 8.
const maxKicksPerTx = 12

// reclaim moves transmitted frames from the completion ring to the free
// stack. With a shared UMEM the frames may have been received on another
// port's socket: the stack is the UMEM's, so they return to the one pool.
func (qu *queue) reclaim() {
	cons := qu.comp.loadConsumer()
	n := qu.comp.loadProducer() - cons
	if n == 0 {
		return
	}
	f := qu.free
	if room := uint32(cap(f.s) - len(f.s)); n > room {
		n = room // cannot happen unless frames were freed twice
	}
	for i := uint32(0); i < n; i++ {
		f.s = append(f.s, qu.comp.addrs[(cons+i)&qu.comp.mask]&^uint64(qu.frameSize-1))
	}
	qu.comp.storeConsumer(cons + n)
}

// refill gives up to max free frames to the kernel for reception.
func (qu *queue) refill(max uint32) {
	prod := qu.fill.loadProducer()
	room := uint32(len(qu.fill.addrs)) - (prod - qu.fill.loadConsumer())
	f := qu.free
	n := min(room, max, uint32(len(f.s)))
	if n == 0 {
		return
	}
	top := uint32(len(f.s))
	for i := uint32(0); i < n; i++ {
		qu.fill.addrs[(prod+i)&qu.fill.mask] = f.s[top-1-i]
	}
	f.s = f.s[:top-n]
	qu.fill.storeProducer(prod + n)
}

func (qu *queue) frame(base uint64) []byte {
	return qu.umem[base : base+uint64(qu.frameSize) : base+uint64(qu.frameSize)]
}

func (qu *queue) receive(b *fwd.Batch) int {
	qu.reclaim()
	cons := qu.rx.loadConsumer()
	n := min(qu.rx.loadProducer()-cons, uint32(b.Room()))
	var bytes uint64
	for i := uint32(0); i < n; i++ {
		d := &qu.rx.descs[(cons+i)&qu.rx.mask]
		base := d.Addr &^ uint64(qu.frameSize-1)
		b.Pkts = append(b.Pkts, fwd.Packet{
			Buf:    qu.frame(base),
			Handle: base,
			Off:    uint16(d.Addr - base),
			Len:    uint16(d.Len),
			Pool:   qu.pool,
			InPort: qu.inPort,
		})
		bytes += uint64(d.Len)
	}
	if n > 0 {
		qu.rx.storeConsumer(cons + n)
		qu.st.rxPackets.Add(uint64(n))
		qu.st.rxBytes.Add(bytes)
	}
	qu.refill(^uint32(0))
	if qu.fill.needWakeup() {
		wakeRx(qu.fd)
	}
	return int(n)
}

func (qu *queue) transmit(b *fwd.Batch) int {
	qu.reclaim()
	if qu.linkDown {
		// Probe with a kick: it answers ENETDOWN until the link is back.
		if qu.kick() {
			n := uint64(len(b.Pkts))
			qu.freeBatch(b)
			qu.st.linkDown.Add(n)
			return 0
		}
	}
	prod := qu.tx.loadProducer()
	room := uint32(len(qu.tx.descs)) - (prod - qu.tx.loadConsumer())
	var sent uint32
	var bytes uint64
	for i := range b.Pkts {
		p := &b.Pkts[i]
		if sent == room {
			qu.put(p.Handle)
			continue
		}
		d := &qu.tx.descs[(prod+sent)&qu.tx.mask]
		d.Addr = p.Handle + uint64(p.Off)
		d.Len = uint32(p.Len)
		d.Options = 0
		bytes += uint64(p.Len)
		sent++
	}
	if dropped := uint32(len(b.Pkts)) - sent; dropped > 0 {
		qu.st.txFull.Add(uint64(dropped))
	}
	b.Reset()
	if sent > 0 {
		qu.tx.storeProducer(prod + sent)
		qu.st.txPackets.Add(uint64(sent))
		qu.st.txBytes.Add(bytes)
	}
	if qu.kickAlways || qu.tx.needWakeup() {
		qu.kick()
	}
	return int(sent)
}

// kick pushes the TX ring to the device and reports whether it is down.
// sendto fails with more than EAGAIN/EBUSY/EINTR: a device going down
// answers ENETDOWN or ENXIO, which mark the queue down (its next batches
// are dropped and counted as link_down until a kick succeeds); ENOBUFS and
// anything else are counted. A link going down must not stop the process.
func (qu *queue) kick() (down bool) {
	calls, down := qu.kickLoop()
	qu.st.txKicks.Add(uint64(calls))
	return down
}

func (qu *queue) kickLoop() (calls int, down bool) {
	for calls < maxKicksPerTx {
		calls++
		switch errno := kick(qu.fd); errno {
		case 0:
			qu.linkDown = false
			if qu.tx.loadConsumer() == qu.tx.loadProducer() {
				return calls, false
			}
		case unix.EAGAIN, unix.EBUSY, unix.EINTR:
			// More to send (copy mode sends txBudget frames per call),
			// or the completion ring is full: reclaim and go on.
			qu.linkDown = false
			qu.reclaim()
		case unix.ENETDOWN, unix.ENXIO:
			qu.st.kickErrors.Add(1)
			qu.linkDown = true
			return calls, true
		default: // ENOBUFS and the unexpected: count, leave it for the next batch
			qu.st.kickErrors.Add(1)
			return calls, false
		}
	}
	return calls, false
}

// put returns one frame to the free stack.
func (qu *queue) put(handle uint64) {
	f := qu.free
	if len(f.s) == cap(f.s) || handle >= uint64(len(qu.umem)) {
		qu.st.badFree.Add(1)
		return
	}
	f.s = append(f.s, handle&^uint64(qu.frameSize-1))
}

func (qu *queue) freeBatch(b *fwd.Batch) {
	for i := range b.Pkts {
		qu.put(b.Pkts[i].Handle)
	}
	b.Reset()
}

func (qu *queue) alloc(b *fwd.Batch, n int) int {
	f := qu.free
	if len(f.s) < n {
		qu.reclaim()
	}
	n = min(n, b.Room())
	got := min(n, len(f.s))
	if got < n {
		qu.st.allocShort.Add(1)
	}
	top := len(f.s)
	for i := 0; i < got; i++ {
		base := f.s[top-1-i]
		b.Pkts = append(b.Pkts, fwd.Packet{Buf: qu.frame(base), Handle: base, Off: fwd.Headroom, Pool: qu.pool})
	}
	f.s = f.s[:top-got]
	return got
}
