//go:build !amd64

package nat

func prefetchSlot(p *uint64)     {}
func prefetchSession(p *session) {}
