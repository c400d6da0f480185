//go:build !amd64

package dpsim

func havePrefetch() bool { return false }
