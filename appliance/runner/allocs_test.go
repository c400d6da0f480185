package runner

import (
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"golang.org/x/sys/unix"
)

// One turn of the loop allocates nothing, on every path: packets flowing,
// spinning idle, and each kind of sleep (a nap without descriptors,
// poll(2) on the ports' descriptors, poll(2) with worker 0's eventfd).
func TestTurnZeroAllocs(t *testing.T) {
	defer func(d time.Duration) { idleWait = d }(idleWait)
	idleWait = time.Millisecond
	readable := eventfd(t)
	var one = [8]byte{1}
	unix.Write(readable, one[:]) // poll(2) returns at once

	t.Run("traffic", func(t *testing.T) {
		r := newRig(t, -1)
		r.p0.SetRxTemplate(0, [][]byte{frame(hostB)})
		r.p1.SetSink(0, true)
		k := &worker{w: r.e.Workers()[0]}
		if n := testing.AllocsPerRun(1000, k.turn); n != 0 {
			t.Errorf("%v allocations per turn", n)
		}
		if _, tx := r.p1.Counts(0); tx < 1000 {
			t.Errorf("only %d packets forwarded: the turns did not carry traffic", tx)
		}
	})
	for _, c := range []struct {
		name string
		fds  bool
		wake bool
	}{{"nap", false, false}, {"poll", true, false}, {"wake", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, -1)
			k := &worker{w: r.e.Workers()[0], idle: spinPolls}
			if c.fds {
				k.fds = rxFDs([]fwd.Port{xskPort{r.p0, readable}}, 0)
			}
			if c.wake {
				w, err := NewWake(r.e)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				k.wake = w
				k.fds = append(k.fds, unix.PollFd{Fd: int32(w.fd)})
			}
			if n := testing.AllocsPerRun(50, k.turn); n != 0 {
				t.Errorf("%v allocations per idle turn", n)
			}
			if k.idle < spinPolls+50 {
				t.Errorf("idle count %d: the turns did not take the sleeping path", k.idle)
			}
		})
	}
}
