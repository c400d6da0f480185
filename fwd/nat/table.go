package nat

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/ovfwd/ovfwd/fwd/csum"
	"github.com/ovfwd/ovfwd/fwd/internal/anonmem"
)

// Verdict is what Out or In decided for a packet.
type Verdict uint8

const (
	Pass            Verdict = iota // not NAT's: carry on unchanged
	Done                           // translated in place
	Handoff                        // owned by another worker (see the owner result)
	DropNoPort                     // the client's port blocks are full and no block is left
	DropTableFull                  // the session table is full
	DropNoSession                  // inbound to a NAT port without a session (filtered)
	DropFragNoState                // a later fragment whose first fragment was not seen
	DropUnsupported                // a protocol NAT cannot translate from a NAT'd source
	DropMalformed                  // too short to translate
	numVerdicts
)

var verdictNames = [numVerdicts]string{"pass", "done", "handoff", "no_port", "table_full", "no_session",
	"frag_no_state", "unsupported", "malformed"}

func (v Verdict) String() string {
	if v < numVerdicts {
		return verdictNames[v]
	}
	return "unknown"
}

// Protocol indexes of per-protocol state.
const (
	pTCP = iota
	pUDP
	pICMP
	numProtos
)

// TCP state bits of a session.
const (
	stSynOut = 1 << iota
	stSynIn
	stFinOut
	stFinIn
	stRst
)

type skey struct {
	in, rem         uint32
	inPort, remPort uint16
	proto           uint8
}

// session is 32 bytes, two to a cache line and never across two (the
// array is a large, page-aligned allocation): an established flow's
// outbound packet reads this record and nothing else — its key, its age
// and a copy of its mapping's outside endpoint and rule, with the address
// change's checksum difference worked out once. The key and the outside
// endpoint are in wire order (see wireKey): the fast path compares and
// writes them as the header holds them, without byte swaps.
type session struct {
	addrs   uint64 // inside and remote address, wire order
	ports   uint32 // inside and remote port, wire order
	proto   uint8  // 0 while the record is free
	state   uint8
	rule    uint8  // the mapping's rule (renumbered with it on reload)
	m       uint32 // mapping id + 1; 0: the record is free
	last    uint32 // engine seconds of the last packet
	out     uint32 // the mapping's outside address, wire order
	outPort uint16 // and port, wire order
	dOut    uint16 // the address change in a checksum, wire order
}

// Wire order. A header's fields loaded as little-endian words (one load
// each, the bytes as they are) are their values byte-reversed. Keys are
// compared and hashed in that form, and, because a one's-complement sum
// of byte-swapped words is the byte-swapped sum (RFC 1071 §2(B)),
// checksums are updated in it too.
func wireKey(k skey) (addrs uint64, ports uint32) {
	return uint64(bits.ReverseBytes32(k.in)) | uint64(bits.ReverseBytes32(k.rem))<<32,
		uint32(bits.ReverseBytes16(k.inPort)) | uint32(bits.ReverseBytes16(k.remPort))<<16
}

func (s *session) key() skey {
	return skey{bits.ReverseBytes32(uint32(s.addrs)), bits.ReverseBytes32(uint32(s.addrs >> 32)),
		bits.ReverseBytes16(uint16(s.ports)), bits.ReverseBytes16(uint16(s.ports >> 16)), s.proto}
}

// outside is the session's outside address and port.
func (s *session) outside() (uint32, uint16) {
	return bits.ReverseBytes32(s.out), bits.ReverseBytes16(s.outPort)
}

type mkey struct {
	in    uint32
	port  uint16
	proto uint8
	rule  uint8
}

type okey struct {
	out   uint32
	port  uint16
	proto uint8
}

type mapping struct {
	ik     mkey
	ok     okey
	client uint32 // client id
	refs   uint32 // sessions using it; 0: the record is free
	oi     uint16 // outside address index
}

