package daemon

import (
	"bytes"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/fwd"
)

type neighKey struct {
	port int
	addr netip.Addr
}

// neighbours keeps the engine's and the kernel's neighbour tables in step
// both ways without echoing: entries the engine learned are written into
// the kernel (so the kernel's own traffic can resolve its next hops, since
// ovfwd consumes ARP/ND on its ports), and entries an operator pins in the
// kernel are pinned in the engine — except the ones ovfwd wrote itself,
// which come back as netlink notifications.
type neighbours struct {
	eng    *fwd.Engine
	ports  []*port
	mirror *afxdp.NeighMirror // nil: nothing to mirror into (no AF_XDP port)
	log    *slog.Logger

	mu       sync.Mutex
	mirrored map[neighKey]net.HardwareAddr
	pinned   map[neighKey]bool
	ok, fail uint64
}

func newNeighbours(eng *fwd.Engine, ports []*port, mirror *afxdp.NeighMirror, log *slog.Logger) *neighbours {
	return &neighbours{eng: eng, ports: ports, mirror: mirror, log: log,
		mirrored: map[neighKey]net.HardwareAddr{}, pinned: map[neighKey]bool{}}
}

// engineEvent mirrors one thing the engine learned or forgot.
func (n *neighbours) engineEvent(ev fwd.Event) {
	pt := n.ports[ev.Port]
	if n.mirror == nil || pt.xdp == nil {
		return
	}
	k := neighKey{ev.Port, ev.Addr}
	n.mu.Lock()
	defer n.mu.Unlock()
	var err error
	switch ev.Kind {
	case fwd.EventNeighbourLearned:
		n.mirrored[k] = ev.MAC
		err = n.mirror.Set(pt.ifindex, ev.Addr, ev.MAC)
	case fwd.EventNeighbourExpired:
		delete(n.mirrored, k)
		err = n.mirror.Delete(pt.ifindex, ev.Addr)
	}
	if err != nil {
		n.fail++
		n.log.Warn("neighbour not mirrored into the kernel", "port", pt.cfg.Name, "addr", ev.Addr, "err", err)
		return
	}
	n.ok++
}

// KernelNeighbour is nlsync's report of a pinned kernel neighbour.
func (n *neighbours) KernelNeighbour(port int, ip netip.Addr, mac net.HardwareAddr) {
	k := neighKey{port, ip}
	n.mu.Lock()
	defer n.mu.Unlock()
	if mac != nil {
		if m, ours := n.mirrored[k]; ours && bytes.Equal(m, mac) {
			return // our own mirror write coming back
		}
		if err := n.eng.SetNeighbour(port, ip, mac); err != nil {
			n.log.Warn("kernel neighbour not pinned", "addr", ip, "err", err)
			return
		}
		n.pinned[k] = true
		n.log.Info("neighbour pinned from the kernel", "port", n.ports[port].cfg.Name, "addr", ip, "mac", mac.String())
		return
	}
	if !n.pinned[k] {
		return
	}
	delete(n.pinned, k)
	if err := n.eng.SetNeighbour(port, ip, nil); err != nil {
		n.log.Warn("kernel neighbour not unpinned", "addr", ip, "err", err)
	}
}

func (n *neighbours) stats() (ok, fail uint64, pinned int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ok, n.fail, len(n.pinned)
}
