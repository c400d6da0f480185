package daemon

import (
	"sync/atomic"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/fwd"
	"golang.org/x/sys/unix"
)

// injectWake wakes worker 0 from its idle poll(2) when the control plane
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
type injectWake struct {
	eng      *fwd.Engine
	fd       int // eventfd, non-blocking
	sleeping atomic.Bool
}

func newInjectWake(eng *fwd.Engine) (*injectWake, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &injectWake{eng: eng, fd: fd}, nil
}

// InjectIP is Engine.InjectIP followed by a wake-up when worker 0 sleeps.
func (k *injectWake) InjectIP(ip []byte) error {
	if err := k.eng.InjectIP(ip); err != nil {
		return err
	}
	k.wake()
	return nil
}

// InjectReceived is Engine.InjectReceived followed by a wake-up when
// worker 0 sleeps.
func (k *injectWake) InjectReceived(ip []byte) error {
	if err := k.eng.InjectReceived(ip); err != nil {
		return err
	}
	k.wake()
	return nil
}

func (k *injectWake) wake() {
	if k.sleeping.Load() {
		var one = [8]byte{1}
		_, _ = unix.Write(k.fd, one[:])
	}
}

// Uplinked is Engine.Uplinked.
func (k *injectWake) Uplinked(fn func(uint16, []byte)) int { return k.eng.Uplinked(fn) }

// sleep waits in poll(2) on fds (which include k.fd) unless an inject is
// pending, then resets the eventfd.
func (k *injectWake) sleep(w *fwd.Worker, fds []unix.PollFd, timeoutMs int) {
	k.sleeping.Store(true)
	if !w.InjectPending() {
		afxdp.WaitRx(fds, timeoutMs)
	}
	k.sleeping.Store(false)
	var buf [8]byte
	_, _ = unix.Read(k.fd, buf[:])
}

func (k *injectWake) close() { _ = unix.Close(k.fd) }
