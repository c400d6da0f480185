package dpsim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
)

// Layout is how receive buffer pages sit in host memory.
type Layout int

const (
	// Contiguous: buffer pages follow each other (one hugepage-like region,
	// how a userspace driver naturally allocates).
	Contiguous Layout = iota
	// Scattered: each 4 KiB page at a shuffled place (the kernel's
	// page_pool case), so hardware prefetchers cannot follow the strides.
	Scattered
)

func (l Layout) String() string {
	if l == Scattered {
		return "scattered"
	}
	return "contiguous"
}

const pageSize = 4096

// Memory is the model's DMA space: mmap'd host memory (outside the Go heap,
// so addresses are stable) mapped page by page at IOVAs.
type Memory struct {
	region   []byte
	base     uint64
	pages    [][]byte // by IOVA page index from base
	ringNext int      // next host page of the ring area
	ringEnd  int
	bufOrder []int // host pages of the buffer area, in hand-out order
	bufNext  int
	LKey     uint32
	// lkeyValid, when set, replaces the LKey comparison: the memory is an
	// IOMMU view of another model's DMA space (NewMappedMemory) whose mkeys
	// live in the command model.
	lkeyValid func(lkey uint32) bool
}

// NewMappedMemory returns a Memory that owns no host memory: its owner maps
// and unmaps regions as an IOMMU would (Map, Unmap), and every lkey in a WQE
// is checked with lkeyValid. The full-stack model (mlx5/model/fullsim) uses it to
// run these engines over the command model's DMA space. Map and Unmap must
// not run concurrently with the engines (they happen at object creation and
// teardown, while no traffic flows).
func NewMappedMemory(lkeyValid func(lkey uint32) bool) *Memory {
	return &Memory{lkeyValid: lkeyValid}
}

// Map makes buf (whole 4 KiB pages) reachable at iova (page aligned).
func (m *Memory) Map(iova uint64, buf []byte) error {
	if m.region != nil || iova%pageSize != 0 || len(buf)%pageSize != 0 {
		return fmt.Errorf("dpsim: Map of %d bytes at %#x: needs a mapped memory and whole pages", len(buf), iova)
	}
	first := int((iova - m.base) / pageSize)
	n := len(buf) / pageSize
	for len(m.pages) < first+n {
		m.pages = append(m.pages, nil)
	}
	for i := 0; i < n; i++ {
		m.pages[first+i] = buf[i*pageSize : (i+1)*pageSize : (i+1)*pageSize]
	}
	return nil
}

// Unmap removes size bytes at iova; the device faults on them afterwards.
func (m *Memory) Unmap(iova uint64, size int) {
	first := int((iova - m.base) / pageSize)
	for i := first; i < first+(size+pageSize-1)/pageSize && i < len(m.pages); i++ {
		m.pages[i] = nil
	}
}

// Mapped is the number of mapped pages (a leak check for tests).
func (m *Memory) Mapped() int {
	n := 0
	for _, p := range m.pages {
		if p != nil {
			n++
		}
	}
	return n
}

// keyValid reports whether a WQE's lkey names memory the device may touch.
func (m *Memory) keyValid(lkey uint32) bool {
	if m.lkeyValid != nil {
		return m.lkeyValid(lkey)
	}
	return lkey == m.LKey
}

// NewMemory maps ringBytes for rings and doorbell records (always host
// contiguous) and bufBytes for packet buffers laid out per layout.
func NewMemory(ringBytes, bufBytes int, layout Layout, seed uint64) (*Memory, error) {
	rp := (ringBytes + pageSize - 1) / pageSize
	bp := (bufBytes + pageSize - 1) / pageSize
	region, err := syscall.Mmap(-1, 0, (rp+bp)*pageSize, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("dpsim: mmap: %w", err)
	}
	m := &Memory{region: region, base: 0x10_0000_0000, ringEnd: rp, LKey: 0x1234}
	m.bufOrder = make([]int, bp)
	for i := range m.bufOrder {
		m.bufOrder[i] = rp + i
	}
	if layout == Scattered {
		r := rand.New(rand.NewPCG(seed, 0x5ca77e2ed))
		r.Shuffle(bp, func(i, j int) { m.bufOrder[i], m.bufOrder[j] = m.bufOrder[j], m.bufOrder[i] })
	}
	return m, nil
}

