package dpsim

import (
	"bytes"
	"testing"
)

// TestFlushedWriteIsACopy: a device write without DDIO (non-temporal
// stores and CLFLUSHOPT on amd64, a plain copy elsewhere) leaves exactly
// the bytes a cached write does, for every length up to a few words past
// a line at every offset in a word, within a page and across two
// scattered pages, and nothing past them.
func TestFlushedWriteIsACopy(t *testing.T) {
	flushed, err := NewMemory(0, 4*pageSize, Scattered, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer flushed.Close()
	cached, err := NewMemory(0, 4*pageSize, Scattered, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cached.Close()
	fp, iova, err := flushed.AllocBuffers(2 * pageSize)
	if err != nil {
		t.Fatal(err)
	}
	cp, iova2, err := cached.AllocBuffers(2 * pageSize)
	if err != nil || iova2 != iova {
		t.Fatalf("the cached memory's buffers at %#x (%v), the flushed one's at %#x", iova2, err, iova)
	}
	src := make([]byte, 96)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	writes := 0
	for _, start := range []uint64{0, 64, pageSize - 40} { // the last crosses into the second page
		for off := range uint64(8) {
			for n := 0; n <= len(src); n++ {
				for _, p := range [][][]byte{fp, cp} {
					for _, pg := range p {
						for i := range pg {
							pg[i] = 0xee
						}
					}
				}
				at := iova + start + off
				if !flushed.write(at, src[:n], true, 64) || !cached.write(at, src[:n], false, 0) {
					t.Fatalf("write of %d bytes at %#x refused", n, at)
				}
				for i := range fp {
					if !bytes.Equal(fp[i], cp[i]) {
						t.Fatalf("%d bytes at page offset %d: page %d differs from a cached write's", n, start+off, i)
					}
				}
				writes++
			}
		}
	}
	// The last write: src at 7 bytes past pageSize-40, across the pages.
	if got := append(cp[0][pageSize-33:], cp[1][:len(src)-33]...); !bytes.Equal(got, src) {
		t.Fatalf("the cached write left % x", got)
	}
	t.Logf("%d writes compared (flush assembly: %v)", writes, canFlush)
}
