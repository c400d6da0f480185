package afxdp

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// ringConfig sizes one queue's UMEM and rings. All ring sizes are powers
// of two; FrameSize is a power of two so a frame's base is addr &^ (size-1).
type ringConfig struct {
	Frames    uint32
	FrameSize uint32
	FillSize  uint32
	CompSize  uint32
	RxSize    uint32
	TxSize    uint32
}

var defaultRings = ringConfig{Frames: 4096, FrameSize: 2048, FillSize: 2048, CompSize: 2048, RxSize: 2048, TxSize: 2048}

// minRing bounds how far halved shrinks the rings: a worker's batch must
// still fit.
const minRing = 128

// halved is rc with half the frames and half of each ring, or false when
// a ring would go below minRing.
func (rc ringConfig) halved() (ringConfig, bool) {
	if min(rc.FillSize, rc.CompSize, rc.RxSize, rc.TxSize)/2 < minRing {
		return rc, false
	}
	rc.Frames /= 2
	rc.FillSize /= 2
	rc.CompSize /= 2
	rc.RxSize /= 2
	rc.TxSize /= 2
	return rc, true
}

// bindMode is what a queue's socket got.
type bindMode struct {
	ZeroCopy bool
	Rings    ringConfig // the rings and UMEM it got (smaller under a locked-memory limit)
	Why      string     // why not zero-copy, when copy; why smaller
}

// bindRetry bounds the EBUSY retry of the restart hazard: rebinding a queue
// right after its previous socket closed (or its process died) gives EBUSY,
// because the kernel releases the old buffer pool, and with it the queue,
// from deferred work (net/xdp/xsk_buff_pool.c xp_put_pool,
// xp_release_deferred), seen up to ~2 s later; bind is retried with backoff
// for up to bindRetry.
var bindRetry = 6 * time.Second

// The bind flags of a socket that registers its own UMEM: XDP_USE_NEED_WAKEUP,
// and XDP_ZEROCOPY or XDP_COPY. Zero-copy is asked for explicitly, not left
// to the kernel (no mode flag: it falls back to copy by itself, in
// net/xdp/xsk_buff_pool.c xp_assign_dev), so that the driver's refusal
// reaches the log and status: openXSK then binds the same socket again in
// copy mode. Options.NoZeroCopy asks for copy mode only.
const baseSocketFlags = unix.XDP_USE_NEED_WAKEUP

// bindXSK is bind(2) on an AF_XDP socket; tests replace it to inject a
// driver's refusal of zero-copy, an old kernel's of need_wakeup, or a
// refused shared-UMEM bind.
var bindXSK = unix.Bind

// umemRegister is registerUMEM; tests replace it to inject the kernel's
// refusal under a locked-memory limit.
var umemRegister = registerUMEM

// openSocket makes queue q's socket: zero-copy if the driver has it, else
// copy (or copy only, without wantZC). XDP_UMEM_REG pins the UMEM and,
// without CAP_IPC_LOCK, charges it to RLIMIT_MEMLOCK, refusing what is
// over the limit with ENOBUFS (net/xdp/xdp_umem.c xdp_umem_account_pages);
// the UMEM and the rings are then halved until they fit or a ring would go
// below minRing.
func openSocket(ifindex, q int, rc ringConfig, wantZC bool) (*queue, bindMode, error) {
	m := bindMode{Rings: rc}
	mode := uint16(unix.XDP_ZEROCOPY)
	if !wantZC {
		mode = unix.XDP_COPY
		m.Why = "zero-copy not requested"
	}
	qu, err := openSocketFlags(ifindex, q, m.Rings, mode)
	for errors.Is(err, unix.ENOBUFS) {
		var ok bool
		if m.Rings, ok = m.Rings.halved(); !ok {
			break
		}
		if qu, err = openSocketFlags(ifindex, q, m.Rings, mode); err == nil {
			m.Why = joinWhy(m.Why, fmt.Sprintf("UMEM %d frames, rings %d (XDP_UMEM_REG of %d frames: %v: the locked-memory limit; raise LimitMEMLOCK or grant CAP_IPC_LOCK)",
				m.Rings.Frames, m.Rings.FillSize, rc.Frames, unix.ENOBUFS))
		}
	}
	if err != nil {
		return nil, m, err
	}
	m.ZeroCopy = qu.zeroCopy
	if qu.zcErr != nil {
		m.Why = joinWhy(fmt.Sprintf("zero-copy refused by the driver: %v", qu.zcErr), m.Why)
	}
	if qu.wakeErr != nil {
		m.Why = joinWhy(m.Why, fmt.Sprintf("need_wakeup refused: %v; TX kicked after every batch", qu.wakeErr))
	}
	return qu, m, nil
}

