package fwd

// Glean protection. A packet to an unresolved address in a connected
// subnet makes the router ask for it and hold the packet ("glean"); a
// sender looping over a /64 turns that into a solicitation flood and fills
// the hold table with addresses nobody will answer for. So:
//   - each sender (input port and source address, hashed into buckets)
//     and each input port has a token bucket of new questions (Limits'
//     GleanSourceRate/Burst: a host legitimately talks to a few new
//     neighbours at a time, a scanner to thousands; GleanPortRate/Burst
//     against a flood with spoofed sources); a packet that would start one
//     without a token is dropped as glean_limited;
//   - a new question always gets a hold slot, taking the oldest one's when
//     none is free (holdPacket), so held packets are dropped before
//     resolution stops;
//   - what was asked is remembered apart from the hold table (askedFor),
//     so an answer makes the entry even after its slot was taken.
const (
	gleanBuckets = 256 // per worker; a hash collision only shares a budget

	askedSlots = 4096 // remembered questions, engine-wide (a power of two)
)

type tokenBucket struct {
	tokens int64 // nano-tokens
	last   int64
}

// take refills the bucket to now at rate per second up to burst and takes
// one token if there is one.
func (b *tokenBucket) take(now int64, rate, burst int64) bool {
	if b.last == 0 {
		b.tokens, b.last = burst*1e9, now
	}
	if d := now - b.last; d > 0 {
		// d*rate would overflow after hours idle at a high rate: a bucket
		// idle long enough to fill is full.
		if full := burst * 1e9; d >= full/max(rate, 1) {
			b.tokens = full
		} else {
			b.tokens = min(b.tokens+d*rate, full)
		}
		b.last = now
	}
	if b.tokens < 1e9 {
		return false
	}
	b.tokens -= 1e9
	return true
}

type gleanState struct {
	sources [gleanBuckets]tokenBucket
	ports   []tokenBucket // per input port
}

// gleanBudget takes a token from p's sender and its input port. Packets
// ovfwd sends itself (tunnel traffic to the peers' real addresses, which
// all share the server's source; replies; errors) are not limited per
// sender — a thousand peers behind one LAN would take 20 s to resolve at
// one sender's rate — only per input port.
func (w *Worker) gleanBudget(t *tables, p *Packet) bool {
	l3 := p.Data()[p.L3Off:]
	var src []byte
	if p.Flags&FlagIPv4 != 0 {
		src = l3[12:16]
	} else {
		src = l3[8:24]
	}
	var a [16]byte
	copy(a[:], src)
	h := neighHash(p.InPort, &a)
	g := &w.glean
	l := &w.lim
	if !w.fromUs(t, p) && !g.sources[h%gleanBuckets].take(w.now, int64(l.GleanSourceRate), int64(l.GleanSourceBurst)) {
		return false
	}
	return int(p.InPort) >= len(g.ports) || g.ports[p.InPort].take(w.now, int64(l.GleanPortRate), int64(l.GleanPortBurst))
}

// The engine remembers questions in askedSlots words shared by the
// workers (an answer may arrive on another queue than the question left
// from): the slot is chosen by the key's hash, the word holds the time of
// the question in ms (low 40 bits) and 24 more bits of the hash. A
// collision forgets a question or, 1 in 2^24, takes an answer for asked.
func askedWord(port uint16, key *[16]byte) (slot int, tag uint64) {
	h := neighHash(port, key)
	return int(h & (askedSlots - 1)), h >> 40 << 40
}

// noteAsked records a question (broadcast, or a unicast probe) for key on port.
func (w *Worker) noteAsked(port uint16, key *[16]byte) {
	slot, tag := askedWord(port, key)
	w.e.asked[slot].Store(tag | uint64(w.now/1e6)&(1<<40-1))
}

// askedFor reports whether anyone asked for key on port within the last
// resolution attempt's span (NeighProbes × NeighRetrans).
func (w *Worker) askedFor(port uint16, key *[16]byte) bool {
	slot, tag := askedWord(port, key)
	v := w.e.asked[slot].Load()
	if v == 0 || v>>40<<40 != tag {
		return false
	}
	age := (uint64(w.now/1e6) - v) & (1<<40 - 1) // ms, modulo the 40-bit clock
	return age <= uint64(int64(w.lim.NeighRetrans)*int64(w.lim.NeighProbes)/1e6)
}
