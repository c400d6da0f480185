package afxdp

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/asavie/xdp"
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

// bindMode is what a queue's socket got.
type bindMode struct {
	ZeroCopy bool
	Why      string // why not zero-copy, when copy
}

// bindRetry bounds the EBUSY retry. Workaround for the restart hazard of
// feasibility.md §2 (issue 3's asavie/xdp defect list: "rebinding a queue
// right after a previous process gives EBUSY"): the kernel releases the
// previous socket's buffer pool from a deferred work item, about 2 s after
// the process is gone, so bind is retried with backoff for up to bindRetry.
var bindRetry = 6 * time.Second

// asavie/xdp's bind flags are package globals (xdp.DefaultSocketFlags, read
// by xdp.NewSocket; xdp.DefaultXdpFlags, read only by its Program.Attach
// and Detach). They are set here once, for the whole process:
//
//   - DefaultSocketFlags = XDP_USE_NEED_WAKEUP and neither XDP_COPY nor
//     XDP_ZEROCOPY: the kernel then tries zero-copy and falls back to copy
//     by itself (xp_assign_dev), which is "zero-copy first, then copy" in
//     one bind, so concurrent Opens never need a different value. The one
//     exception, Options.NoZeroCopy, adds XDP_COPY for the duration of one
//     NewSocket under socketFlagsMu, which every NewSocket call here holds.
//   - DefaultXdpFlags = XDP_FLAGS_UPDATE_IF_NOEXIST: this package never
//     calls asavie's Program.Attach/Detach (they hang in generic mode,
//     feasibility.md §1 defect 1; attach goes through a cilium/ebpf bpf_link),
//     and should anything else in the process call Attach, it cannot
//     replace a steering program that is already on the device.
var (
	socketFlagsMu   sync.Mutex
	socketFlagsOnce sync.Once
)

const baseSocketFlags = unix.XDP_USE_NEED_WAKEUP

func setAsavieFlags() {
	xdp.DefaultSocketFlags = baseSocketFlags
	xdp.DefaultXdpFlags = unix.XDP_FLAGS_UPDATE_IF_NOEXIST
}

// openSocket makes queue q's socket: zero-copy if the driver has it, else
// copy (or copy only, without wantZC).
func openSocket(ifindex, q int, rc ringConfig, wantZC bool) (*queue, bindMode, error) {
	var m bindMode
	var mode uint16
	if !wantZC {
		mode = unix.XDP_COPY
		m.Why = "zero-copy not requested"
	}
	qu, err := openSocketFlags(ifindex, q, rc, mode)
	if err != nil {
		return nil, m, err
	}
	m.ZeroCopy = qu.zeroCopy
	if wantZC && !m.ZeroCopy {
		m.Why = "zero-copy bind: the driver has no zero-copy for this queue, kernel fell back to copy"
	}
	return qu, m, nil
}

