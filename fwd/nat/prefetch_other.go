//go:build !amd64

package nat

func prefetchSlot(p *uint64) {}

func touchSessions(idx []uint64, mask uint32, sess []session, hs []uint64) int {
	return touchSessionsGo(idx, mask, sess, hs)
}

// PrefetchIPv4 is t.PrefetchIP(h, ports).
func PrefetchIPv4(t *Table, h *[ipv4MinHdrLen]byte, ports uint32) uint64 {
	return t.PrefetchIP(h, ports)
}
