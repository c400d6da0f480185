package nat

import (
	"math/bits"

	"github.com/ovfwd/ovfwd/fwd/csum"
	"github.com/ovfwd/ovfwd/fwd/internal/anonmem"
)

// Allocation: the table's arrays, and its records (sessions, mappings,
// clients) and port blocks taken and given back.

// hugeSlice gives a table of at least a huge page its own mapping on
// transparent huge pages (anonmem): with many sessions the tables span
// thousands of 4 KiB pages, more than the TLB holds, so a lookup's cache
// miss would come with a page walk. Smaller ones, and any when mmap fails,
// are on the heap.
func hugeSlice[T any](t *Table, n int) []T {
	if size := anonmem.Size[T](n); size >= anonmem.HugePage {
		if s := anonmem.Slice[T](t, n, true); s != nil {
			t.mapped += size
			return s
		}
	}
	return make([]T, n)
}

// alloc sizes the table for k's share of sessions; once, on the first
// configuration (a larger max_sessions later needs a restart).
func (t *Table) alloc(k *Compiled) {
	n := (k.cfg.MaxSessions + t.n - 1) / t.n
	t.sess = hugeSlice[session](t, n)
	t.maps = hugeSlice[mapping](t, n)
	for _, x := range []*index{&t.sidx, &t.midx, &t.oidx} {
		c := indexSize(n)
		x.s = hugeSlice[uint64](t, c)
		x.mask = uint32(c - 1)
	}
	t.sfree = make([]uint32, n)
	t.mfree = make([]uint32, n)
	for i := range n {
		t.sfree[i] = uint32(n - 1 - i)
		t.mfree[i] = uint32(n - 1 - i)
	}
}

func (t *Table) newAddrState(k *Compiled, i int) addrState {
	o := &k.out[i]
	words := (int(o.hi) - int(o.lo) + 64) / 64
	var a addrState
	for p := range a.used {
		a.used[p] = make([]uint64, words)
	}
	a.bused = make([]uint32, o.blocks)
	for b := o.blocks - 1; b >= 0; b-- {
		if b%t.n == t.w {
			a.free = append(a.free, uint16(b))
		}
	}
	// Clients are bounded by the blocks this worker can hand out.
	need := len(t.clients) + len(a.free)
	if need > cap(t.clients) {
		t.growClients(need)
	}
	return a
}

func (t *Table) growClients(n int) {
	c := make([]client, len(t.clients), n)
	copy(c, t.clients)
	t.clients = c
	t.cidx = newIndex(n)
	for i := range t.clients {
		if t.clients[i].live {
			t.cidx.insert(hashC(t.clients[i].k), uint32(i))
		}
	}
}

func live(proto uint8) int {
	switch proto {
	case protoTCP:
		return cLiveTCP
	case protoUDP:
		return cLiveUDP
	}
	return cLiveICMP
}

func pidx(proto uint8) int {
	switch proto {
	case protoTCP:
		return pTCP
	case protoUDP:
		return pUDP
	}
	return pICMP
}

// newSession adds a session for k on mapping m, or reports the table full.
func (t *Table) newSession(k skey, m uint32) (uint32, Verdict) {
	if len(t.sfree) == 0 || len(t.sess)-len(t.sfree) >= t.limit {
		return 0, DropTableFull
	}
	mp := &t.maps[m]
	c := &t.clients[mp.client]
	if int(mp.refs) >= t.k.cfg.MaxSessionsPerMapping || int(c.sess) >= t.k.cfg.MaxSessionsPerClient {
		return 0, DropClientLimit
	}
	c.sess++
	id := t.sfree[len(t.sfree)-1]
	t.sfree = t.sfree[:len(t.sfree)-1]
	addrs, ports := wireKey(k)
	out := bits.ReverseBytes32(mp.ok.out)
	t.sess[id] = session{addrs: addrs, ports: ports, proto: k.proto, m: m + 1, last: t.now, out: out,
		outPort: bits.ReverseBytes16(mp.ok.port), rule: mp.ik.rule, dOut: csum.Fold16(csum.Diff32(uint32(addrs), out))}
	t.sidx.insert(t.hashS(k), id)
	t.maps[m].refs++
	t.cnt[live(k.proto)]++
	t.cnt[cCreated]++
	return id, Done
}

func (t *Table) freeSession(id uint32) {
	s := &t.sess[id]
	t.sidx.remove(t.hashS(s.key()), id)
	t.cnt[live(s.proto)]--
	mi := s.m - 1
	s.m, s.proto = 0, 0 // no packet's key matches it now (the fast path relies on it)
	t.sfree = append(t.sfree, id)
	m := &t.maps[mi]
	t.clients[m.client].sess--
	if m.refs--; m.refs == 0 {
		t.midx.remove(hashM(m.ik), mi)
		t.oidx.remove(hashO(m.ok), mi)
		t.unport(m)
		t.mfree = append(t.mfree, mi)
		t.cnt[cMappings]--
	}
}

// newMapping gives inside endpoint k an outside port from its client's
// blocks, taking a new block when they are full.
func (t *Table) newMapping(k mkey) (uint32, Verdict) {
	if len(t.mfree) == 0 {
		return 0, DropTableFull
	}
	ci, ok := t.findClient(ckey{k.in, k.rule})
	if !ok {
		var v Verdict
		if ci, v = t.newClient(ckey{k.in, k.rule}); v != Done {
			return 0, v
		}
	}
	c := &t.clients[ci]
	p := pidx(k.proto)
	for {
		for bi := range int(c.n) {
			if port, ok := t.takePort(c, bi, p); ok {
				mi := t.mfree[len(t.mfree)-1]
				t.mfree = t.mfree[:len(t.mfree)-1]
				o := &t.k.out[c.oi]
				t.maps[mi] = mapping{ik: k, ok: okey{o.addr, port, k.proto}, client: ci, oi: c.oi}
				t.addrs[c.oi].bused[c.blocks[bi]]++
				t.midx.insert(hashM(k), mi)
				t.oidx.insert(hashO(t.maps[mi].ok), mi)
				t.cnt[cMappings]++
				return mi, Done
			}
		}
		if int(c.n) >= t.k.cfg.MaxBlocks || !t.takeBlock(ci, int(c.oi)) {
			if c.n == 0 {
				t.freeClient(ci)
			}
			return 0, DropNoPort
		}
	}
}

