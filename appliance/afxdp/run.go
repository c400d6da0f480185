package afxdp

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Poller is one engine worker (fwd.Worker).
type Poller interface{ Poll() int }

// idleSpins is how many empty polls a worker spins through before it
// blocks: long enough to ride out gaps inside a burst, short enough not to
// burn a shared CPU.
const idleSpins = 64

// RunWorker drives w, the worker of queue q, until stop is closed. While
// traffic flows it polls back to back; when idle it blocks in poll(2) on
// queue q's sockets of every port, so the kernel wakes it the moment a
// frame lands in an RX ring (a timed sleep would add its whole length to
// the wake-up latency and overflow the ring on a busy machine). The 1 ms
// timeout bounds the delay of timers and of stop.
func RunWorker(w Poller, ports []*Port, q int, stop <-chan struct{}) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fds := make([]unix.PollFd, len(ports))
	for i, p := range ports {
		fds[i].Fd = int32(p.FD(q))
	}
	idle := 0
	for {
		select {
		case <-stop:
			return
		default:
		}
		if w.Poll() > 0 {
			idle = 0
			continue
		}
		if idle++; idle >= idleSpins {
			WaitRx(fds, 1)
		}
	}
}