type ckey struct {
	addr uint32
	rule uint8
}

type client struct {
	k      ckey
	live   bool
	oi     uint16               // outside address index: every block of a client is on one address
	n      uint8                // blocks held
	cursor uint16               // port scan start within the current block
	blocks [maxBlocksCap]uint16 // block numbers on address oi
}

// addrState is a worker's share of one outside address: which of its
// ports are mapped (per protocol) and which of the worker's blocks are free.
type addrState struct {
	used  [numProtos][]uint64
	free  []uint16
	bused []uint32 // mappings per block (of this worker's blocks)
}

// Table is one worker's NAT state (see the package doc for the threading
// rules). Its zero value is not usable: use NewTable.
type Table struct {
	// What every packet reads, first: Prefetch's fields, then the fast
	// path's. The copies of k's source prefixes (wire order, in srcCopy
	// when they fit), timeouts and rules' lone ports (see Compiled.lone;
	// -1 for the rest; indexed by a uint8, so unchecked) spare reading k's
	// lines, which a batch's packet buffers can evict (they all sit at one
	// offset in 2 KiB buffers, so in a few L1 sets).
	k       *Compiled
	seed    uint64 // hashS's key
	src0    pfx4   // srcs[0], PrefetchIP's first test; {1, 0}, which matches nothing, without NAT or prefixes
	sidx    index
	srcs    []pfx4 // k.srcs in wire order (in srcCopy when they fit)
	now     uint32
	sess    []session
	tmo     [4]uint32
	tmin    uint32 // the least of tmo: younger sessions need no timeout()
	w, n    int
	srcCopy [4]pfx4
	lone    [maxRules + 1]int16

	limit   int
	sfree   []uint32
	maps    []mapping
	mfree   []uint32
	midx    index // by mkey
	oidx    index // by okey
	clients []client
	cfree   []uint32
	cidx    index
	addrs   []addrState

	frags     [fragSlots]frag
	lastNs    int64
	sweep     uint32
	csweep    uint32
	sweepAcc  int64
	csweepAcc int64

	events *ring
	mapped int    // bytes of the tables outside the Go heap (hugeSlice)
	sink   uint32 // Load's and Touch's loads land here so they are not optimised away
	cnt    [numCounters]uint64
	pub    [numCounters]atomic.Uint64
}

// NewTable makes worker w's table of n workers. It holds nothing until
// Refresh gives it a configuration.
func NewTable(w, n int) *Table {
	return &Table{w: w, n: max(n, 1), events: newRing(eventSlots), seed: rand.Uint64(), src0: pfx4{addr: 1}}
}

// Counters.
const (
	cOut = iota
	cIn
	cHairpin
	cFragOut
	cFragIn
	cCreated
	cExpired
	cBlocksAlloc
	cBlocksFree
	cEventsLost
	cLiveTCP
	cLiveUDP
	cLiveICMP
	cMappings
	cClients
	cBlocks
	cDrops      // then one per Verdict
	numCounters = cDrops + int(numVerdicts)
)

// Stats are a table's counters (Stats.Add sums workers).
type Stats struct {
	Translated, Untranslated, Hairpinned uint64
	FragmentsOut, FragmentsIn            uint64
	SessionsCreated, SessionsExpired     uint64
	BlocksAllocated, BlocksReleased      uint64
	EventsLost                           uint64 // block log lines lost to a full ring
	Sessions                             [numProtos]uint64
	Mappings, Clients, Blocks            uint64
	Drops                                [numVerdicts]uint64
}

// SessionsTCP etc. name Stats.Sessions' indexes.
const (
	SessionsTCP  = pTCP
	SessionsUDP  = pUDP
	SessionsICMP = pICMP
)

