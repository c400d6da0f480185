//go:build mlx5lab

package dp_test

import (
	"testing"

	"github.com/ovfwd/ovfwd/mlx5/dp"
)

// TestPrefetchL2Off: the NoFarPrefetch variant prefetches no packet into L2
// at decode, and delivery stays exact.
func TestPrefetchL2Off(t *testing.T) {
	if st := forwardOneBurst(t, 4, 64, dp.Lab{NoFarPrefetch: true}, 9); st.PrefetchL2 != 0 {
		t.Errorf("%d packets prefetched into L2 with NoFarPrefetch, want 0", st.PrefetchL2)
	}
}

// TestFreshContextDelivers: the fresh-context variant (one packet per
// delivery run) delivers the same frames, unchanged.
func TestFreshContextDelivers(t *testing.T) {
	if st := forwardOneBurst(t, 4, 64, dp.Lab{FreshContext: true}, 11); st.Packets != 64 {
		t.Errorf("fresh context: %d packets, want 64", st.Packets)
	}
}
