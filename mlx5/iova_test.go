package mlx5

import (
	"encoding/binary"
	"testing"
)

func fakeIOMMUInfo(flags uint32, pgsizes uint64, ranges ...iovaRange) []byte {
	b := make([]byte, 24+16+16*len(ranges))
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(len(b)))
	le.PutUint32(b[4:], flags)
	le.PutUint64(b[8:], pgsizes)
	if flags&vfioIOMMUInfoCaps != 0 {
		le.PutUint32(b[16:], 24)
		le.PutUint16(b[24:], vfioIOMMUCapIOVARange)
		le.PutUint32(b[32:], uint32(len(ranges)))
		for i, r := range ranges {
			le.PutUint64(b[40+16*i:], r.start)
			le.PutUint64(b[48+16*i:], r.end)
		}
	}
	return b
}

func TestParseIOMMUInfo(t *testing.T) {
	ps, rs, err := parseIOMMUInfo(fakeIOMMUInfo(vfioIOMMUInfoPgSizes|vfioIOMMUInfoCaps, 0x40201000,
		iovaRange{0, 0xFEDFFFFF}, iovaRange{0xFEF00000, 0xFFFFFFFFFF}))
	if err != nil || ps != 4096 || len(rs) != 2 || rs[1].start != 0xFEF00000 {
		t.Fatalf("page %d ranges %v err %v", ps, rs, err)
	}
	ps, rs, err = parseIOMMUInfo(fakeIOMMUInfo(vfioIOMMUInfoPgSizes, 0x200000))
	if err != nil || ps != 0x200000 || len(rs) != 2 || rs[0] != legacyIOVARanges[0] {
		t.Fatalf("no caps: page %d ranges %v err %v", ps, rs, err)
	}
	bad := fakeIOMMUInfo(vfioIOMMUInfoCaps, 0, iovaRange{1, 2})
	binary.LittleEndian.PutUint32(bad[32:], 1000) // claims 1000 ranges
	if _, _, err := parseIOMMUInfo(bad); err == nil {
		t.Fatal("overlong range list accepted")
	}
}

func TestIOVAAllocatorStaysInRanges(t *testing.T) {
	a := iovaAllocator{ranges: []iovaRange{{0x10000, 0x3FFFFF}, {0x1000000, 0x1FFFFFF}}}
	var got []uint64
	for i := 0; i < 4; i++ {
		iova, err := a.alloc(2<<20, 2<<20)
		if err != nil {
			t.Fatalf("alloc %d: %v", i, err)
		}
		got = append(got, iova)
	}
	// 0x200000 fits the first range; 0x400000 would not, so the rest go to the second.
	want := []uint64{0x200000, 0x1000000, 0x1200000, 0x1400000}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("IOVAs %#x, want %#x", got, want)
		}
	}
	for i := 0; i < 5; i++ { // the second range holds 8 blocks
		if _, err := a.alloc(2<<20, 2<<20); err != nil {
			t.Fatalf("block %d of the second range: %v", 4+i, err)
		}
	}
	if _, err := a.alloc(2<<20, 2<<20); err == nil {
		t.Fatal("allocated past the last range")
	}
}

func FuzzParseIOMMUInfo(f *testing.F) {
	f.Add(fakeIOMMUInfo(vfioIOMMUInfoPgSizes|vfioIOMMUInfoCaps, 0x1000, iovaRange{0x10000, 0xFFFFF}))
	f.Add(fakeIOMMUInfo(0, 0))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, rs, err := parseIOMMUInfo(b)
		if err != nil {
			return
		}
		if ps < 4096 || ps&(ps-1) != 0 || len(rs) == 0 {
			t.Fatalf("page size %d, %d ranges", ps, len(rs))
		}
		for _, r := range rs {
			if r.end < r.start {
				t.Fatalf("inverted range %v", r)
			}
		}
	})
}

// The kernel reports an IOVA range starting at 0 (intel-iommu on Linux 6.1
// does); the first DMA block once got IOVA 0, which firmware may read as
// "unset".
func TestIOVANeverBelowOneMiB(t *testing.T) {
	a := iovaAllocator{ranges: []iovaRange{{0, 0xFEDFFFFF}, {0xFEF00000, 1<<39 - 1}}}
	for _, c := range []struct{ size, align uint64 }{{4096, 4096}, {2 << 20, 2 << 20}, {4096, 4096}} {
		iova, err := a.alloc(c.size, c.align)
		if err != nil {
			t.Fatal(err)
		}
		if iova < 1<<20 {
			t.Fatalf("alloc(%d, %d) = %#x, below 1 MiB", c.size, c.align, iova)
		}
	}
}
