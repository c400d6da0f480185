package sim

import (
	"fmt"
	"sort"
	"sync"
)

// Memory is the model's DMA space: byte slices registered under IOVAs. It
// implements the driver's DMA seam (Alloc/Free) and gives the device side
// access by IOVA only (Slice), faulting on anything the driver did not map.
type Memory struct {
	mu      sync.Mutex
	regions []region // sorted by iova
	next    uint64
	faults  []string
}

type region struct {
	iova uint64
	buf  []byte
}

// firstIOVA keeps IOVA 0 and the first page unmapped, so a zero address in a
// command is always a fault (rdma-core's legacy range also starts at 0x10000).
const firstIOVA = 0x10000

// NewMemory returns an empty DMA space.
func NewMemory() *Memory { return &Memory{next: firstIOVA} }

// MaxAlign is the largest IOVA alignment Alloc honours: the VFIO layer's
// 2 MiB hugepages, so a driver that assumes a larger buffer is aligned to
// its own size fails here as it would on a card.
const MaxAlign = 2 << 20

// Alloc maps size bytes at an IOVA aligned to min(align, MaxAlign) (at
// least 4096).
func (m *Memory) Alloc(size, align int) ([]byte, uint64, error) {
	align = min(align, MaxAlign)
	if size <= 0 {
		return nil, 0, fmt.Errorf("sim: Alloc of %d bytes", size)
	}
	if align < 4096 {
		align = 4096
	}
	if align&(align-1) != 0 {
		return nil, 0, fmt.Errorf("sim: alignment %d is not a power of two", align)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	a := uint64(align)
	iova := (m.next + a - 1) &^ (a - 1)
	// Leave an unmapped guard page after every region so overruns fault.
	m.next = iova + uint64(size+4095)&^4095 + 4096
	r := region{iova: iova, buf: make([]byte, size)}
	i := sort.Search(len(m.regions), func(i int) bool { return m.regions[i].iova > iova })
	m.regions = append(m.regions, region{})
	copy(m.regions[i+1:], m.regions[i:])
	m.regions[i] = r
	return r.buf, iova, nil
}

// Free unmaps the region that starts at iova.
func (m *Memory) Free(iova uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, r := range m.regions {
		if r.iova == iova {
			m.regions = append(m.regions[:i], m.regions[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("sim: Free of unmapped IOVA %#x", iova)
}

// Mapped is the number of mapped regions (a leak check for tests).
func (m *Memory) Mapped() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.regions)
}

// Slice is the device's view of n bytes at iova. It fails, and records a
// fault, unless the whole range lies inside one mapped region.
func (m *Memory) Slice(iova uint64, n int) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.Search(len(m.regions), func(i int) bool { return m.regions[i].iova > iova }) - 1
	if i >= 0 {
		r := m.regions[i]
		off := iova - r.iova
		if off < uint64(len(r.buf)) && uint64(n) <= uint64(len(r.buf))-off {
			return r.buf[off : off+uint64(n)], nil
		}
	}
	err := fmt.Errorf("sim: DMA fault: %d bytes at IOVA %#x not mapped", n, iova)
	m.faults = append(m.faults, err.Error())
	return nil, err
}

// Faults lists every DMA fault the device met.
func (m *Memory) Faults() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.faults...)
}
