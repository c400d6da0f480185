package runner

import (
	"github.com/ovfwd/ovfwd/fwd"
	"golang.org/x/sys/unix"
)

// handWake wakes an idle worker when another hands it packets of a NAT
// flow it owns (fwd.Engine.SetWake): one eventfd per worker, made only
// when there is more than one worker. Like Wake, the handshake is
// Dekker's: the worker announces its sleep (Worker.SetSleeping) before it
// checks the handoff rings one last time; a worker that handed packets
// checks the flag after publishing them.
type handWake struct {
	fd    int
	drain [8]byte // the sleeping worker's read buffer for the eventfd
}

// newHandWakes makes one handWake per worker of e and registers each with
// the engine; nil entries with a single worker.
func newHandWakes(e *fwd.Engine) ([]*handWake, error) {
	ws := e.Workers()
	hws := make([]*handWake, len(ws))
	if len(ws) < 2 {
		return hws, nil
	}
	for q := range ws {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			closeHandWakes(hws)
			return nil, err
		}
		hw := &handWake{fd: fd}
		hws[q] = hw
		e.SetWake(q, func() {
			one := [8]byte{1}
			_, _ = unix.Write(hw.fd, one[:])
		})
	}
	return hws, nil
}

// announce tells other workers this one is going to sleep; false when
// packets were handed to it meanwhile (then it must not sleep).
func (h *handWake) announce(w *fwd.Worker) bool {
	if h == nil {
		return true
	}
	w.SetSleeping(true)
	if w.HandoffPending() {
		w.SetSleeping(false)
		return false
	}
	return true
}

// woke ends the sleep announce started and resets the eventfd.
func (h *handWake) woke(w *fwd.Worker) {
	if h == nil {
		return
	}
	w.SetSleeping(false)
	_, _ = unix.Read(h.fd, h.drain[:])
}

func closeHandWakes(hws []*handWake) {
	for _, h := range hws {
		if h != nil {
			_ = unix.Close(h.fd)
		}
	}
}