// openSocketFlags makes a socket with its own UMEM, retrying an EBUSY bind
// for up to bindRetry (the restart hazard).
func openSocketFlags(ifindex, q int, rc ringConfig, mode uint16) (*queue, error) {
	return openXSK(ifindex, q, rc, nil, mode, bindRetry)
}

// tryOpenSocket is openSocketFlags with a single bind attempt.
func tryOpenSocket(ifindex, q int, rc ringConfig, mode uint16) (*queue, error) {
	return openXSK(ifindex, q, rc, nil, mode, 0)
}

// joinSocket binds a new socket on queue q of ifindex to u's UMEM
// (XDP_SHARED_UMEM with u's fd in sxdp_shared_umem_fd), with its own fill
// and completion rings, which a socket on another device or queue must have
// (net/xdp/xsk.c xsk_bind). The mode flags must be 0: the socket inherits
// copy or zero-copy and need-wakeup from the UMEM's first socket
// (net/xdp/xsk_buff_pool.c xp_assign_dev_shared), so a zero-copy UMEM
// cannot take a port whose driver has no zero-copy (the bind fails).
func joinSocket(ifindex, q int, rc ringConfig, u *sharedUMEM) (*queue, error) {
	qu, err := openXSK(ifindex, q, rc, u, 0, bindRetry)
	if err != nil {
		return nil, err
	}
	qu.kickAlways = qu.kickAlways || u.kickAlways
	qu.shared = u
	u.users++
	return qu, nil
}

// umemSocket is a socket that registered its UMEM: closing it closes the fd
// and unmaps the UMEM.
type umemSocket struct {
	fd   int
	umem []byte
}

func (s *umemSocket) close() {
	unix.Close(s.fd)
	_ = unix.Munmap(s.umem)
}

// openXSK makes one AF_XDP socket bound to queue q of ifindex: with its own
// UMEM of rc.Frames frames (u == nil, bind flags baseSocketFlags|mode) or
// on u's (XDP_SHARED_UMEM). An EBUSY bind is retried for up to retry. A
// refused zero-copy bind is repeated in copy mode (EBUSY too, once retry
// is spent: a queue that serves a memory provider refuses zero-copy so,
// net/xdp/xsk_buff_pool.c xp_assign_dev), and one refused for
// XDP_USE_NEED_WAKEUP (EINVAL: unknown flag before Linux 5.4, net/xdp/xsk.c
// xsk_bind) without it, on the same socket: a failed bind leaves it
// unbound with its UMEM and rings (xsk_bind frees only the buffer pool it
// made, and the state stays XSK_READY).
//
// The socket is made in the one order every kernel accepts: socket, UMEM
// area and XDP_UMEM_REG, ring sizes, mmap of all four rings, then bind.
// Linux 6.1 refuses a ring mapping after bind (net/xdp/xsk.c xsk_mmap:
// -EBUSY unless the socket is still XSK_READY; later kernels also accept
// XSK_BOUND).
func openXSK(ifindex, q int, rc ringConfig, u *sharedUMEM, mode uint16, retry time.Duration) (*queue, error) {
	qu, err := newXSK(rc, u)
	if err != nil {
		return nil, fmt.Errorf("afxdp: queue %d: %w", q, err)
	}
	sa := &unix.SockaddrXDP{Flags: baseSocketFlags | mode, Ifindex: uint32(ifindex), QueueID: uint32(q)}
	what := "bind"
	if u != nil {
		sa.Flags, sa.SharedUmemFD = unix.XDP_SHARED_UMEM, uint32(u.fd)
		what = "bind to the shared UMEM"
	}
	err = bindRetrying(qu.fd, sa, retry)
	if err != nil && sa.Flags&unix.XDP_ZEROCOPY != 0 {
		qu.zcErr = err
		sa.Flags = sa.Flags&^unix.XDP_ZEROCOPY | unix.XDP_COPY
		err = bindRetrying(qu.fd, sa, retry)
	}
	if err != nil && sa.Flags&unix.XDP_USE_NEED_WAKEUP != 0 && errors.Is(err, unix.EINVAL) {
		qu.wakeErr = err
		sa.Flags &^= unix.XDP_USE_NEED_WAKEUP
		err = bindRetrying(qu.fd, sa, retry)
	}
	if err != nil {
		qu.discard()
		return nil, fmt.Errorf("afxdp: queue %d: %s: %w", q, what, err)
	}
	if u == nil {
		// The free stack holds every frame; the fill ring gets its share
		// now, the rest serves Alloc.
		qu.free = newFrameStack(rc.Frames, rc.FrameSize)
	}
	qu.refill(rc.FillSize)
	qu.zeroCopy = xdpZeroCopy(qu.fd)
	qu.kickAlways = kicksEveryBatch(qu.zeroCopy, qu.wakeErr)
	qu.txBudget, qu.txBudgetErr = setTxBudget(qu.fd, rc.TxSize)
	return qu, nil
}

