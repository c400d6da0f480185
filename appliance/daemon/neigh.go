package daemon

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/ovfwd/ovfwd/appliance/nlsync"
	"github.com/ovfwd/ovfwd/fwd"
)

type neighKey struct {
	port int
	addr netip.Addr
}

// change is a pending kernel write: mac (permanent once confirmed), or a
// delete. Values, so a storm's thousands of changes a second cost no
// allocation.
type change struct {
	mac       [6]byte
	confirmed bool
	del       bool
}

// mirrorPerPass bounds the kernel writes of one control pass (every
// serviceInterval): 100 per 50 ms, 2,000 a second. Changes beyond it wait
// for the next pass, coalesced (an address that moves twice meanwhile is
// written once), so a neighbour storm costs the kernel a bounded rate.
const mirrorPerPass = 100

// neighbours keeps the engine's and the kernel's neighbour tables in step
// both ways: entries the engine learned are written into the kernel (so
// the kernel's own traffic can resolve its next hops, since ovfwd consumes
// ARP/ND on its ports), and entries an operator pins in the kernel are
// pinned in the engine. What ovfwd writes carries the mirror's mark
// (nlsync.NeighMirror), so nlsync never reports it as a pin: the two
// directions cannot feed each other.
type neighbours struct {
	eng    *fwd.Engine
	ports  []*port
	mirror *nlsync.NeighMirror // nil: nothing to mirror into (no AF_XDP port)
	log    *slog.Logger

	mu       sync.Mutex
	mirrored map[neighKey]change // what the kernel holds from us
	pending  map[neighKey]change // to write
	pinned   map[neighKey]bool
	ok, fail uint64
	deferred uint64 // writes that waited for a later pass
	purged   int    // entries a previous run left, removed at start
}

func newNeighbours(eng *fwd.Engine, ports []*port, mirror *nlsync.NeighMirror, log *slog.Logger) *neighbours {
	return &neighbours{eng: eng, ports: ports, mirror: mirror, log: log,
		mirrored: map[neighKey]change{}, pending: map[neighKey]change{},
		pinned: map[neighKey]bool{}}
}

// engineEvent queues one thing the engine learned or forgot for the kernel.
func (n *neighbours) engineEvent(ev fwd.Event) {
	pt := n.ports[ev.Port]
	if n.mirror == nil || pt.xdp == nil {
		return
	}
	k := neighKey{ev.Port, ev.Addr}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch ev.Kind {
	case fwd.EventNeighbourLearned:
		n.pending[k] = change{mac: ev.MAC, confirmed: ev.Confirmed}
	case fwd.EventNeighbourExpired:
		n.pending[k] = change{del: true}
	}
}

// flush writes up to mirrorPerPass queued changes into the kernel.
func (n *neighbours) flush() {
	if n.mirror == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	budget := mirrorPerPass
	for k, c := range n.pending {
		if cur, ok := n.mirrored[k]; c.del && !ok || !c.del && ok && cur == c {
			delete(n.pending, k) // the kernel already has it so
			continue
		}
		if budget == 0 {
			n.deferred++
			continue
		}
		budget--
		delete(n.pending, k)
		pt := n.ports[k.port]
		var err error
		if !c.del {
			n.mirrored[k] = c
			err = n.mirror.Set(pt.ifindex, k.addr, c.mac[:], c.confirmed)
		} else {
			delete(n.mirrored, k)
			err = n.mirror.Delete(pt.ifindex, k.addr)
		}
		if err != nil {
			n.fail++
			n.log.Warn("neighbour not mirrored into the kernel", "port", pt.cfg.Name, "addr", k.addr, "err", err)
			continue
		}
		n.ok++
	}
}

// KernelNeighbour is nlsync's report of an operator's pin (or its end).
func (n *neighbours) KernelNeighbour(port int, ip netip.Addr, mac net.HardwareAddr) {
	k := neighKey{port, ip}
	n.mu.Lock()
	defer n.mu.Unlock()
	if mac != nil {
		if err := n.eng.SetNeighbour(port, ip, mac); err != nil {
			n.log.Warn("kernel neighbour not pinned", "addr", ip, "err", err)
			return
		}
		n.pinned[k] = true
		// The operator's entry replaced ours in the kernel, if there was one.
		delete(n.mirrored, k)
		delete(n.pending, k)
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
	n.log.Info("neighbour unpinned", "port", n.ports[port].cfg.Name, "addr", ip)
}

// removeMirrored deletes from the kernel everything this run mirrored.
func (n *neighbours) removeMirrored() {
	if n.mirror == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for k := range n.mirrored {
		_ = n.mirror.Delete(n.ports[k.port].ifindex, k.addr)
	}
	clear(n.mirrored)
	clear(n.pending)
}

type neighStats struct {
	ok, fail, deferred uint64
	pinned, purged     int
}

func (n *neighbours) stats() neighStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return neighStats{n.ok, n.fail, n.deferred, len(n.pinned), n.purged}
}

// startNeighbours starts the neighbour tables, with the kernel mirror
// when an AF_XDP port needs one.
func (d *daemon) startNeighbours() error {
	var err error
	for _, pt := range d.ports {
		if pt.xdp != nil && d.mirror == nil {
			if d.mirror, err = nlsync.NewNeighMirror(); err != nil {
				return err
			}
		}
	}
	d.neigh = newNeighbours(d.engine, d.ports, d.mirror, d.log)
	if d.mirror == nil {
		return nil
	}
	// A run that was killed left its mirrored entries (permanent: they
	// never age); they are recognised by the mirror's mark.
	var ifs []int
	for _, pt := range d.ports {
		if pt.xdp != nil {
			ifs = append(ifs, pt.ifindex)
		}
	}
	n, err := d.mirror.Purge(ifs)
	if err != nil {
		return err
	}
	d.neigh.purged = n
	if n > 0 {
		d.log.Warn("removed kernel neighbours a previous run mirrored", "entries", n)
	}
	return nil
}
