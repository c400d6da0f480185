package afxdp

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The AF_XDP rings are single-producer single-consumer queues shared with
// the kernel through mmap, mapped here before the socket is bound (openXSK).
// Invariant for the unsafe code in this file:
// each pointer is derived from a live mmap of the socket's ring (mem), at
// the offset the kernel reported in XDP_MMAP_OFFSETS, and is used only until
// unmapRing; producer/consumer are accessed with atomics, which give the
// acquire/release ordering the kernel's ring protocol needs. The UMEM
// address handed to XDP_UMEM_REG is that of an mmap the socket's queue
// keeps until the socket is closed (umemSocket.close).

// mmapRing is unix.Mmap; tests replace it to fail or refuse a ring mapping.
var mmapRing = unix.Mmap

type ringHead struct {
	mem      []byte
	producer *uint32
	consumer *uint32
	flags    *uint32
	mask     uint32
}

// addrRing is the fill or completion ring: UMEM addresses.
type addrRing struct {
	ringHead
	addrs []uint64
}

// descRing is the RX or TX ring: descriptors.
type descRing struct {
	ringHead
	descs []unix.XDPDesc
}

func mapRing(fd int, pgoff int64, off unix.XDPRingOffset, n uint32, elem uintptr) (ringHead, unsafe.Pointer, error) {
	size := int(off.Desc) + int(n)*int(elem)
	mem, err := mmapRing(fd, pgoff, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ringHead{}, nil, err
	}
	base := unsafe.Pointer(&mem[0])
	h := ringHead{
		mem:      mem,
		producer: (*uint32)(unsafe.Add(base, off.Producer)),
		consumer: (*uint32)(unsafe.Add(base, off.Consumer)),
		flags:    (*uint32)(unsafe.Add(base, off.Flags)),
		mask:     n - 1,
	}
	return h, unsafe.Add(base, off.Desc), nil
}

func mapAddrRing(fd int, pgoff int64, off unix.XDPRingOffset, n uint32) (addrRing, error) {
	h, d, err := mapRing(fd, pgoff, off, n, 8)
	if err != nil {
		return addrRing{}, err
	}
	return addrRing{ringHead: h, addrs: unsafe.Slice((*uint64)(d), n)}, nil
}

func mapDescRing(fd int, pgoff int64, off unix.XDPRingOffset, n uint32) (descRing, error) {
	h, d, err := mapRing(fd, pgoff, off, n, unsafe.Sizeof(unix.XDPDesc{}))
	if err != nil {
		return descRing{}, err
	}
	return descRing{ringHead: h, descs: unsafe.Slice((*unix.XDPDesc)(d), n)}, nil
}

func (r *ringHead) unmap() {
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
		*r = ringHead{}
	}
}

func (r *ringHead) loadProducer() uint32   { return atomic.LoadUint32(r.producer) }
func (r *ringHead) loadConsumer() uint32   { return atomic.LoadUint32(r.consumer) }
func (r *ringHead) storeProducer(v uint32) { atomic.StoreUint32(r.producer, v) }
func (r *ringHead) storeConsumer(v uint32) { atomic.StoreUint32(r.consumer, v) }
func (r *ringHead) needWakeup() bool       { return atomic.LoadUint32(r.flags)&xdpRingNeedWakeup != 0 }

// mapOwnRings maps qu's four rings.
func mapOwnRings(qu *queue, rc ringConfig) error {
	off, err := mmapOffsets(qu.fd)
	if err != nil {
		return fmt.Errorf("XDP_MMAP_OFFSETS: %w", err)
	}
	if qu.fill, err = mapAddrRing(qu.fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, rc.FillSize); err != nil {
		return fmt.Errorf("mmap fill: %w", err)
	}
	if qu.comp, err = mapAddrRing(qu.fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, rc.CompSize); err != nil {
		return fmt.Errorf("mmap completion: %w", err)
	}
	if qu.rx, err = mapDescRing(qu.fd, unix.XDP_PGOFF_RX_RING, off.Rx, rc.RxSize); err != nil {
		return fmt.Errorf("mmap rx: %w", err)
	}
	if qu.tx, err = mapDescRing(qu.fd, unix.XDP_PGOFF_TX_RING, off.Tx, rc.TxSize); err != nil {
		return fmt.Errorf("mmap tx: %w", err)
	}
	return nil
}

// registerUMEM registers mem as fd's UMEM of frames of size bytes, no
// headroom (XDP_UMEM_REG, struct xdp_umem_reg).
func registerUMEM(fd int, mem []byte, size uint32) error {
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&mem[0]))), Len: uint64(len(mem)), Size: size}
	_, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
		uintptr(unsafe.Pointer(&reg)), unsafe.Sizeof(reg), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func mmapOffsets(fd int) (unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	n := uint32(unsafe.Sizeof(off))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return off, errno
	}
	return off, nil
}

// xdpStatistics reads XDP_STATISTICS, the kernel's drop counters of the
// socket, which need no RX ring.
func xdpStatistics(fd int) (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	n := uint32(unsafe.Sizeof(st))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return st, errno
	}
	return st, nil
}

// xdpZeroCopy reports whether the bound socket runs in zero-copy mode.
func xdpZeroCopy(fd int) bool {
	v, err := unix.GetsockoptInt(fd, unix.SOL_XDP, unix.XDP_OPTIONS)
	return err == nil && v&unix.XDP_OPTIONS_ZEROCOPY != 0
}

// kick asks the kernel to process the TX ring: sendto(fd, NULL, 0,
// MSG_DONTWAIT), no allocation and no error boxing. The caller decides
// what each errno means (queue.kick).
//
// RawSyscall, not Syscall: with MSG_DONTWAIT an AF_XDP sendto never
// sleeps (net/xdp/xsk.c xsk_sendmsg returns EAGAIN/EBUSY instead), but in
// copy mode it builds and transmits an skb per frame, tens of µs for a
// batch; Syscall's entersyscall let the runtime's sysmon hand the
// worker's P away during that time, and exitsyscall then went through the
// scheduler to get one back, on every kick (docs/benchmarks.md).
func kick(fd int) unix.Errno {
	_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return errno
}

// wakeRx asks the kernel to refill from the fill ring when it flagged
// XDP_RING_NEED_WAKEUP: recvfrom(fd, NULL, 0, MSG_DONTWAIT), which does
// not sleep either (a RawSyscall as kick).
func wakeRx(fd int) {
	_, _, _ = unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
}