// DropNames lists the drop reasons in Stats.Drops order (Pass..Handoff unused).
func DropNames() []string { return verdictNames[:] }

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Translated += o.Translated
	s.Untranslated += o.Untranslated
	s.Hairpinned += o.Hairpinned
	s.FragmentsOut += o.FragmentsOut
	s.FragmentsIn += o.FragmentsIn
	s.SessionsCreated += o.SessionsCreated
	s.SessionsExpired += o.SessionsExpired
	s.BlocksAllocated += o.BlocksAllocated
	s.BlocksReleased += o.BlocksReleased
	s.EventsLost += o.EventsLost
	for i := range s.Sessions {
		s.Sessions[i] += o.Sessions[i]
	}
	s.Mappings += o.Mappings
	s.Clients += o.Clients
	s.Blocks += o.Blocks
	for i := range s.Drops {
		s.Drops[i] += o.Drops[i]
	}
}

// Stats reads the counters as of the table's last Refresh; any goroutine.
func (t *Table) Stats() Stats {
	g := func(i int) uint64 { return t.pub[i].Load() }
	s := Stats{Translated: g(cOut), Untranslated: g(cIn), Hairpinned: g(cHairpin), FragmentsOut: g(cFragOut),
		FragmentsIn: g(cFragIn), SessionsCreated: g(cCreated), SessionsExpired: g(cExpired),
		BlocksAllocated: g(cBlocksAlloc), BlocksReleased: g(cBlocksFree), EventsLost: g(cEventsLost),
		Sessions: [numProtos]uint64{g(cLiveTCP), g(cLiveUDP), g(cLiveICMP)},
		Mappings: g(cMappings), Clients: g(cClients), Blocks: g(cBlocks)}
	for i := range s.Drops {
		s.Drops[i] = g(cDrops + i)
	}
	return s
}

// Hairpinned counts one hairpinned packet (the caller did Out then In).
func (t *Table) Hairpinned() { t.cnt[cHairpin]++ }

// Active reports whether the table translates anything.
func (t *Table) Active() bool { return t.k != nil }

// Config returns the configuration the table runs, or nil.
func (t *Table) Config() *Compiled { return t.k }

// Expiry sweeps: every session record is visited once per sessionSweep
// and every client once per clientSweep, a slice per Refresh in proportion
// to the time since the last one, so the cost per poll is small however
// fast the worker polls (In and Out also check a session's age on use).
const (
	sessionSweep = 5e9 // ns
	clientSweep  = 1e9
)

// Refresh is the worker's once-per-poll step: it takes the configuration
// k (nil: NAT off) and the engine clock (ns), and expires a
// time-proportional slice of sessions and idle port blocks.
func (t *Table) Refresh(k *Compiled, nowNs int64) {
	t.now = uint32(nowNs / 1e9)
	if k != t.k {
		t.reconfigure(k)
	}
	el := min(max(nowNs-t.lastNs, 0), sessionSweep)
	if t.lastNs == 0 {
		el = 0
	}
	t.lastNs = nowNs
	if t.k != nil {
		t.sweepAcc += el * int64(len(t.sess))
		n := t.sweepAcc / sessionSweep
		t.sweepAcc -= n * sessionSweep
		for range n {
			i := t.sweep
			if t.sweep++; int(t.sweep) >= len(t.sess) {
				t.sweep = 0
			}
			if s := &t.sess[i]; s.m != 0 && t.expired(s) {
				t.freeSession(i)
				t.cnt[cExpired]++
			}
		}
		t.csweepAcc += min(el, clientSweep) * int64(len(t.clients))
		n = t.csweepAcc / clientSweep
		t.csweepAcc -= n * clientSweep
		for range n {
			i := t.csweep
			if t.csweep++; int(t.csweep) >= len(t.clients) {
				t.csweep = 0
			}
			if c := &t.clients[i]; c.live {
				t.releaseIdleBlocks(i)
			}
		}
	}
}

// Publish makes the counters visible to Stats; the worker calls it once
// per poll, after the packets.
func (t *Table) Publish() {
	for i, v := range t.cnt {
		if t.pub[i].Load() != v {
			t.pub[i].Store(v)
		}
	}
}

