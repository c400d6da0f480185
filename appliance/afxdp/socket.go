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

// bindMode is what a queue's socket got.
type bindMode struct {
	ZeroCopy bool
	Why      string // why not zero-copy, when copy
}

// bindRetry bounds the EBUSY retry. Workaround for the restart hazard of
// feasibility.md §2 (asavie/xdp defect list item "rebinding a queue right
// after a previous process gives EBUSY"): the kernel releases the previous
// socket's buffer pool from a deferred work item, about 2 s after the
// process is gone, so bind is retried with backoff for up to bindRetry.
var bindRetry = 6 * time.Second

// openSocket makes queue q's socket: zero-copy first, then copy.
func openSocket(ifindex, q int, rc ringConfig, wantZC bool) (*queue, bindMode, error) {
	var m bindMode
	if wantZC {
		qu, err := openSocketFlags(ifindex, q, rc, unix.XDP_ZEROCOPY)
		if err == nil {
			m.ZeroCopy = true
			return qu, m, nil
		}
		m.Why = fmt.Sprintf("zero-copy bind: %v", errors.Unwrap(err))
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPROTONOSUPPORT) {
			return nil, m, err
		}
	} else {
		m.Why = "zero-copy not requested"
	}
	qu, err := openSocketFlags(ifindex, q, rc, unix.XDP_COPY)
	return qu, m, err
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

func tryOpenSocket(ifindex, q int, rc ringConfig, mode uint16) (qu *queue, err error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("afxdp: socket: %w", err)
	}
	qu = &queue{fd: fd, frameSize: rc.FrameSize}
	defer func() {
		if err != nil {
			qu.close()
			qu = nil
		}
	}()
	step := func(what string, e error) error {
		if e != nil {
			return fmt.Errorf("afxdp: queue %d: %s: %w", q, what, e)
		}
		return nil
	}
	qu.umem, err = unix.Mmap(-1, 0, int(rc.Frames*rc.FrameSize), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err = step("mmap umem", err); err != nil {
		return
	}
	if err = step("XDP_UMEM_REG", umemRegister(fd, qu.umem, rc.FrameSize)); err != nil {
		return
	}
	for _, o := range []struct {
		opt  int
		size uint32
		name string
	}{
		{unix.XDP_UMEM_FILL_RING, rc.FillSize, "fill ring"},
		{unix.XDP_UMEM_COMPLETION_RING, rc.CompSize, "completion ring"},
		{unix.XDP_RX_RING, rc.RxSize, "rx ring"},
		{unix.XDP_TX_RING, rc.TxSize, "tx ring"},
	} {
		if err = step(o.name, unix.SetsockoptInt(fd, unix.SOL_XDP, o.opt, int(o.size))); err != nil {
			return
		}
	}
	off, err := mmapOffsets(fd)
	if err = step("XDP_MMAP_OFFSETS", err); err != nil {
		return
	}
	if qu.fill, err = mapAddrRing(fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, rc.FillSize); err != nil {
		return nil, step("mmap fill", err)
	}
	if qu.comp, err = mapAddrRing(fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, rc.CompSize); err != nil {
		return nil, step("mmap completion", err)
	}
	if qu.rx, err = mapDescRing(fd, unix.XDP_PGOFF_RX_RING, off.Rx, rc.RxSize); err != nil {
		return nil, step("mmap rx", err)
	}
	if qu.tx, err = mapDescRing(fd, unix.XDP_PGOFF_TX_RING, off.Tx, rc.TxSize); err != nil {
		return nil, step("mmap tx", err)
	}
	// The free stack holds every frame; the fill ring gets its share now,
	// the rest serves Alloc.
	qu.free = make([]uint64, 0, rc.Frames)
	for i := int(rc.Frames) - 1; i >= 0; i-- {
		qu.free = append(qu.free, uint64(i)*uint64(rc.FrameSize))
	}
	qu.refill(rc.FillSize)
	sa := &unix.SockaddrXDP{Flags: mode | unix.XDP_USE_NEED_WAKEUP, Ifindex: uint32(ifindex), QueueID: uint32(q)}
	if err = step("bind", unix.Bind(fd, sa)); err != nil {
		return
	}
	qu.zeroCopy = xdpZeroCopy(fd)
	return qu, nil
}

func (qu *queue) close() {
	qu.fill.unmap()
	qu.comp.unmap()
	qu.rx.unmap()
	qu.tx.unmap()
	if qu.fd >= 0 {
		unix.Close(qu.fd)
		qu.fd = -1
	}
	if qu.umem != nil {
		_ = unix.Munmap(qu.umem)
		qu.umem = nil
	}
}
