package bench

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// xdpGen sends prebuilt frames from an AF_XDP socket in copy mode: the
// frames are written into the UMEM once, at setup, and each completed
// frame goes straight back onto the TX ring unchanged. One sendto hands
// the kernel up to xdpGenBudget descriptors (XDP_MAX_TX_SKB_BUDGET), where
// AF_PACKET's sendmmsg walks a message header, an iovec and a user copy per
// frame; the skb build and the veth transmit are the same for both.
//
// A TX-only socket: the kernel wants a fill and a completion ring on the
// socket that registers a UMEM (net/xdp/xsk.c xsk_validate_queues) and an
// RX or a TX ring (xsk_bind); the fill ring stays empty.
//
// Invariant for the unsafe code here: every ring pointer is derived from a
// live mmap of this socket's ring at the offset XDP_MMAP_OFFSETS gave and is
// used only until close unmaps it; producer and consumer words are accessed
// with atomics (the kernel's ring protocol needs acquire/release); the UMEM
// registered with XDP_UMEM_REG is an mmap xdpGen keeps until close.
type xdpGen struct {
	fd   int
	umem []byte
	maps [][]byte
	comp xdpRing
	tx   xdpRing
	cq   []uint64
	txd  []unix.XDPDesc
	free []uint64 // UMEM addresses of frames not on the TX ring
	flen uint32
}

type xdpRing struct {
	producer, consumer, flags *uint32
	mask                      uint32
}

const (
	xdpGenFrames    = 4096 // UMEM frames, each holding one prebuilt frame
	xdpGenFrameSize = 2048
	xdpGenTx        = 2048 // TX ring
	xdpGenComp      = 4096 // completion ring: room for every frame in flight
	xdpGenFill      = 64   // required, unused
	xdpGenBudget    = xdpGenTx
)

// xdpSocket opens an AF_XDP socket; tests replace it to inject a kernel
// without AF_XDP (EAFNOSUPPORT: CONFIG_XDP_SOCKETS off).
var xdpSocket = func() (int, error) { return unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) }

// newXDPGen opens the socket on queue q of ifindex, in the calling thread's
// namespace, with frames[i%len(frames)] written into UMEM frame i.
func newXDPGen(ifindex, q int, frames [][]byte) (g *xdpGen, err error) {
	fd, err := xdpSocket()
	if err != nil {
		return nil, fmt.Errorf("AF_XDP socket: %w", err)
	}
	g = &xdpGen{fd: fd, flen: uint32(len(frames[0]))}
	defer func() {
		if err != nil {
			g.close()
			g = nil
		}
	}()
	if g.umem, err = unix.Mmap(-1, 0, xdpGenFrames*xdpGenFrameSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE); err != nil {
		return g, fmt.Errorf("UMEM mmap: %w", err)
	}
	for i := 0; i < xdpGenFrames; i++ {
		a := uint64(i) * xdpGenFrameSize
		copy(g.umem[a:], frames[i%len(frames)])
		g.free = append(g.free, a)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&g.umem[0]))), Len: uint64(len(g.umem)), Size: xdpGenFrameSize}
	if _, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
		uintptr(unsafe.Pointer(&reg)), unsafe.Sizeof(reg), 0); e != 0 {
		return g, fmt.Errorf("XDP_UMEM_REG: %w", e)
	}
	for _, o := range [][2]int{{unix.XDP_UMEM_FILL_RING, xdpGenFill}, {unix.XDP_UMEM_COMPLETION_RING, xdpGenComp}, {unix.XDP_TX_RING, xdpGenTx}} {
		if err = unix.SetsockoptInt(fd, unix.SOL_XDP, o[0], o[1]); err != nil {
			return g, fmt.Errorf("AF_XDP ring size %d: %w", o[0], err)
		}
	}
	var off unix.XDPMmapOffsets
	n := uint32(unsafe.Sizeof(off))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
		return g, fmt.Errorf("XDP_MMAP_OFFSETS: %w", e)
	}
	// All rings are mapped before bind (Linux 6.1 refuses a mapping after).
	if _, _, err = g.mapRing(unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, xdpGenFill, 8); err != nil {
		return g, err
	}
	var d unsafe.Pointer
	if g.comp, d, err = g.mapRing(unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, xdpGenComp, 8); err != nil {
		return g, err
	}
	g.cq = unsafe.Slice((*uint64)(d), xdpGenComp)
	if g.tx, d, err = g.mapRing(unix.XDP_PGOFF_TX_RING, off.Tx, xdpGenTx, unsafe.Sizeof(unix.XDPDesc{})); err != nil {
		return g, err
	}
	g.txd = unsafe.Slice((*unix.XDPDesc)(d), xdpGenTx)
	// The previous run's socket on this queue may still hold it: the
	// kernel releases a closed socket's buffer pool from deferred work
	// (net/xdp/xsk_buff_pool.c xp_put_pool), so EBUSY is retried a while.
	sa := &unix.SockaddrXDP{Flags: unix.XDP_COPY, Ifindex: uint32(ifindex), QueueID: uint32(q)}
	for wait := 0; ; wait++ {
		err = unix.Bind(fd, sa)
		if err == nil || !errors.Is(err, unix.EBUSY) || wait == 60 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return g, fmt.Errorf("AF_XDP bind to queue %d: %w", q, err)
	}
	// Older kernels (before 6.17) keep 32 frames per sendto; run copes.
	_ = unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, xdpGenBudget)
	return g, nil
}