func (t *Table) timeout(s *session) uint32 {
	switch s.proto {
	case protoTCP:
		if s.state&(stSynOut|stSynIn) == stSynOut|stSynIn && s.state&stRst == 0 &&
			s.state&(stFinOut|stFinIn) != stFinOut|stFinIn {
			return t.tmo[0]
		}
		return t.tmo[1]
	case protoUDP:
		return t.tmo[2]
	}
	return t.tmo[3]
}

func (t *Table) expired(s *session) bool {
	age := t.now - s.last
	return age > t.tmin && age > t.timeout(s)
}

// reconfigure switches to k, keeping the state of rules k keeps unchanged.
func (t *Table) reconfigure(k *Compiled) {
	old := t.k
	if t.sess == nil && k != nil {
		t.alloc(k)
	}
	// ruleMap[i]: old rule i's index in k, or -1.
	var ruleMap [maxRules + 1]int
	var oiMap []int
	if old != nil {
		for i := range old.rules {
			ruleMap[i] = -1
			for j := range k.rulesOrNil() {
				if sameRule(old, i, k, j) {
					ruleMap[i] = j
					break
				}
			}
		}
		oiMap = make([]int, len(old.out))
		for i := range old.out {
			oiMap[i] = -1
			if ruleMap[old.out[i].rule] >= 0 {
				oiMap[i] = k.outsideIndex(old.out[i].addr)
			}
		}
		for i := range t.sess {
			s := &t.sess[i]
			if s.m == 0 {
				continue
			}
			if r := ruleMap[s.rule]; r < 0 {
				t.freeSession(uint32(i))
			} else {
				s.rule = uint8(r)
			}
		}
		for i := range t.clients {
			if c := &t.clients[i]; c.live && ruleMap[c.k.rule] < 0 {
				t.releaseIdleBlocks(uint32(i)) // every block is idle now
				if c.live {                    // no room for the log lines: drop the blocks unlogged, counted
					t.cnt[cEventsLost] += uint64(c.n)
					t.cnt[cBlocks] -= uint64(c.n)
					c.n = 0
					t.freeClient(uint32(i))
				}
			}
		}
	}
	if k == nil {
		t.k, t.src0 = nil, pfx4{addr: 1}
		return
	}
	// Carry the kept addresses' state over; fresh state for new ones.
	addrs := make([]addrState, len(k.out))
	for i := range k.out {
		found := false
		for j, nj := range oiMap {
			if nj == i {
				addrs[i], found = t.addrs[j], true
			}
		}
		if !found {
			addrs[i] = t.newAddrState(k, i)
		}
	}
	for i := range t.maps {
		if m := &t.maps[i]; m.refs != 0 {
			m.ik.rule = uint8(ruleMap[m.ik.rule])
			m.oi = uint16(oiMap[m.oi])
		}
	}
	for i := range t.clients {
		if c := &t.clients[i]; c.live {
			c.k.rule = uint8(ruleMap[c.k.rule])
			c.oi = uint16(oiMap[c.oi])
		}
	}
	t.addrs, t.k, t.tmo = addrs, k, k.timeout
	t.tmin = slices.Min(t.tmo[:])
	t.srcs = t.srcCopy[:0]
	if len(k.srcs) > len(t.srcCopy) {
		t.srcs = make([]pfx4, 0, len(k.srcs))
	}
	for _, p := range k.srcs {
		t.srcs = append(t.srcs, pfx4{bits.ReverseBytes32(p.addr), bits.ReverseBytes32(p.mask)})
	}
	t.src0 = pfx4{addr: 1}
	if len(t.srcs) > 0 {
		t.src0 = t.srcs[0]
	}
	for i := range t.lone {
		t.lone[i] = -1
		if i < len(k.rules) && i < len(k.lone) && k.lone[i] >= 0 && k.lone[i] <= math.MaxInt16 {
			t.lone[i] = int16(k.lone[i])
		}
	}
	t.limit = min(len(t.sess), (k.cfg.MaxSessions+t.n-1)/t.n)
}

