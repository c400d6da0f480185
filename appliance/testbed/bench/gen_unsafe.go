package bench

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// genThread sends prebuilt frames as fast as it can from an AF_PACKET
// socket (-gen afpacket): sendmmsg of genBatch messages, PACKET_QDISC_BYPASS
// so the frames go straight to the driver. Each batch starts one frame
// further into the flow set, so every flow is sent.
const genBatch = 64

type genThread struct {
	fd     int
	msgs   [genBatch]unix.Mmsghdr
	iov    [genBatch]unix.Iovec
	to     unix.RawSockaddrLinklayer
	frames [][]byte
	next   int
}

// newGenThread opens the socket in the calling thread's namespace.
// Invariant for the unsafe uses: msgs, iov and to live in the genThread,
// which the caller keeps alive while sending; frames are kept alive by
// the genThread too.
func newGenThread(ifindex int, frames [][]byte) (*genThread, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
		unix.Close(fd)
		return nil, err
	}
	g := &genThread{fd: fd, frames: frames}
	g.to = unix.RawSockaddrLinklayer{Family: unix.AF_PACKET, Ifindex: int32(ifindex), Halen: 6}
	for i := range g.msgs {
		g.iov[i].SetLen(len(frames[0]))
		h := &g.msgs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&g.to))
		h.Namelen = uint32(unsafe.Sizeof(g.to))
		h.Iov = &g.iov[i]
		h.SetIovlen(1)
	}
	g.rotate()
	return g, nil
}

// rotate points the batch's messages at the next genBatch flows.
func (g *genThread) rotate() {
	for i := range g.iov {
		g.iov[i].Base = &g.frames[(g.next+i)%len(g.frames)][0]
	}
	g.next = (g.next + 1) % len(g.frames)
}

// run sends until budget frames are out, deadline passes or stop is set,
// adding to c every 16 calls.
// It returns the errno that ended it early, if one did.
func (g *genThread) run(budget uint64, deadline time.Time, stop *atomic.Bool, c *genCounters) unix.Errno {
	var n, calls, stalled uint64
	var failed unix.Errno
	for i := 0; n < budget && !stop.Load(); i++ {
		if i&63 == 0 && time.Now().After(deadline) {
			break
		}
		want := min(uint64(genBatch), budget-n)
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(g.fd), uintptr(unsafe.Pointer(&g.msgs[0])), uintptr(want), unix.MSG_DONTWAIT, 0, 0)
		calls++
		if errno != 0 || uint64(r) < want {
			// The send buffer full of frames the peer has not taken
			// (EAGAIN: MSG_DONTWAIT, so the thread spins as the AF_XDP
			// one does instead of sleeping) or a frame dropped (ENOBUFS),
			// or a short count before either.
			stalled++
		}
		if errno == 0 {
			n += uint64(r)
			g.rotate()
			if i&15 == 0 {
				c.sent.Add(n)
				c.calls.Add(calls)
				c.stalled.Add(stalled)
				n, budget, calls, stalled = 0, budget-n, 0, 0
			}
		} else if errno != unix.EAGAIN && errno != unix.ENOBUFS && errno != unix.EINTR {
			failed = errno
			break
		}
	}
	c.sent.Add(n)
	c.calls.Add(calls)
	c.stalled.Add(stalled)
	runtime.KeepAlive(g)
	return failed
}

func (g *genThread) close() { unix.Close(g.fd) }
