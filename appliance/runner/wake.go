package runner

import (
	"sync/atomic"

	"github.com/ovfwd/ovfwd/fwd"
	"golang.org/x/sys/unix"
)

// Wake wakes worker 0 from its idle poll(2) when the control plane
// injects packets (an uplink's decrypted traffic, a VPN datagram the
// kernel reassembled), so they are routed at once rather than when the
// worker's sleep times out (up to idleWait).
//
// The handshake is Dekker's: the worker stores sleeping before it checks
// the inject ring one last time and sleeps; an injector publishes into the
// ring before it loads sleeping. With Go's sequentially consistent atomics
// at least one of them sees the other, so an inject is never left waiting
// for the timeout; the eventfd write costs a system call only while the
// worker sleeps.
type Wake struct {
	eng      *fwd.Engine
	fd       int // eventfd, non-blocking
	sleeping atomic.Bool
	drain    [8]byte // worker 0's read buffer for the eventfd
}

// NewWake is a wake-up for eng's worker 0; pass it in Options.Wake and
// inject through it.
func NewWake(eng *fwd.Engine) (*Wake, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &Wake{eng: eng, fd: fd}, nil
}

// InjectIP is Engine.InjectIP followed by a wake-up when worker 0 sleeps.
func (k *Wake) InjectIP(ip []byte) error {
	if err := k.eng.InjectIP(ip); err != nil {
		return err
	}
	k.wake()
	return nil
}

// InjectReceived is Engine.InjectReceived followed by a wake-up when
// worker 0 sleeps.
func (k *Wake) InjectReceived(ip []byte) error {
	if err := k.eng.InjectReceived(ip); err != nil {
		return err
	}
	k.wake()
	return nil
}

func (k *Wake) wake() {
	if k.sleeping.Load() {
		var one = [8]byte{1}
		_, _ = unix.Write(k.fd, one[:])
	}
}

// Uplinked is Engine.Uplinked.
func (k *Wake) Uplinked(fn func(uint16, []byte)) int { return k.eng.Uplinked(fn) }

// Close releases the eventfd; call it after the Runner using it stopped.
func (k *Wake) Close() error { return unix.Close(k.fd) }

// sleep waits in poll(2) on fds (which include k.fd) unless an inject is
// pending, then resets the eventfd.
func (k *Wake) sleep(w *fwd.Worker, fds []unix.PollFd, timeoutMs int) {
	k.sleeping.Store(true)
	if !w.InjectPending() {
		waitRx(fds, timeoutMs)
	}
	k.sleeping.Store(false)
	_, _ = unix.Read(k.fd, k.drain[:])
}