func (k *Compiled) rulesOrNil() []crule {
	if k == nil {
		return nil
	}
	return k.rules
}

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

// Owner returns the worker owning inside address a.
func (t *Table) ownerIn(a uint32) int {
	if t.n == 1 {
		return 0
	}
	return int(mix32(a) % uint32(t.n))
}

// ownerOut returns the worker owning outside port port of address oi.
func (t *Table) ownerOut(oi int, port uint16) int {
	if t.n == 1 {
		return 0
	}
	o := &t.k.out[oi]
	return int(port-o.lo) / t.k.cfg.BlockSize % t.n
}

// ---- sessions and mappings ----

func (t *Table) findSession(k skey) (uint32, bool) {
	h := t.hashS(k)
	x := &t.sidx
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		v := x.s[i]
		if v == 0 {
			return 0, false
		}
		if uint32(v>>32) == h {
			if id := uint32(v) - 1; t.sess[id].key() == k {
				return id, true
			}
		}
	}
}

func (t *Table) findMapping(k mkey) (uint32, bool) {
	h := hashM(k)
	x := &t.midx
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		v := x.s[i]
		if v == 0 {
			return 0, false
		}
		if uint32(v>>32) == h {
			if id := uint32(v) - 1; t.maps[id].ik == k {
				return id, true
			}
		}
	}
}

func (t *Table) findOutside(k okey) (uint32, bool) {
	h := hashO(k)
	x := &t.oidx
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		v := x.s[i]
		if v == 0 {
			return 0, false
		}
		if uint32(v>>32) == h {
			if id := uint32(v) - 1; t.maps[id].ok == k {
				return id, true
			}
		}
	}
}

