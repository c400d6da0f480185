//go:build !amd64

package dpsim

func flushRange(p, n uintptr) {}
func fence()                  {}

const canFlush = false
