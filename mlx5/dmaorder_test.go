package mlx5

import (
	"runtime"
	"strings"
	"testing"
)

// Off amd64 OpenVFIO refuses before it touches anything: the data path's
// doorbells would not be ordered after its descriptor writes
// (.ci/test-arm64 runs this under qemu-aarch64).
func TestOpenVFIOWantsOrderedDMAWrites(t *testing.T) {
	if runtime.GOARCH == "amd64" {
		if !dmaWritesOrdered {
			t.Fatal("amd64 orders stores, yet VFIO is refused")
		}
		return
	}
	_, err := OpenVFIO(Paths{Sys: t.TempDir(), Dev: t.TempDir()}, "0000:00:00.0", 0)
	if err == nil || !strings.Contains(err.Error(), "DMA write barriers") {
		t.Fatalf("OpenVFIO on %s: %v, want the barrier refusal", runtime.GOARCH, err)
	}
}
