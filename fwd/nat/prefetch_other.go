//go:build !amd64

package nat

func prefetchSlot(p *uint64) {}

func touchSessions(idx []uint64, mask uint32, sess []session, hs []uint64) int {
	return touchSessionsGo(idx, mask, sess, hs)
}

// PrefetchIPv4 is t.PrefetchIP(h).
func PrefetchIPv4(t *Table, h *[PrefetchLen]byte) uint64 {
	return t.PrefetchIP(h)
}
