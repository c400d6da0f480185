package mlx5

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// VFIO ioctls: _IO(VFIO_TYPE ';', VFIO_BASE 100 + n), include/uapi/linux/vfio.h.
const (
	vfioGetAPIVersion      = 0x3B64
	vfioCheckExtension     = 0x3B65
	vfioSetIOMMU           = 0x3B66
	vfioGroupGetStatus     = 0x3B67
	vfioGroupSetContainer  = 0x3B68
	vfioGroupGetDeviceFD   = 0x3B6A
	vfioDeviceGetRegionInf = 0x3B6C
	vfioDeviceGetIRQInfo   = 0x3B6D
	vfioDeviceSetIRQs      = 0x3B6E
	vfioIOMMUGetInfo       = 0x3B70
	vfioIOMMUMapDMA        = 0x3B71
	vfioIOMMUUnmapDMA      = 0x3B72

	vfioAPIVersion     = 0
	vfioType1IOMMU     = 1
	vfioType1v2IOMMU   = 3
	vfioGroupViable    = 1 << 0
	vfioRegionBAR0     = 0
	vfioRegionConfig   = 7
	vfioRegionMmap     = 1 << 2
	vfioDMARead        = 1 << 0
	vfioDMAWrite       = 1 << 1
	hugePage2M         = 2 << 20
	vfioRegionInfoSize = 32

	vfioIRQIndexMSI         = 1
	vfioIRQIndexMSIX        = 2
	vfioIRQInfoEventFD      = 1 << 0
	vfioIRQSetDataEventFD   = 1 << 2
	vfioIRQSetActionTrigger = 1 << 5
)

// VFIO is one PCI function opened through VFIO. Its Bus gives the driver
// BAR0, hugepage DMA memory mapped into the function's IOMMU domain, and
// config space.
type VFIO struct {
	Addr      string
	container *os.File
	group     *os.File
	device    *os.File
	bar0      []byte
	cfgOffset int64
	dma       *hugeDMA
	eventFD   int // interrupt vector 0, registered and never waited on
	info      VFIOInfo
}

// VFIOInfo is what OpenVFIO negotiated with the kernel, for probe output
// and the VFIO tests.
type VFIOInfo struct {
	Group      string // IOMMU group number
	IOMMU      string // "type1v2" or "type1"
	PageSize   uint64 // smallest IOMMU page
	IOVARanges [][2]uint64
	BAR0Size   int
	IRQ        string // "MSI-X" or "MSI": the index vector 0 is on
	IRQCount   int
}

func ioctl(fd uintptr, req uintptr, arg uintptr) (uintptr, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, req, arg)
	if errno != 0 {
		return r, errno
	}
	return r, nil
}

// OpenVFIO opens the function at addr after Preflight: container, group,
// type1 IOMMU, device fd, BAR0 mapping and the config region
// (the sequence of the kernel's Documentation/driver-api/vfio.rst example).
// hugepages2M is the DMA memory budget checked up front.
// On any error everything opened so far is closed again, so the group can
// be reopened at once.
func OpenVFIO(paths Paths, addr string, hugepages2M int) (*VFIO, error) {
	if err := Preflight(paths, addr, hugepages2M); err != nil {
		return nil, err
	}
	if err := checkDMAOrder(); err != nil {
		return nil, err
	}
	f, _, _ := readFunction(paths, addr)
	v := &VFIO{Addr: addr, eventFD: -1}
	if err := v.open(paths, f); err != nil {
		v.Close()
		return nil, err
	}
	return v, nil
}

