//go:build !amd64

package dp

// No prefetch assembly here: the calls are no-ops.

func prefetchDescs(d *rxDesc, n int, headroom uintptr, oneLine *[256]uint8, s, m int) {}

func prefetchLines(p uintptr, n int) {}

const havePrefetch = false

func prefetchDescsL2(d *rxDesc, n int, headroom uintptr, oneLine *[256]uint8) {}

// cycles is 0 without a cheap cycle counter: the adaptive prefetch then
// never finds "off" cheaper and keeps the configured distance.
func cycles() uint64 { return 0 }
