package mlx5

import (
	"runtime"
	"strings"
	"testing"
)

// Off amd64 OpenVFIO refuses a usable function (after Preflight has
// explained an unusable one): the data path's doorbells would not be
// ordered after its descriptor writes (.ci/test-arm64 runs this under
// qemu-aarch64).
func TestOpenVFIOWantsOrderedDMAWrites(t *testing.T) {
	err := checkDMAOrder()
	if runtime.GOARCH == "amd64" {
		if err != nil {
			t.Fatalf("amd64 orders stores, yet VFIO is refused: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "DMA write barriers") {
		t.Fatalf("on %s: %v, want the barrier refusal", runtime.GOARCH, err)
	}
}
