//go:build !amd64

package dpsim

func flushRange(p, n uintptr)    {}
func fence()                     {}
func ntCopy(dst, src, n uintptr) {} // never called: canFlush is false

const canFlush = false