func (g *xdpGen) mapRing(pgoff int64, off unix.XDPRingOffset, n uint32, elem uintptr) (xdpRing, unsafe.Pointer, error) {
	mem, err := unix.Mmap(g.fd, pgoff, int(off.Desc)+int(n)*int(elem), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return xdpRing{}, nil, fmt.Errorf("AF_XDP ring mmap: %w", err)
	}
	g.maps = append(g.maps, mem)
	b := unsafe.Pointer(&mem[0])
	r := xdpRing{
		producer: (*uint32)(unsafe.Add(b, off.Producer)),
		consumer: (*uint32)(unsafe.Add(b, off.Consumer)),
		flags:    (*uint32)(unsafe.Add(b, off.Flags)),
		mask:     n - 1,
	}
	return r, unsafe.Add(b, off.Desc), nil
}

// run keeps the TX ring full and kicks it until budget frames completed,
// deadline passes or stop is set, adding to c every 16 calls; sent are the
// completed frames —
// every frame the device took, including any the veth peer then dropped,
// as AF_PACKET's count is of frames handed to the device. It returns the
// errno that ended it early, if one did.
func (g *xdpGen) run(budget uint64, deadline time.Time, stop *atomic.Bool, c *genCounters) unix.Errno {
	var n, done, calls, stalled uint64
	var failed unix.Errno
	for i := 0; done+n < budget && !stop.Load(); i++ {
		if i&63 == 0 && time.Now().After(deadline) {
			break
		}
		// Completed frames come back to the free stack unchanged.
		cons := atomic.LoadUint32(g.comp.consumer)
		m := atomic.LoadUint32(g.comp.producer) - cons
		for j := uint32(0); j < m; j++ {
			g.free = append(g.free, g.cq[(cons+j)&g.comp.mask])
		}
		atomic.StoreUint32(g.comp.consumer, cons+m)
		n += uint64(m)
		prod := atomic.LoadUint32(g.tx.producer)
		room := uint32(len(g.txd)) - (prod - atomic.LoadUint32(g.tx.consumer))
		k := min(room, uint32(len(g.free)), uint32(min(budget-done-n, 1<<20)))
		top := uint32(len(g.free))
		for j := uint32(0); j < k; j++ {
			g.txd[(prod+j)&g.tx.mask] = unix.XDPDesc{Addr: g.free[top-1-j], Len: g.flen}
		}
		g.free = g.free[:top-k]
		atomic.StoreUint32(g.tx.producer, prod+k)
		_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(g.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		calls++
		switch errno {
		case unix.EAGAIN, unix.EBUSY, unix.ENOBUFS:
			// With the budget the whole ring, EAGAIN is the send buffer
			// full of frames the peer has not taken; EBUSY a frame the
			// peer dropped (net/xdp/xsk.c __xsk_generic_xmit). Both are
			// the load this generator is for.
			stalled++
		case 0, unix.EINTR:
		default:
			failed = errno
		}
		if failed != 0 {
			break
		}
		if i&15 == 0 {
			c.sent.Add(n)
			c.calls.Add(calls)
			c.stalled.Add(stalled)
			done += n
			n, calls, stalled = 0, 0, 0
		}
	}
	c.sent.Add(n)
	c.calls.Add(calls)
	c.stalled.Add(stalled)
	runtime.KeepAlive(g)
	return failed
}

func (g *xdpGen) close() {
	for _, m := range g.maps {
		_ = unix.Munmap(m)
	}
	g.maps = nil
	if g.fd >= 0 {
		unix.Close(g.fd)
		g.fd = -1
	}
	if g.umem != nil {
		_ = unix.Munmap(g.umem)
		g.umem = nil
	}
}
