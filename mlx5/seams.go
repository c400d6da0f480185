package mlx5

// The driver touches the device only through these three seams. The VFIO
// layer implements them over a real function (vfio_linux.go); mlx5/model/sim
// implements them over the device model, so every byte the driver produces
// is checked by the same code paths in tests.

// MMIO is BAR0. Every value is the big-endian interpretation of the register
// bytes: Write32(off, v) leaves the bytes of v most-significant first at off,
// like the kernel's iowrite32be. Write64 is one 8-byte store (doorbells must
// never be split); for a send doorbell pass
// binary.BigEndian.Uint64(ctrlSeg[:8]).
type MMIO interface {
	Read32(off uint32) uint32
	Write32(off uint32, v uint32)
	Write64(off uint32, v uint64)
}

// DMA hands out memory the device can reach. Alloc returns zeroed memory of
// at least size bytes, IOVA-aligned to align (a power of two, ≥ 4096 is always
// honoured), that stays valid and pinned until Free. The returned slice is the
// CPU view; iova is the device view that goes into commands and WQEs.
type DMA interface {
	Alloc(size, align int) (buf []byte, iova uint64, err error)
	Free(iova uint64) error
}

// Config is PCI configuration space (little-endian, as PCI defines it).
type Config interface {
	ReadConfig16(off uint32) (uint16, error)
	WriteConfig16(off uint32, v uint16) error
}

// Bus bundles the seams of one PCI function.
type Bus struct {
	MMIO   MMIO
	DMA    DMA
	Config Config
}
