package afxdp

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/fwd"
	"golang.org/x/sys/unix"
)

// hub is the smallest forwarder over fwd.Port: every frame received on one
// port is copied to the other (a two-port repeater). It tests the port
// without the engine.
type hub struct {
	ports  [2]fwd.Port
	stop   atomic.Bool
	wg     sync.WaitGroup
	copied atomic.Uint64
}

func startHub(t *testing.T, ns *netns.NS, a, b *Port) *hub {
	h := &hub{ports: [2]fwd.Port{a, b}}
	for q := 0; q < a.Info().Queues; q++ {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			runtime.LockOSThread()
			h.run(q, []unix.PollFd{{Fd: int32(a.FD(q))}, {Fd: int32(b.FD(q))}})
		}()
	}
	t.Cleanup(h.Stop)
	return h
}

func (h *hub) Stop() {
	h.stop.Store(true)
	h.wg.Wait()
}

func (h *hub) run(q int, fds []unix.PollFd) {
	in, out := fwd.NewBatch(64), fwd.NewBatch(64)
	for !h.stop.Load() {
		moved := 0
		for i := range 2 {
			src, dst := h.ports[i], h.ports[1-i]
			n := src.Rx(q, in)
			if n == 0 {
				continue
			}
			got := dst.Alloc(q, out, n)
			for j := 0; j < got; j++ {
				s, d := &in.Pkts[j], &out.Pkts[j]
				d.Len = uint16(copy(d.Buf[d.Off:], s.Data()))
			}
			dst.Tx(q, out)
			src.Free(q, in)
			moved += got
		}
		if moved == 0 {
			for i := range fds {
				fds[i].Events, fds[i].Revents = unix.POLLIN, 0
			}
			_, _ = unix.Poll(fds, 1)
		}
		h.copied.Add(uint64(moved))
	}
}
