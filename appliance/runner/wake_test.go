package runner

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// An injected packet wakes worker 0 from its idle sleep at once, not when
// the sleep times out (made an hour long here).
func TestWakeInject(t *testing.T) {
	defer func(d time.Duration) { idleWait = d }(idleWait)
	idleWait = time.Hour
	xsk := eventfd(t) // never readable until the end: the worker sleeps
	r := newRig(t, xsk)
	wake, err := NewWake(r.e)
	if err != nil {
		t.Fatal(err)
	}
	defer wake.Close()
	run, err := Start(r.e, r.ports, Options{Wake: wake})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Make the port "readable" so the hour-long sleep ends, then stop.
		var one = [8]byte{1}
		unix.Write(xsk, one[:])
		if err := run.Stop(5 * time.Second); err != nil {
			t.Error(err)
		}
	}()
	for i := range 3 {
		waitFor(t, "worker asleep", wake.sleeping.Load)
		time.Sleep(10 * time.Millisecond) // well inside poll(2)
		if err := wake.InjectIP(ip4UDP(hostA, hostB, 18)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "injected packet sent", func() bool { _, tx := r.p1.Counts(0); return tx == uint64(i+1) })
	}
}