func (t *Table) findClient(k ckey) (uint32, bool) {
	if len(t.cidx.s) == 0 {
		return 0, false
	}
	h := hashC(k)
	x := &t.cidx
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		v := x.s[i]
		if v == 0 {
			return 0, false
		}
		if uint32(v>>32) == h {
			if id := uint32(v) - 1; t.clients[id].k == k {
				return id, true
			}
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
	id := t.sfree[len(t.sfree)-1]
	t.sfree = t.sfree[:len(t.sfree)-1]
	mp := &t.maps[m]
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

// ---- index ----

// index is an open-addressing hash index of record ids with linear probing
// and backward-shift deletion; a slot holds hash<<32 | id+1 (0: empty), and
// a record's home slot is its hash masked, so deletion needs no rehash.
type index struct {
	s    []uint64
	mask uint32
}

func newIndex(n int) index {
	c := indexSize(n)
	return index{s: make([]uint64, c), mask: uint32(c - 1)}
}

// indexSize is the slots of an index for n records: load at most 0.5.
func indexSize(n int) int {
	c := 16
	for c < 2*n {
		c <<= 1
	}
	return c
}

func (x *index) insert(h, id uint32) {
	i := h & x.mask
	for x.s[i] != 0 {
		i = (i + 1) & x.mask
	}
	x.s[i] = uint64(h)<<32 | uint64(id+1)
}

func (x *index) remove(h, id uint32) {
	want := uint64(h)<<32 | uint64(id+1)
	i := h & x.mask
	for x.s[i] != want {
		if x.s[i] == 0 {
			return
		}
		i = (i + 1) & x.mask
	}
	// Backward shift: pull later entries of the cluster into the hole when
	// their home slot is not between the hole and them.
	for j := (i + 1) & x.mask; x.s[j] != 0; j = (j + 1) & x.mask {
		home := uint32(x.s[j]>>32) & x.mask
		if (j-home)&x.mask >= (j-i)&x.mask {
			x.s[i] = x.s[j]
			i = j
		}
	}
	x.s[i] = 0
}

func mix32(v uint32) uint32 {
	h := uint64(v) * 0x9e3779b97f4a7c15
	return uint32(h >> 32)
}

func mix64(v uint64) uint32 {
	v ^= v >> 33
	v *= 0xff51afd7ed558ccd
	v ^= v >> 33
	v *= 0xc4ceb9fe1a85ec53
	return uint32(v>>32) ^ uint32(v)
}

// hashS is one multiply-shift over the 5-tuple folded into 64 bits. The
// fold is one-to-one for a given inside address and protocol (the ports
// go over the inside address, the remote address stays whole), so a
// client's flows differ before the multiply; the table's random seed
// keeps a client from choosing flows that share an index slot. The
// xorshift brings the high half's low bits (the addresses' last octets,
// which vary most) to where the multiply's kept bits see them.
func (t *Table) hashS(k skey) uint32 {
	x := (uint64(k.in)<<32 | uint64(k.rem)) ^ (uint64(k.inPort)<<48 | uint64(k.remPort)<<32 | uint64(k.proto)) ^ t.seed
	x ^= x >> 29
	return uint32((x * 0x9e3779b97f4a7c15) >> 32)
}

// hashWire is hashS from the header's words as they are loaded in wire
// order (see wireKey): source and destination address as one, the two
// ports as one. The swaps put the octets where hashS has them (in wire
// order the last octets share the high byte of their words, and the
// xorshift would fold them onto each other: four times the probes).
func (t *Table) hashWire(addrs uint64, ports uint32, proto uint8) uint32 {
	x := bits.ReverseBytes64(addrs) ^ (uint64(bits.ReverseBytes32(ports))<<32 | uint64(proto)) ^ t.seed
	x ^= x >> 29
	return uint32((x * 0x9e3779b97f4a7c15) >> 32)
}

func hashM(k mkey) uint32 { // not the rule: a reload renumbers rules in place
	return mix64(uint64(k.in)<<32 | uint64(k.port)<<8 | uint64(k.proto))
}

func hashO(k okey) uint32 { return mix64(uint64(k.out)<<32 | uint64(k.port)<<8 | uint64(k.proto)) }

func hashC(k ckey) uint32 { return mix32(k.addr) } // not the rule, as hashM

// Warming. With many sessions each lookup is a cache miss or two;
// Prefetch and Touch let the worker take a received batch's misses
// together (the loads of different packets are independent, so they
// overlap) before it translates the packets one by one, as the FIB lookup
// does (fwd/lpm): Prefetch hashes and starts the index line's load as each
// packet is parsed, Touch finds each record by the hash tags in those
// lines and starts the record's, and OutHint's fast path then finds both
// in the cache.

// Kinds of a Prefetch hint.
const (
	probeSess = 1 << 62
	probeMap  = 1 << 63
	probeDone = 1 << 61 // Touch looked: the low 32 bits are the record id + 1, or 0 for none
)

// Prefetch returns the hash a packet's lookup will start from, tagged
// with its kind (0 when NAT would not look), and starts loading the index
// slot it names without waiting for it: the worker calls it as it parses
// each packet of a batch, and the line arrives while it parses the next.
// A record a few slots on is on the same cache line, or the next one,
// which Touch then reads.
func (t *Table) Prefetch(pkt []byte, l4 int) uint64 {
	if t.k == nil || l4 != ipv4MinHdrLen || len(pkt) < PrefetchLen {
		return 0
	}
	return t.PrefetchIP((*[PrefetchLen]byte)(pkt))
}

// PrefetchLen is what PrefetchIP reads of a packet: an option-less IPv4
// header and the first four bytes (the ports) of its transport header.
const PrefetchLen = ipv4MinHdrLen + 4

// PrefetchIP is Prefetch for a parsed IPv4 packet with a transport header
// (a TCP or UDP one has at least PrefetchLen bytes from the IP header),
// which it takes to be option-less, the ports at byte 20 (outFast
// translates only those; a header with options gets a hint by its
// options' bytes, a prefetch wasted and a hint that names no session).
func (t *Table) PrefetchIP(h *[PrefetchLen]byte) uint64 {
	proto := h[9]
	addrs := le.Uint64(h[12:])
	if uint32(addrs)&t.src0.mask == t.src0.addr && (proto == protoTCP || proto == protoUDP) { // the common packet: no loop
		v := t.hashWire(addrs, le.Uint32(h[ipv4MinHdrLen:]), proto)
		prefetchSlot(&t.sidx.s[v&t.sidx.mask])
		return uint64(v) | probeSess
	}
	return prefetchRest(t, h)
}

// prefetchRest is PrefetchIP past its first test (a function:
// PrefetchIPv4, in assembly, jumps to it).
func prefetchRest(t *Table, h *[PrefetchLen]byte) uint64 {
	proto := h[9]
	addrs := le.Uint64(h[12:])
	ports := le.Uint32(h[ipv4MinHdrLen:])
	if t.k == nil || proto != protoTCP && proto != protoUDP {
		return 0
	}
	if t.inside(uint32(addrs)) {
		v := t.hashWire(addrs, ports, proto)
		prefetchSlot(&t.sidx.s[v&t.sidx.mask])
		return uint64(v) | probeSess
	}
	if dst := binary.BigEndian.Uint32(h[16:]); t.k.outsideIndex(dst) >= 0 {
		v := hashO(okey{dst, bits.ReverseBytes16(uint16(ports >> 16)), proto})
		prefetchSlot(&t.oidx.s[v&t.oidx.mask])
		return uint64(v) | probeMap
	}
	return 0
}

// inside reports whether src (wire order) is in a rule's source prefixes.
func (t *Table) inside(src uint32) bool {
	for _, p := range t.srcs {
		if src&p.mask == p.addr {
			return true
		}
	}
	return false
}

// Touch finds each probe's record by the hash tags in its (loaded) index
// slots, reads the record and leaves its id + 1 in hs (kind kept,
// probeDone set). A tag match whose record turns out to hold another key
// is checked by the translation, which then looks again.
func (t *Table) Touch(hs []uint64) {
	maps := len(hs)
	if len(t.sidx.s) != 0 && len(t.sess) != 0 {
		maps = touchSessions(t.sidx.s, t.sidx.mask, t.sess, hs)
	}
	if maps == 0 {
		return
	}
	var sink uint32
	for i, h := range hs {
		switch {
		case h&probeDone != 0:
		case h&probeSess != 0: // no session table
			hs[i] = probeSess | probeDone
		case h&probeMap != 0:
			id := t.oidx.tagged(uint32(h))
			if id != 0 && int(id) <= len(t.maps) {
				sink += t.maps[id-1].refs
			}
			hs[i] = uint64(id) | probeMap | probeDone
		}
	}
	t.sink += sink
}

// touchSessionsGo is touchSessions' definition (and its body where there
// is no assembly version), without the prefetches. len(idx) is mask+1.
func touchSessionsGo(idx []uint64, mask uint32, sess []session, hs []uint64) (maps int) {
	for i, h := range hs {
		switch {
		case h&probeSess != 0:
			hs[i] = uint64(tagged(idx, mask, uint32(h))) | probeSess | probeDone
		case h&probeMap != 0:
			maps++
		}
	}
	return maps
}

// tagged returns the id + 1 of the first record with hash h, or 0.
func (x *index) tagged(h uint32) uint32 { return tagged(x.s, x.mask, h) }

func tagged(s []uint64, mask, h uint32) uint32 {
	for i := h & mask; ; i = (i + 1) & mask {
		v := s[i]
		if v == 0 {
			return 0
		}
		if uint32(v>>32) == h {
			return uint32(v)
		}
	}
}