// takePort finds a free port of proto index p in block bi of client c.
func (t *Table) takePort(c *client, bi, p int) (uint16, bool) {
	o := &t.k.out[c.oi]
	bs := t.k.cfg.BlockSize
	start := int(c.blocks[bi]) * bs
	end := min(start+bs, int(o.hi)-int(o.lo)+1)
	used := t.addrs[c.oi].used[p]
	n := end - start
	cur := int(c.cursor) % n
	for i := 0; i < n; {
		off := start + (cur+i)%n
		w := used[off>>6]
		if w == ^uint64(0) {
			i += 64 - off&63
			continue
		}
		if w&(1<<(off&63)) == 0 && o.lo+uint16(off) != t.k.cfg.Exclude {
			used[off>>6] |= 1 << (off & 63)
			c.cursor = uint16((cur + i + 1) % n)
			return o.lo + uint16(off), true
		}
		i++
	}
	return 0, false
}

func (t *Table) newClient(k ckey) (uint32, Verdict) {
	if len(t.clients) == cap(t.clients) {
		// Reuse a dead record (clients are few: at most one per block).
		for i := range t.clients {
			if !t.clients[i].live {
				return t.initClient(uint32(i), k)
			}
		}
		return 0, DropNoPort
	}
	t.clients = t.clients[:len(t.clients)+1]
	return t.initClient(uint32(len(t.clients)-1), k)
}

func (t *Table) initClient(i uint32, k ckey) (uint32, Verdict) {
	r := &t.k.rules[k.rule]
	c := &t.clients[i]
	*c = client{k: k, live: true}
	// Paired pooling: the client's address is fixed by its first block.
	first := int(mix32(k.addr) % uint32(r.n))
	for j := range r.n {
		oi := r.first + (first+j)%r.n
		c.oi = uint16(oi)
		if t.takeBlock(i, oi) {
			t.cidx.insert(hashC(k), i)
			t.cnt[cClients]++
			return i, Done
		}
	}
	c.live = false
	return 0, DropNoPort
}

func (t *Table) freeClient(i uint32) {
	c := &t.clients[i]
	t.cidx.remove(hashC(c.k), i)
	c.live = false
	t.cnt[cClients]--
}

// takeBlock gives client ci a free block of outside address oi, logging
// it; without room for the log line it gives none (no unlogged block).
func (t *Table) takeBlock(ci uint32, oi int) bool {
	a := &t.addrs[oi]
	if len(a.free) == 0 {
		return false
	}
	c := &t.clients[ci]
	b := a.free[len(a.free)-1]
	if !t.emit(true, c, oi, b) {
		t.cnt[cEventsLost]++
		return false
	}
	a.free = a.free[:len(a.free)-1]
	c.blocks[c.n] = b
	c.n++
	t.cnt[cBlocksAlloc]++
	t.cnt[cBlocks]++
	return true
}

// releaseIdleBlocks returns client ci's unused blocks, and the client when
// it has none left.
func (t *Table) releaseIdleBlocks(ci uint32) {
	c := &t.clients[ci]
	for bi := 0; bi < int(c.n); {
		if t.addrs[c.oi].bused[c.blocks[bi]] != 0 {
			bi++
			continue
		}
		if !t.emit(false, c, int(c.oi), c.blocks[bi]) {
			return // keep it until the log line fits
		}
		a := &t.addrs[c.oi]
		a.free = append(a.free, c.blocks[bi])
		c.blocks[bi] = c.blocks[c.n-1] // mappings find their block by port, not by slot
		c.n--
		t.cnt[cBlocksFree]++
		t.cnt[cBlocks]--
	}
	if c.n == 0 {
		t.freeClient(ci)
	}
}

// unport frees mapping m's outside port and its share of its block.
func (t *Table) unport(m *mapping) {
	o := &t.k.out[m.oi]
	off := m.ok.port - o.lo
	a := &t.addrs[m.oi]
	a.used[pidx(m.ok.proto)][off>>6] &^= 1 << (off & 63)
	a.bused[int(off)/t.k.cfg.BlockSize]--
}

// ReleaseClients ends every session of the inside addresses addrs (host
// order) and gives back their port blocks: their clients have left, and
// the addresses may go to someone else, whose flows must not continue
// the old mappings (nor be logged under the old holder's blocks). A
// block whose release line does not fit the event ring stays until the
// next client sweep. One pass over the session array (its size is the
// worker's share of max_sessions) for all of addrs: the worker calls it
// at most once a poll, with every release asked for since.
func (t *Table) ReleaseClients(addrs []uint32) {
	if t.k == nil || len(addrs) == 0 {
		return
	}
	gone := func(a uint32) bool {
		for _, x := range addrs {
			if x == a {
				return true
			}
		}
		return false
	}
	for i := range t.sess {
		if s := &t.sess[i]; s.m != 0 && gone(bits.ReverseBytes32(uint32(s.addrs))) {
			t.freeSession(uint32(i))
			t.cnt[cReleased]++
		}
	}
	for i := range t.clients {
		if c := &t.clients[i]; c.live && gone(c.k.addr) {
			t.releaseIdleBlocks(uint32(i))
		}
	}
}
