//go:build !amd64

package nat

func prefetchSlot(p *uint64)                             {}
func prefetchSessions(base *session, hs []uint64, n int) {}