func openSocketFlags(ifindex, q int, rc ringConfig, mode uint16) (*queue, error) {
	deadline := time.Now().Add(bindRetry)
	backoff := 50 * time.Millisecond
	for {
		qu, err := tryOpenSocket(ifindex, q, rc, mode)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return qu, err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// errnoIn is the errno named at the end of one of asavie's error messages,
// or 0. xdp.NewSocket formats errnos with %v, not %w, so errors.Is cannot
// see them (the bind EBUSY of the restart hazard among them); its text is
// all there is.
func errnoIn(err error) unix.Errno {
	for _, e := range []unix.Errno{unix.EBUSY, unix.EOPNOTSUPP, unix.EINVAL, unix.ENODEV, unix.EPERM, unix.ENOMEM} {
		if strings.HasSuffix(err.Error(), e.Error()) {
			return e
		}
	}
	return 0
}

// tryOpenSocket makes one socket with xdp.NewSocket (socket, UMEM
// allocation and XDP_UMEM_REG, ring sizes, ring mmaps, bind with
// xdp.DefaultSocketFlags plus mode) and maps what asavie does not export:
// see queue.
func tryOpenSocket(ifindex, q int, rc ringConfig, mode uint16) (qu *queue, err error) {
	socketFlagsOnce.Do(setAsavieFlags)
	socketFlagsMu.Lock()
	xdp.DefaultSocketFlags = baseSocketFlags | mode
	sock, err := xdp.NewSocket(ifindex, q, &xdp.SocketOptions{
		NumFrames:              int(rc.Frames),
		FrameSize:              int(rc.FrameSize),
		FillRingNumDescs:       int(rc.FillSize),
		CompletionRingNumDescs: int(rc.CompSize),
		RxRingNumDescs:         int(rc.RxSize),
		TxRingNumDescs:         int(rc.TxSize),
	})
	xdp.DefaultSocketFlags = baseSocketFlags
	if err != nil {
		unmapOrphanRings() // the failed socket's rings (see there)
	}
	socketFlagsMu.Unlock()
	if err != nil {
		if e := errnoIn(err); e != 0 {
			return nil, fmt.Errorf("afxdp: queue %d: %s%w", q, strings.TrimSuffix(err.Error(), e.Error()), e)
		}
		return nil, fmt.Errorf("afxdp: queue %d: %w", q, err)
	}
	qu = &queue{sock: sock, fd: sock.FD(), frameSize: rc.FrameSize}
	defer func() {
		if err != nil {
			qu.close()
			qu = nil
		}
	}()
	// The whole UMEM as one slice: GetFrame slices asavie's mapping.
	qu.umem = sock.GetFrame(xdp.Desc{Addr: 0, Len: rc.Frames * rc.FrameSize})
	if err = mapOwnRings(qu, rc); err != nil {
		return nil, fmt.Errorf("afxdp: queue %d: %w", q, err)
	}
	// The free stack holds every frame; the fill ring gets its share now,
	// the rest serves Alloc.
	qu.free = newFrameStack(rc.Frames, rc.FrameSize)
	qu.refill(rc.FillSize)
	qu.zeroCopy = xdpZeroCopy(qu.fd)
	qu.txBudget = setTxBudget(qu.fd, rc.TxSize)
	return qu, nil
}

// setTxBudget raises how many frames one copy-mode sendto sends from the
// default 32 (TX_BATCH_SIZE) to the whole TX ring (XDP_MAX_TX_SKB_BUDGET,
// Linux 6.17+), so one kick per Tx call drains a full batch instead of
// one kick per 32 frames, each answered EAGAIN but the last. It returns
// the budget in effect; older kernels keep 32 (ENOPROTOOPT) and the kick
// loop copes either way.
func setTxBudget(fd int, ring uint32) uint32 {
	if err := unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, int(ring)); err != nil {
		return defaultTxBudget
	}
	return ring
}

func newFrameStack(frames, size uint32) *frameStack {
	f := &frameStack{s: make([]uint64, 0, frames)}
	for i := int(frames) - 1; i >= 0; i-- {
		f.s = append(f.s, uint64(i)*uint64(size))
	}
	return f
}

// joinSocket binds a new socket on queue q of ifindex to u's UMEM
// (XDP_SHARED_UMEM with u's fd in sxdp_shared_umem_fd), with its own fill
// and completion rings, which a socket on another device or queue must have
// (net/xdp/xsk.c xsk_bind). The mode flags must be 0: the socket inherits
// copy or zero-copy and need-wakeup from the UMEM's first socket
// (net/xdp/xsk_buff_pool.c xp_assign_dev_shared), so a zero-copy UMEM
// cannot take a port whose driver has no zero-copy (the bind fails).
func joinSocket(ifindex, q int, rc ringConfig, u *sharedUMEM) (qu *queue, err error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("afxdp: queue %d: socket: %w", q, err)
	}
	qu = &queue{fd: fd, frameSize: rc.FrameSize, umem: u.umem, free: u.free}
	defer func() {
		if err != nil {
			qu.unmapRings()
			unix.Close(fd)
			qu = nil
		}
	}()
	for _, o := range []struct {
		opt  int
		size uint32
	}{{unix.XDP_UMEM_FILL_RING, rc.FillSize}, {unix.XDP_UMEM_COMPLETION_RING, rc.CompSize},
		{unix.XDP_RX_RING, rc.RxSize}, {unix.XDP_TX_RING, rc.TxSize}} {
		if err = unix.SetsockoptInt(fd, unix.SOL_XDP, o.opt, int(o.size)); err != nil {
			return nil, fmt.Errorf("afxdp: queue %d: ring size option %d: %w", q, o.opt, err)
		}
	}
	if err = mapOwnRings(qu, rc); err != nil {
		return nil, fmt.Errorf("afxdp: queue %d: %w", q, err)
	}
	sa := &unix.SockaddrXDP{Flags: unix.XDP_SHARED_UMEM, Ifindex: uint32(ifindex), QueueID: uint32(q), SharedUmemFD: uint32(u.fd)}
	deadline := time.Now().Add(bindRetry)
	backoff := 50 * time.Millisecond
	for {
		err = unix.Bind(fd, sa)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			break
		}
		time.Sleep(backoff) // the restart hazard of openSocketFlags
		backoff = min(2*backoff, 500*time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("afxdp: queue %d: bind to the shared UMEM: %w", q, err)
	}
	qu.shared = u
	u.users++
	qu.refill(rc.FillSize)
	qu.zeroCopy = xdpZeroCopy(fd)
	qu.txBudget = setTxBudget(fd, rc.TxSize)
	return qu, nil
}

func (qu *queue) unmapRings() {
	qu.fill.unmap()
	qu.comp.unmap()
	qu.rx.unmap()
	qu.tx.unmap()
}

// close releases the socket. A socket of a shared UMEM leaves the UMEM to
// its last user (Share.release), whether or not it registered it.
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
		closeAsavie(qu.sock)
	}
	qu.sock = nil
	qu.fd = -1
	qu.umem = nil
}

// closeAsavie closes an asavie socket. asavie's Close closes the fd and
// unmaps the UMEM but leaves its ring mappings, which keep the socket
// bound: unmap them after.
func closeAsavie(s *xdp.Socket) {
	socketFlagsMu.Lock()
	_ = s.Close()
	unmapOrphanRings()
	socketFlagsMu.Unlock()
}