// kicksEveryBatch says whether TX needs a sendto after every batch: copy-mode
// TX runs only in sendto, and without need_wakeup (wakeErr) the kernel never
// flags when a zero-copy driver needs one.
func kicksEveryBatch(zeroCopy bool, wakeErr error) bool { return !zeroCopy || wakeErr != nil }

// bindRetrying binds, retrying EBUSY with backoff for up to retry.
func bindRetrying(fd int, sa *unix.SockaddrXDP, retry time.Duration) error {
	deadline := time.Now().Add(retry)
	backoff := 50 * time.Millisecond
	for {
		err := bindXSK(fd, sa)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// newXSK is an unbound socket with its rings sized and mapped, and its UMEM
// registered unless it is to join u's. On error nothing is left behind.
func newXSK(rc ringConfig, u *sharedUMEM) (*queue, error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	qu := &queue{fd: fd, frameSize: rc.FrameSize}
	if u != nil {
		qu.umem, qu.free = u.umem, u.free
	} else {
		mem, err := unix.Mmap(-1, 0, int(rc.Frames)*int(rc.FrameSize), unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("UMEM mmap: %w", err)
		}
		qu.sock = &umemSocket{fd: fd, umem: mem}
		qu.umem = mem
		if err = umemRegister(fd, mem, rc.FrameSize); err != nil {
			qu.discard()
			return nil, fmt.Errorf("XDP_UMEM_REG: %w", err)
		}
	}
	for _, o := range []struct {
		opt  int
		size uint32
	}{{unix.XDP_UMEM_FILL_RING, rc.FillSize}, {unix.XDP_UMEM_COMPLETION_RING, rc.CompSize},
		{unix.XDP_RX_RING, rc.RxSize}, {unix.XDP_TX_RING, rc.TxSize}} {
		if err = unix.SetsockoptInt(fd, unix.SOL_XDP, o.opt, int(o.size)); err != nil {
			qu.discard()
			return nil, fmt.Errorf("ring size option %d: %w", o.opt, err)
		}
	}
	if err = mapOwnRings(qu, rc); err != nil {
		qu.discard()
		return nil, err
	}
	return qu, nil
}

// discard undoes a newXSK whose socket never became a queue of a port: its
// rings, its fd, and its UMEM if it registered one (never a shared one).
func (qu *queue) discard() {
	qu.unmapRings()
	if qu.sock != nil {
		qu.sock.close()
	} else {
		unix.Close(qu.fd)
	}
	qu.sock = nil
	qu.fd = -1
	qu.umem = nil
}

// setTxBudget raises how many frames one copy-mode sendto sends from the
// default 32 (TX_BATCH_SIZE) to the whole TX ring (XDP_MAX_TX_SKB_BUDGET,
// Linux 6.17+), so one kick per Tx call drains a full batch instead of
// one kick per 32 frames, each answered EAGAIN but the last. It returns
// the budget in effect and, when the kernel refused, why; older kernels
// keep 32 (ENOPROTOOPT) and the kick loop copes either way.
func setTxBudget(fd int, ring uint32) (uint32, error) {
	if err := txBudgetSockopt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, int(ring)); err != nil {
		return defaultTxBudget, err
	}
	return ring, nil
}

// txBudgetSockopt is setsockopt(2); tests replace it to inject a kernel
// without XDP_MAX_TX_SKB_BUDGET.
var txBudgetSockopt = unix.SetsockoptInt

func newFrameStack(frames, size uint32) *frameStack {
	f := &frameStack{s: make([]uint64, 0, frames)}
	for i := int(frames) - 1; i >= 0; i-- {
		f.s = append(f.s, uint64(i)*uint64(size))
	}
	return f
}

func (qu *queue) unmapRings() {
	qu.fill.unmap()
	qu.comp.unmap()
	qu.rx.unmap()
	qu.tx.unmap()
}

// close releases the socket. A socket of a shared UMEM leaves the UMEM to
// its last user (Share.release), whether or not it registered it: the other
// sockets' frames live in that mapping.
func (qu *queue) close() {
	qu.unmapRings()
	switch {
	case qu.shared != nil:
		if qu.sock == nil {
			unix.Close(qu.fd)
		}
		qu.shareOf.release(qu.shared)
		qu.shared = nil
	case qu.sock != nil:
		qu.sock.close()
	}
	qu.sock = nil
	qu.fd = -1
	qu.umem = nil
}
