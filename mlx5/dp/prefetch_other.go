//go:build !amd64

package dp

// prefetchPacket is a no-op where no assembly routine exists.
func prefetchPacket(data, shinfo uintptr) {}

const havePrefetch = false

func prefetchLine(p uintptr) {}