// Close unmaps the memory.
func (m *Memory) Close() error {
	if m.region == nil {
		return nil
	}
	err := syscall.Munmap(m.region)
	m.region, m.pages = nil, nil
	return err
}

func (m *Memory) hostPage(i int) []byte {
	return m.region[i*pageSize : (i+1)*pageSize : (i+1)*pageSize]
}

func (m *Memory) mapPage(host int) uint64 {
	iova := m.base + uint64(len(m.pages))*pageSize
	m.pages = append(m.pages, m.hostPage(host))
	return iova
}

var errNoMem = errors.New("dpsim: out of model memory")

// AllocRing returns size bytes (rounded up to pages) contiguous in host
// memory and in IOVA space, zeroed.
func (m *Memory) AllocRing(size int) ([]byte, uint64, error) {
	n := (size + pageSize - 1) / pageSize
	if m.ringNext+n > m.ringEnd {
		return nil, 0, errNoMem
	}
	first := m.ringNext
	iova := m.mapPage(first)
	for i := 1; i < n; i++ {
		m.mapPage(first + i)
	}
	m.ringNext += n
	b := m.region[first*pageSize : (first+n)*pageSize : (first+n)*pageSize]
	clear(b)
	return b, iova, nil
}

// AllocBuffers returns size bytes of buffer pages, contiguous in IOVA space
// and placed in host memory per the layout.
func (m *Memory) AllocBuffers(size int) ([][]byte, uint64, error) {
	n := (size + pageSize - 1) / pageSize
	if m.bufNext+n > len(m.bufOrder) {
		return nil, 0, errNoMem
	}
	pages := make([][]byte, n)
	var iova uint64
	for i := 0; i < n; i++ {
		h := m.bufOrder[m.bufNext+i]
		a := m.mapPage(h)
		if i == 0 {
			iova = a
		}
		pages[i] = m.hostPage(h)
		clear(pages[i])
	}
	m.bufNext += n
	return pages, iova, nil
}

// page returns the host page holding iova and the offset in it.
func (m *Memory) page(iova uint64) ([]byte, int, bool) {
	if iova < m.base {
		return nil, 0, false
	}
	i := (iova - m.base) / pageSize
	if i >= uint64(len(m.pages)) || m.pages[i] == nil {
		return nil, 0, false
	}
	return m.pages[i], int((iova - m.base) % pageSize), true
}

// write copies src to iova (device DMA write); with flush (no DDIO) the
// bytes go to memory with non-temporal stores, and every line written plus
// extra bytes behind it is evicted from the CPU caches.
func (m *Memory) write(iova uint64, src []byte, flush bool, extra int) bool {
	for len(src) > 0 {
		pg, off, ok := m.page(iova)
		if !ok {
			return false
		}
		n := min(len(src), len(pg)-off)
		if flush {
			dmaWrite(pg[off:], src[:n])
		} else {
			copy(pg[off:], src[:n])
		}
		if flush {
			end := off + n + extra
			if end > pageSize {
				end = pageSize
			}
			flushBytes(pg[off:end])
		}
		src = src[n:]
		iova += uint64(n)
	}
	return true
}

// mapped reports whether all n bytes at iova are mapped.
func (m *Memory) mapped(iova uint64, n int) bool {
	for n > 0 {
		_, off, ok := m.page(iova)
		if !ok {
			return false
		}
		k := min(n, pageSize-off)
		n -= k
		iova += uint64(k)
	}
	return true
}

// read gathers n bytes at iova into dst (device DMA read).
func (m *Memory) read(dst []byte, iova uint64) bool {
	for len(dst) > 0 {
		pg, off, ok := m.page(iova)
		if !ok {
			return false
		}
		n := copy(dst, pg[off:])
		dst = dst[n:]
		iova += uint64(n)
	}
	return true
}