func (v *VFIO) open(paths Paths, f Function) (err error) {
	addr := v.Addr
	if v.container, err = os.OpenFile(filepath.Join(paths.Dev, "vfio/vfio"), os.O_RDWR, 0); err != nil {
		return fmt.Errorf("mlx5: opening the VFIO container: %w", err)
	}
	cfd := v.container.Fd()
	if r, err := ioctl(cfd, vfioGetAPIVersion, 0); err != nil || r != vfioAPIVersion {
		return fmt.Errorf("mlx5: VFIO API version %d (%v), want %d", r, err, vfioAPIVersion)
	}
	iommuType := uintptr(vfioType1v2IOMMU)
	if r, _ := ioctl(cfd, vfioCheckExtension, vfioType1v2IOMMU); r == 0 {
		if r, _ := ioctl(cfd, vfioCheckExtension, vfioType1IOMMU); r == 0 {
			return fmt.Errorf("mlx5: VFIO has no type1 IOMMU support (modprobe vfio_iommu_type1)")
		}
		iommuType = vfioType1IOMMU
	}
	groupPath := filepath.Join(paths.Dev, "vfio", f.IOMMUGroup)
	if v.group, err = os.OpenFile(groupPath, os.O_RDWR, 0); err != nil {
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("mlx5: %s: %w (run as root or chown the group device to the service user)", groupPath, err)
		}
		return fmt.Errorf("mlx5: opening %s: %w", groupPath, err)
	}
	gfd := v.group.Fd()
	status, err := groupStatus(gfd)
	if err != nil {
		return fmt.Errorf("mlx5: VFIO_GROUP_GET_STATUS: %w", err)
	}
	if status&vfioGroupViable == 0 {
		return fmt.Errorf("mlx5: IOMMU group %s is not viable: bind every device of /sys/kernel/iommu_groups/%s/devices to vfio-pci", f.IOMMUGroup, f.IOMMUGroup)
	}
	if err := setContainer(gfd, cfd); err != nil {
		return fmt.Errorf("mlx5: VFIO_GROUP_SET_CONTAINER: %w", err)
	}
	if _, err := ioctl(cfd, vfioSetIOMMU, iommuType); err != nil {
		return fmt.Errorf("mlx5: VFIO_SET_IOMMU: %w", err)
	}
	v.info.Group, v.info.IOMMU = f.IOMMUGroup, "type1v2"
	if iommuType == vfioType1IOMMU {
		v.info.IOMMU = "type1"
	}
	info, err := iommuInfo(cfd)
	if err != nil {
		return fmt.Errorf("mlx5: VFIO_IOMMU_GET_INFO: %w", err)
	}
	pageSize, ranges, err := parseIOMMUInfo(info)
	if err != nil {
		return fmt.Errorf("mlx5: VFIO_IOMMU_GET_INFO: %w", err)
	}
	if pageSize > hugePage2M {
		return fmt.Errorf("mlx5: IOMMU minimum page %d bytes exceeds the 2 MiB DMA blocks", pageSize)
	}
	v.info.PageSize = pageSize
	for _, r := range ranges {
		v.info.IOVARanges = append(v.info.IOVARanges, [2]uint64{r.start, r.end})
	}
	dfd, err := getDeviceFD(gfd, addr)
	if err != nil {
		return fmt.Errorf("mlx5: VFIO_GROUP_GET_DEVICE_FD %s: %w", addr, err)
	}
	v.device = os.NewFile(dfd, "vfio-device-"+addr)
	bar, err := regionInfo(dfd, vfioRegionBAR0)
	if err != nil {
		return fmt.Errorf("mlx5: BAR0 region info: %w", err)
	}
	if bar.flags&vfioRegionMmap == 0 || bar.size < 0x2000 {
		return fmt.Errorf("mlx5: BAR0 of %s cannot be mapped (flags %#x, size %d)", addr, bar.flags, bar.size)
	}
	if v.bar0, err = syscall.Mmap(int(dfd), int64(bar.offset), int(bar.size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED); err != nil {
		return fmt.Errorf("mlx5: mapping BAR0: %w", err)
	}
	v.info.BAR0Size = len(v.bar0)
	cfg, err := regionInfo(dfd, vfioRegionConfig)
	if err != nil {
		return fmt.Errorf("mlx5: config region info: %w", err)
	}
	v.cfgOffset = int64(cfg.offset)
	if v.eventFD, v.info.IRQ, v.info.IRQCount, err = enableVector0(dfd); err != nil {
		return fmt.Errorf("mlx5: interrupt setup: %w", err)
	}
	v.dma = &hugeDMA{container: cfd, iovas: iovaAllocator{ranges: ranges}, allocs: map[uint64]*hugeAlloc{}}
	return nil
}

// Bus is the function's seams for Open.
func (v *VFIO) Bus() Bus { return Bus{MMIO: barMMIO(v.bar0), DMA: v.dma, Config: v} }

// IRQEventFD is the eventfd that interrupt vector 0 signals (see
// enableVector0); -1 once closed. The driver polls and never reads it.
func (v *VFIO) IRQEventFD() int { return v.eventFD }

// Info returns what OpenVFIO negotiated.
func (v *VFIO) Info() VFIOInfo { return v.info }

// ReadConfig16 reads PCI config space through the VFIO config region.
func (v *VFIO) ReadConfig16(off uint32) (uint16, error) {
	var b [2]byte
	if _, err := v.device.ReadAt(b[:], v.cfgOffset+int64(off)); err != nil {
		return 0, err
	}
	return uint16(b[0]) | uint16(b[1])<<8, nil
}

// WriteConfig16 writes PCI config space (little-endian) through VFIO.
func (v *VFIO) WriteConfig16(off uint32, val uint16) error {
	_, err := v.device.WriteAt([]byte{byte(val), byte(val >> 8)}, v.cfgOffset+int64(off))
	return err
}

// Close unmaps all DMA memory and BAR0 and closes the fds (device, group,
// container: rdma-core's order).
func (v *VFIO) Close() error {
	var errs []error
	if v.dma != nil {
		errs = append(errs, v.dma.releaseAll())
	}
	if v.eventFD >= 0 {
		errs = append(errs, syscall.Close(v.eventFD))
		v.eventFD = -1
	}
	if v.bar0 != nil {
		errs = append(errs, syscall.Munmap(v.bar0))
		v.bar0 = nil
	}
	for _, f := range []*os.File{v.device, v.group, v.container} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	v.device, v.group, v.container = nil, nil, nil
	return errors.Join(errs...)
}

