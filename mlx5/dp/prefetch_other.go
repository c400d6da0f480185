//go:build !amd64

package dp

// No prefetch assembly here: the calls are no-ops.

func prefetchDescs(d *rxDesc, n int) {}

func prefetchLines(p uintptr, n int) {}

const havePrefetch = false
