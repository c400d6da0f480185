package control

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// indexPool hands out indices 0..n-1 in O(1) from a free stack; a bitmap
// catches double frees. Peer ids and pool addresses are indices into it.
type indexPool struct {
	n     int
	free  []uint32
	inUse []uint64
}

func newIndexPool(n int) *indexPool {
	p := &indexPool{n: n, free: make([]uint32, n), inUse: make([]uint64, (n+63)/64)}
	for i := range p.free {
		p.free[i] = uint32(n - 1 - i) // pop order 0, 1, 2, …
	}
	return p
}

func (p *indexPool) alloc() (uint32, bool) {
	if len(p.free) == 0 {
		return 0, false
	}
	i := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	p.inUse[i/64] |= 1 << (i % 64)
	return i, true
}

func (p *indexPool) release(i uint32) bool {
	if int(i/64) >= len(p.inUse) || p.inUse[i/64]&(1<<(i%64)) == 0 {
		return false
	}
	p.inUse[i/64] &^= 1 << (i % 64)
	p.free = append(p.free, i)
	return true
}

func (p *indexPool) available() int { return len(p.free) }

// valid reports whether i is one of the pool's indices.
func (p *indexPool) valid(i uint32) bool { return int(i) < p.n }

// take marks index i in use if it is free; it reports whether it was.
// O(free) — for fixed and remembered addresses, not the common path.
func (p *indexPool) take(i uint32) bool {
	if int(i/64) >= len(p.inUse) || p.inUse[i/64]&(1<<(i%64)) != 0 {
		return false
	}
	for j, f := range p.free {
		if f == i {
			p.free = append(p.free[:j], p.free[j+1:]...)
			p.inUse[i/64] |= 1 << (i % 64)
			return true
		}
	}
	return false
}

// Pool assigns client tunnel addresses from a prefix: the server takes the
// first host address, clients the following ones (IPv4 skips the
// broadcast address). Allocate and Free are O(1) while no address is
// reserved.
type Pool struct {
	prefix netip.Prefix
	first  netip.Addr // first client address
	idx    *indexPool
	// reserved are fixed addresses of named clients: Allocate skips them,
	// Take hands them out.
	reserved map[netip.Addr]bool
}

var errPool = errors.New("address pool exhausted")

// NewPool makes a pool over prefix holding at most max clients. For IPv6
// the clients start at ::1000 like openvpn's server-ipv6.
func NewPool(prefix netip.Prefix, max int) (*Pool, error) {
	prefix = prefix.Masked()
	hostBits := prefix.Addr().BitLen() - prefix.Bits()
	firstOff := uint64(2) // network, server
	var size uint64
	switch {
	case prefix.Addr().Is4():
		if hostBits < 2 {
			return nil, errors.New("pool: IPv4 prefix too small")
		}
		size = (1 << hostBits) - 3 // minus network, server, broadcast
	default:
		if hostBits < 13 {
			return nil, errors.New("pool: IPv6 prefix must be /115 or shorter")
		}
		firstOff = 0x1000
		size = 1<<min(hostBits, 32) - firstOff
	}
	n := min(uint64(max), size)
	if n == 0 {
		return nil, errors.New("pool: empty")
	}
	return &Pool{prefix: prefix, first: addOffset(prefix.Addr(), firstOff), idx: newIndexPool(int(n))}, nil
}

// ServerAddr is the server's own tunnel address (first host).
func (p *Pool) ServerAddr() netip.Addr { return addOffset(p.prefix.Addr(), 1) }

// Prefix is the pool's prefix.
func (p *Pool) Prefix() netip.Prefix { return p.prefix }

// Allocate returns a free client address that is not reserved.
func (p *Pool) Allocate() (netip.Addr, error) {
	var skipped []uint32
	defer func() {
		for _, i := range skipped {
			p.idx.release(i)
		}
	}()
	for {
		i, ok := p.idx.alloc()
		if !ok {
			return netip.Addr{}, errPool
		}
		a := addOffset(p.first, uint64(i))
		if !p.reserved[a] {
			return a, nil
		}
		skipped = append(skipped, i)
	}
}

// Take allocates the address a itself (a fixed or remembered address); it
// reports false if a is outside the pool's client range or in use.
func (p *Pool) Take(a netip.Addr) bool {
	if !p.prefix.Contains(a) {
		return false
	}
	off := offsetOf(p.first, a)
	return off >= 0 && off < int64(len(p.idx.inUse))*64 && p.idx.take(uint32(off))
}

// InRange reports whether a is one of the addresses Allocate hands out.
func (p *Pool) InRange(a netip.Addr) bool {
	off := offsetOf(p.first, a)
	return p.prefix.Contains(a) && off >= 0 && off < int64(len(p.idx.inUse))*64 && p.idx.valid(uint32(off))
}

// Reserved reports whether a is reserved.
func (p *Pool) Reserved(a netip.Addr) bool { return p.reserved[a] }

// SetReserved replaces the reserved addresses.
func (p *Pool) SetReserved(as []netip.Addr) {
	p.reserved = map[netip.Addr]bool{}
	for _, a := range as {
		p.reserved[a] = true
	}
}

// Free returns a to the pool; it reports false if a was not allocated.
func (p *Pool) Free(a netip.Addr) bool {
	if !p.prefix.Contains(a) {
		return false
	}
	off := offsetOf(p.first, a)
	if off < 0 {
		return false
	}
	return p.idx.release(uint32(off))
}

// Available is the number of free addresses.
func (p *Pool) Available() int { return p.idx.available() }

func addOffset(a netip.Addr, off uint64) netip.Addr {
	b := a.As16()
	lo := binary.BigEndian.Uint64(b[8:]) + off
	binary.BigEndian.PutUint64(b[8:], lo)
	r := netip.AddrFrom16(b)
	if a.Is4() {
		return r.Unmap()
	}
	return r
}

// offsetOf is a-base when it fits an int64 and is non-negative, else -1.
func offsetOf(base, a netip.Addr) int64 {
	x, y := base.As16(), a.As16()
	if binary.BigEndian.Uint64(x[:8]) != binary.BigEndian.Uint64(y[:8]) {
		return -1
	}
	lx, ly := binary.BigEndian.Uint64(x[8:]), binary.BigEndian.Uint64(y[8:])
	if ly < lx || ly-lx > 1<<40 {
		return -1
	}
	return int64(ly - lx)
}
