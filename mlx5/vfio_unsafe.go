//go:build linux

package mlx5

import (
	"math/bits"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// This file holds every pointer conversion of the VFIO layer. Invariants:
// ioctl arguments point at Go values that stay alive for the call (the
// kernel copies them before returning); MMIO accesses go to the BAR0
// mapping, at offsets the caller bounds-checks against its length, with the
// natural alignment of the access size; DMA buffers passed to MAP_DMA are
// mmapped (not Go heap) memory, so the GC never moves them.

type vfioGroupStatus struct{ argsz, flags uint32 }

func groupStatus(gfd uintptr) (uint32, error) {
	s := vfioGroupStatus{argsz: 8}
	_, err := ioctl(gfd, vfioGroupGetStatus, uintptr(unsafe.Pointer(&s)))
	return s.flags, err
}

func setContainer(gfd, cfd uintptr) error {
	fd := int32(cfd)
	_, err := ioctl(gfd, vfioGroupSetContainer, uintptr(unsafe.Pointer(&fd)))
	return err
}

func getDeviceFD(gfd uintptr, addr string) (uintptr, error) {
	name, err := syscall.BytePtrFromString(addr)
	if err != nil {
		return 0, err
	}
	return ioctl(gfd, vfioGroupGetDeviceFD, uintptr(unsafe.Pointer(name)))
}

type vfioRegionInfo struct {
	argsz, flags, index, capOffset uint32
	size, offset                   uint64
}

func regionInfo(dfd uintptr, index uint32) (vfioRegionInfo, error) {
	ri := vfioRegionInfo{argsz: vfioRegionInfoSize, index: index}
	_, err := ioctl(dfd, vfioDeviceGetRegionInf, uintptr(unsafe.Pointer(&ri)))
	return ri, err
}

type vfioDMAMap struct {
	argsz, flags      uint32
	vaddr, iova, size uint64
}

func mapDMA(cfd uintptr, mem []byte, iova uint64) error {
	m := vfioDMAMap{argsz: 32, flags: vfioDMARead | vfioDMAWrite,
		vaddr: uint64(uintptr(unsafe.Pointer(&mem[0]))), iova: iova, size: uint64(len(mem))}
	_, err := ioctl(cfd, vfioIOMMUMapDMA, uintptr(unsafe.Pointer(&m)))
	return err
}

type vfioDMAUnmap struct {
	argsz, flags uint32
	iova, size   uint64
}

func unmapDMA(cfd uintptr, iova, size uint64) error {
	u := vfioDMAUnmap{argsz: 24, iova: iova, size: size}
	_, err := ioctl(cfd, vfioIOMMUUnmapDMA, uintptr(unsafe.Pointer(&u)))
	return err
}

// barMMIO is BAR0 as the MMIO seam. Registers are big-endian; the host is
// little-endian (amd64, arm64), so values are byte-swapped. Atomic
// loads/stores make each access exactly one naturally aligned load/store
// that the compiler can neither split, merge nor drop (the kernel's
// mlx5_write64 / DPDK mlx5_doorbell_ring: one 64-bit store).
type barMMIO []byte

func (b barMMIO) ptr32(off uint32) *uint32 {
	_ = b[off+3] // bounds check
	return (*uint32)(unsafe.Pointer(&b[off]))
}

func (b barMMIO) Read32(off uint32) uint32 {
	return bits.ReverseBytes32(atomic.LoadUint32(b.ptr32(off)))
}

func (b barMMIO) Write32(off uint32, v uint32) {
	atomic.StoreUint32(b.ptr32(off), bits.ReverseBytes32(v))
}

func (b barMMIO) Write64(off uint32, v uint64) {
	_ = b[off+7]
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[off])), bits.ReverseBytes64(v))
}

type vfioIRQInfo struct{ argsz, flags, index, count uint32 }

func irqInfo(dfd uintptr, index uint32) (count, flags uint32, err error) {
	ii := vfioIRQInfo{argsz: 16, index: index}
	_, err = ioctl(dfd, vfioDeviceGetIRQInfo, uintptr(unsafe.Pointer(&ii)))
	return ii.count, ii.flags, err
}

// setIRQEventFDs is VFIO_DEVICE_SET_IRQS(DATA_EVENTFD | ACTION_TRIGGER)
// for vectors 0..len(fds)-1; -1 leaves a vector unassigned. The header is
// vfio_irq_set{argsz, flags, index, start, count} followed by the fds.
func setIRQEventFDs(dfd uintptr, index uint32, fds []int32) error {
	buf := make([]uint32, 5+len(fds))
	buf[0] = uint32(4 * len(buf))
	buf[1] = vfioIRQSetDataEventFD | vfioIRQSetActionTrigger
	buf[2] = index
	buf[3] = 0
	buf[4] = uint32(len(fds))
	for i, fd := range fds {
		buf[5+i] = uint32(fd)
	}
	_, err := ioctl(dfd, vfioDeviceSetIRQs, uintptr(unsafe.Pointer(&buf[0])))
	return err
}

// iommuInfo runs VFIO_IOMMU_GET_INFO twice: once to learn the size the
// capability chain needs (the kernel raises argsz), once to fetch it.
func iommuInfo(cfd uintptr) ([]byte, error) {
	buf := make([]uint64, vfioIOMMUInfoHdrSize/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)
	*(*uint32)(unsafe.Pointer(&buf[0])) = vfioIOMMUInfoHdrSize
	if _, err := ioctl(cfd, vfioIOMMUGetInfo, uintptr(unsafe.Pointer(&buf[0]))); err != nil {
		return nil, err
	}
	need := *(*uint32)(unsafe.Pointer(&buf[0]))
	if need <= vfioIOMMUInfoHdrSize || need > 1<<16 {
		return b, nil
	}
	buf = make([]uint64, (need+7)/8)
	*(*uint32)(unsafe.Pointer(&buf[0])) = need
	if _, err := ioctl(cfd, vfioIOMMUGetInfo, uintptr(unsafe.Pointer(&buf[0]))); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), need), nil
}
