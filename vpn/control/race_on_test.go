//go:build race

package control_test

// raceEnabled: the race detector slows handshakes ~20-fold, so load tests
// shrink and drop their time bounds under it.
const raceEnabled = true
