package runner

import (
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"golang.org/x/sys/unix"
)

// worker is one queue's loop state, owned by its thread.
type worker struct {
	w      *fwd.Worker
	fds    []unix.PollFd // queue q's descriptors, then Wake's and the handWake's eventfds
	wake   *Wake
	hand   *handWake // nil with one worker
	busy   bool
	idle   int
	beat   *atomic.Uint64 // nil: no heartbeat
	passes uint64
}

func (k *worker) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		k.turn()
	}
}

// turn is one poll and, when the worker has been idle long enough, one
// sleep. It allocates nothing.
func (k *worker) turn() {
	if k.beat != nil {
		k.passes++
		k.beat.Store(k.passes)
	}
	if k.w.Poll() > 0 || k.busy {
		k.idle = 0
		return
	}
	k.idle++
	if k.idle < spinPolls {
		return
	}
	if !k.hand.announce(k.w) {
		k.idle = 0 // another worker handed it packets meanwhile
		return
	}
	switch {
	case k.wake != nil:
		k.wake.sleep(k.w, k.fds, int(idleWait/time.Millisecond))
	case len(k.fds) > 0:
		waitRx(k.fds, int(idleWait/time.Millisecond))
	default:
		time.Sleep(time.Millisecond)
	}
	k.hand.woke(k.w)
}

// waitRx blocks up to timeoutMs until one of fds is readable.
func waitRx(fds []unix.PollFd, timeoutMs int) {
	for i := range fds {
		fds[i].Events, fds[i].Revents = unix.POLLIN, 0
	}
	_, _ = unix.Poll(fds, timeoutMs)
}
