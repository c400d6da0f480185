package afxdp

import (
	"errors"
	"fmt"
	"sync"
)

// Share makes the ports opened with it share their memory: queue q of every
// port binds to one UMEM per queue index (XDP_SHARED_UMEM), so a frame
// received on one port is transmitted from another without a copy, and every
// port reports the same fwd.PortInfo.Pool. Worker q is the only user of
// queue q of every port, so the frames of one UMEM need no lock: each socket
// keeps its own fill and completion ring (the kernel requires that for a
// socket on another device or queue, net/xdp/xsk.c xsk_bind), all refilled
// from and reclaimed into the one free stack of the queue index.
//
// The first port to open queue q creates the socket and UMEM (openSocket,
// sized for every port of the Share); the others bind to it (joinSocket).
type Share struct {
	pool  uint16
	ports int

	mu    sync.Mutex
	umems map[int]*sharedUMEM
}

// NewShare is a Share for up to ports ports, reported as buffer pool pool.
func NewShare(pool uint16, ports int) *Share {
	return &Share{pool: pool, ports: max(ports, 1), umems: map[int]*sharedUMEM{}}
}

// sharedUMEM is the memory of one queue index: the socket that registered
// it, the frames, and how many sockets use it. The owner socket
// is closed (and the UMEM unmapped) when the last user is gone, not when its
// own port closes, because the other sockets' frames live in that mapping.
type sharedUMEM struct {
	q     int
	owner *umemSocket
	fd    int
	umem  []byte
	free  *frameStack
	zc    bool
	users int
	// kickAlways: the owner bound without need_wakeup, which the sockets
	// that join inherit (xp_assign_dev_shared).
	kickAlways bool
	// rings are the owner's ring sizes, which the sockets that join take
	// too: a UMEM made smaller for a locked-memory limit has fewer frames
	// for their fill rings.
	rings ringConfig
}

// frameStack is the frames of one UMEM that no ring and no packet holds.
type frameStack struct{ s []uint64 }

// frames sizes a shared UMEM: what one unshared queue has, per port.
func (sh *Share) frames(rc ringConfig) uint32 { return rc.Frames * uint32(sh.ports) }

// open binds queue q of ifindex to the Share's UMEM for q, creating it if
// this is the first port on q.
func (sh *Share) open(ifindex, q int, rc ringConfig, wantZC bool) (*queue, bindMode, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if u := sh.umems[q]; u != nil {
		qu, err := joinSocket(ifindex, q, u.rings, u)
		if err != nil {
			return nil, bindMode{}, fmt.Errorf("%w: %w", errJoin, err)
		}
		qu.shareOf = sh
		m := bindMode{ZeroCopy: qu.zeroCopy}
		if !m.ZeroCopy {
			m.Why = "shared UMEM of a copy-mode socket"
		}
		return qu, m, nil
	}
	big := rc
	big.Frames = sh.frames(rc)
	qu, m, err := openSocket(ifindex, q, big, wantZC)
	if err != nil {
		return nil, m, err
	}
	u := &sharedUMEM{q: q, owner: qu.sock, fd: qu.fd, umem: qu.umem, free: qu.free, zc: qu.zeroCopy, users: 1, kickAlways: qu.wakeErr != nil, rings: m.Rings}
	qu.shared, qu.shareOf = u, sh
	sh.umems[q] = u
	return qu, m, nil
}

// release drops one user of u; the last one closes the owner socket.
func (sh *Share) release(u *sharedUMEM) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	u.users--
	if u.users > 0 {
		return
	}
	if sh.umems[u.q] == u {
		delete(sh.umems, u.q)
	}
	u.owner.close()
}

// errJoin marks a failed shared-UMEM bind: Open then gives the port its own
// UMEMs (the engine copies between pools, as it did before Share).
var errJoin = errors.New("shared UMEM")

func (sh *Share) String() string { return fmt.Sprintf("pool %d", sh.pool) }