// hugeDMA hands out DMA memory from 2 MiB hugepages mapped into the IOMMU.
// Small allocations share a block (bump allocation, IOVA == block IOVA +
// offset); a block is unmapped when all its allocations are freed.
type hugeDMA struct {
	mu        sync.Mutex
	container uintptr
	iovas     iovaAllocator // inside the IOMMU's usable ranges
	cur       *hugeBlock
	allocs    map[uint64]*hugeAlloc
}

type hugeBlock struct {
	mem  []byte
	iova uint64
	used int
	live int
}

type hugeAlloc struct{ block *hugeBlock }

func (h *hugeDMA) newBlock(size int) (*hugeBlock, error) {
	size = (size + hugePage2M - 1) &^ (hugePage2M - 1)
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_SHARED|syscall.MAP_ANONYMOUS|syscall.MAP_HUGETLB|syscall.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap of %d bytes of 2 MiB hugepages: %w (reserve more: echo N > /proc/sys/vm/nr_hugepages)", size, err)
	}
	iova, err := h.iovas.alloc(uint64(size), hugePage2M)
	if err != nil {
		syscall.Munmap(mem)
		return nil, err
	}
	b := &hugeBlock{mem: mem, iova: iova}
	if err := mapDMA(h.container, mem, b.iova); err != nil {
		syscall.Munmap(mem)
		return nil, fmt.Errorf("VFIO_IOMMU_MAP_DMA: %w (check the locked-memory limit: ulimit -l)", err)
	}
	return b, nil
}

// Alloc returns zeroed, pinned, IOMMU-mapped memory.
func (h *hugeDMA) Alloc(size, align int) ([]byte, uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if align < 4096 {
		align = 4096
	}
	size = (size + 4095) &^ 4095
	if size+align > hugePage2M {
		b, err := h.newBlock(size)
		if err != nil {
			return nil, 0, err
		}
		b.used, b.live = len(b.mem), 1
		h.allocs[b.iova] = &hugeAlloc{b}
		return b.mem[:size], b.iova, nil
	}
	if h.cur == nil || (h.cur.used+align-1)&^(align-1)+size > len(h.cur.mem) {
		b, err := h.newBlock(hugePage2M)
		if err != nil {
			return nil, 0, err
		}
		h.cur = b
	}
	b := h.cur
	off := (b.used + align - 1) &^ (align - 1)
	b.used = off + size
	b.live++
	buf := b.mem[off : off+size]
	clear(buf)
	h.allocs[b.iova+uint64(off)] = &hugeAlloc{b}
	return buf, b.iova + uint64(off), nil
}

// Free releases an allocation; its block is unmapped with its last one.
func (h *hugeDMA) Free(iova uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.allocs[iova]
	if !ok {
		return fmt.Errorf("mlx5: DMA free of unknown IOVA %#x", iova)
	}
	delete(h.allocs, iova)
	a.block.live--
	if a.block.live == 0 && a.block != h.cur {
		return h.release(a.block)
	}
	return nil
}

func (h *hugeDMA) release(b *hugeBlock) error {
	err := unmapDMA(h.container, b.iova, uint64(len(b.mem)))
	return errors.Join(err, syscall.Munmap(b.mem))
}

func (h *hugeDMA) releaseAll() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[*hugeBlock]bool{}
	var errs []error
	for _, a := range h.allocs {
		seen[a.block] = true
	}
	if h.cur != nil {
		seen[h.cur] = true
	}
	for b := range seen {
		errs = append(errs, h.release(b))
	}
	h.allocs, h.cur = map[uint64]*hugeAlloc{}, nil
	return errors.Join(errs...)
}

// enableVector0 registers an eventfd for interrupt vector 0: MSI-X vector
// 0, which the async EQ names (eqc.intr = 0). The driver polls and never
// reads it, but rdma-core always registers one and whether firmware
// tolerates an EQ on a vector without a handler is unconfirmed (one of the
// questions only a real card answers: docs/mlx5.md). A function without MSI-X gets its MSI vector instead: no
// ConnectX is one, but the VFIO tests' emulated devices are.
func enableVector0(dfd uintptr) (fd int, kind string, count int, err error) {
	index, kind := uint32(vfioIRQIndexMSIX), "MSI-X"
	n, flags, err := irqInfo(dfd, index)
	if err != nil {
		return -1, "", 0, err
	}
	if n == 0 {
		index, kind = vfioIRQIndexMSI, "MSI"
		if n, flags, err = irqInfo(dfd, index); err != nil {
			return -1, "", 0, err
		}
	}
	if n == 0 || flags&vfioIRQInfoEventFD == 0 {
		return -1, "", 0, fmt.Errorf("device has no eventfd-capable MSI-X or MSI vectors (count %d, flags %#x)", n, flags)
	}
	r, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errno != 0 {
		return -1, "", 0, fmt.Errorf("eventfd: %w", errno)
	}
	fds := make([]int32, n)
	for i := range fds {
		fds[i] = -1
	}
	fds[0] = int32(r)
	if err := setIRQEventFDs(dfd, index, fds); err != nil {
		syscall.Close(int(r))
		return -1, "", 0, err
	}
	return int(r), kind, int(n), nil
}
