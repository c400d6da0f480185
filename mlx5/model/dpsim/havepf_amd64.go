package dpsim

func havePrefetch() bool { return true }
