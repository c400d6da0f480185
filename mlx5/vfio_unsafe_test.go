//go:build linux

package mlx5

import (
	"testing"
	"unsafe"
)

// The ioctl argument structs must have the kernel's sizes (include/uapi/linux/vfio.h).
func TestVFIOStructSizes(t *testing.T) {
	for name, got := range map[string]uintptr{
		"vfio_group_status":          unsafe.Sizeof(vfioGroupStatus{}),
		"vfio_region_info":           unsafe.Sizeof(vfioRegionInfo{}),
		"vfio_irq_info":              unsafe.Sizeof(vfioIRQInfo{}),
		"vfio_iommu_type1_dma_map":   unsafe.Sizeof(vfioDMAMap{}),
		"vfio_iommu_type1_dma_unmap": unsafe.Sizeof(vfioDMAUnmap{}),
	} {
		want := map[string]uintptr{"vfio_group_status": 8, "vfio_region_info": 32, "vfio_irq_info": 16,
			"vfio_iommu_type1_dma_map": 32, "vfio_iommu_type1_dma_unmap": 24}[name]
		if got != want {
			t.Errorf("%s: %d bytes, kernel has %d", name, got, want)
		}
	}
}

// BAR accesses are single big-endian stores/loads.
func TestBarMMIOByteOrder(t *testing.T) {
	bar := barMMIO(make([]byte, 8192))
	bar.Write32(0x10, 0x01020304)
	if got := bar[0x10:0x14]; got[0] != 1 || got[3] != 4 {
		t.Fatalf("Write32 stored % x", got)
	}
	if bar.Read32(0x10) != 0x01020304 {
		t.Fatal("Read32 does not invert Write32")
	}
	bar.Write64(0x800, 0x1122334455667788)
	if got := bar[0x800:0x808]; got[0] != 0x11 || got[7] != 0x88 {
		t.Fatalf("Write64 stored % x", got)
	}
}

func TestStoreLoadByte(t *testing.T) {
	b := make([]byte, 64)
	for i := 60; i < 64; i++ {
		storeByte(&b[i], byte(i))
	}
	for i := 60; i < 64; i++ {
		if b[i] != byte(i) || loadByte(&b[i]) != byte(i) {
			t.Fatalf("byte %d = %d", i, b[i])
		}
	}
}
