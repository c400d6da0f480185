package mlx5

import (
	"encoding/binary"
	"fmt"
)

// iovaRange is an inclusive range of IOVAs the IOMMU accepts.
type iovaRange struct{ start, end uint64 }

// legacyIOVARanges are rdma-core's fallback when the IOMMU reports no
// IOVA_RANGE capability: everything below 2^39 except the x86 MSI window
// (rdma-core mlx5_vfio.c: the IOVA ranges VFIO reports, else its legacy ranges).
var legacyIOVARanges = []iovaRange{{0x10000, 0xFEDFFFFF}, {0xFEF00000, 1<<39 - 1}}

const (
	vfioIOMMUInfoPgSizes  = 1 << 0
	vfioIOMMUInfoCaps     = 1 << 1
	vfioIOMMUCapIOVARange = 1
	vfioIOMMUInfoHdrSize  = 24 // argsz, flags, iova_pgsizes, cap_offset, pad
)

// parseIOMMUInfo decodes vfio_iommu_type1_info and its capability chain
// (host byte order; amd64 and arm64 are little-endian): the minimum IOMMU
// page size and the usable IOVA ranges. The buffer comes from the kernel,
// but every offset is still checked.
func parseIOMMUInfo(b []byte) (pageSize uint64, ranges []iovaRange, err error) {
	le := binary.LittleEndian
	if len(b) < vfioIOMMUInfoHdrSize {
		return 0, nil, fmt.Errorf("IOMMU info of %d bytes", len(b))
	}
	flags := le.Uint32(b[4:])
	pageSize = 4096
	if flags&vfioIOMMUInfoPgSizes != 0 {
		sizes := le.Uint64(b[8:]) &^ 0xFFF // at least 4 KiB
		if sizes == 0 {
			return 0, nil, fmt.Errorf("IOMMU reports no page size of 4 KiB or more")
		}
		pageSize = sizes & -sizes
	}
	if flags&vfioIOMMUInfoCaps == 0 {
		return pageSize, legacyIOVARanges, nil
	}
	off := uint64(le.Uint32(b[16:]))
	for hops := 0; off != 0 && hops < 64; hops++ {
		if off+8 > uint64(len(b)) {
			return 0, nil, fmt.Errorf("IOMMU capability at %d beyond %d bytes", off, len(b))
		}
		id, next := le.Uint16(b[off:]), le.Uint32(b[off+4:])
		if id == vfioIOMMUCapIOVARange {
			if off+16 > uint64(len(b)) {
				return 0, nil, fmt.Errorf("truncated IOVA range capability")
			}
			n := uint64(le.Uint32(b[off+8:]))
			if off+16+16*n > uint64(len(b)) {
				return 0, nil, fmt.Errorf("IOVA range capability claims %d ranges", n)
			}
			for i := uint64(0); i < n; i++ {
				p := off + 16 + 16*i
				r := iovaRange{le.Uint64(b[p:]), le.Uint64(b[p+8:])}
				if r.end >= r.start {
					ranges = append(ranges, r)
				}
			}
			if len(ranges) == 0 {
				return 0, nil, fmt.Errorf("IOMMU reports no usable IOVA range")
			}
			return pageSize, ranges, nil
		}
		off = uint64(next)
	}
	return pageSize, legacyIOVARanges, nil
}

// minIOVA is the lowest IOVA ever handed to a device. The kernel reports
// ranges starting at 0, but a zero address in a command or WQE reads as
// "unset" to firmware and hides a missing-initialisation bug, so the first
// megabyte stays unused.
const minIOVA = 1 << 20

// iovaAllocator hands out aligned IOVA blocks from the usable ranges, in
// order, from minIOVA up, never reusing (a process maps a bounded amount of
// memory).
type iovaAllocator struct {
	ranges []iovaRange
	next   uint64
}

func (a *iovaAllocator) alloc(size, align uint64) (uint64, error) {
	for len(a.ranges) > 0 {
		r := a.ranges[0]
		start := max(a.next, r.start, minIOVA)
		start = (start + align - 1) &^ (align - 1)
		if start >= r.start && start+size-1 <= r.end && start+size > start {
			a.next = start + size
			return start, nil
		}
		a.ranges = a.ranges[1:]
	}
	return 0, fmt.Errorf("IOVA space exhausted for %d bytes", size)
}
