package nat

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync/atomic"
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
	DropClientLimit                // the client or the mapping holds its most sessions (Config.MaxSessionsPer*)
	numVerdicts
)

var verdictNames = [numVerdicts]string{"pass", "done", "handoff", "no_port", "table_full", "no_session",
	"frag_no_state", "unsupported", "malformed", "client_limit"}

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
	sess   uint32               // its sessions (Config.MaxSessionsPerClient)
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
	cReleased   // sessions ended because their client left (ReleaseClients)
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
	SessionsReleased                     uint64 // ended because their client left
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
	s.SessionsReleased += o.SessionsReleased
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
		BlocksAllocated: g(cBlocksAlloc), BlocksReleased: g(cBlocksFree), EventsLost: g(cEventsLost), SessionsReleased: g(cReleased),
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

// Excluded is the outside port the table never maps (Config.Exclude); an
// active table only.
func (t *Table) Excluded() uint16 { return t.k.cfg.Exclude }

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
