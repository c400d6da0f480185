package fwd

import "encoding/binary"

// neighWords is a neighbour key ([16]byte, see key4) as two little-endian
// words. The forwarding path builds and compares keys in this form: an
// IPv4 key assembled byte by byte on the stack and then compared 16 bytes
// at a time stalls on store-to-load forwarding, once per packet.
type neighWords struct{ lo, hi uint64 }

func wordsOf(a *[16]byte) neighWords {
	return neighWords{binary.LittleEndian.Uint64(a[0:]), binary.LittleEndian.Uint64(a[8:])}
}

// key4Words is wordsOf(key4(a)): ::ffff:a.
func key4Words(a *[4]byte) neighWords {
	return neighWords{0, 0xffff<<16 | uint64(binary.LittleEndian.Uint32(a[:]))<<32}
}

func (k neighWords) key() (a [16]byte) {
	binary.LittleEndian.PutUint64(a[0:], k.lo)
	binary.LittleEndian.PutUint64(a[8:], k.hi)
	return a
}

// lookupWords is lookup for a key in words.
func (t *neighTable) lookupWords(port uint16, k neighWords) *neighbour {
	h := neighHashWords(port, k.lo, k.hi)
	for {
		e := t.slots[h&t.mask].Load()
		if e == nil || e != neighDeleted && e.port == port && wordsOf(&e.addr) == k {
			return e
		}
		h++
	}
}

// neighCache is a worker's last neighbour lookup: consecutive packets
// mostly go to one next hop. The cached entry stands only while the
// engine's neighGen is the value read before the lookup that filled it:
// every put or remove (in place or by a new table) moves neighGen after it
// changes the table, so a hit never returns an entry removed since. An
// entry's own fields (MAC, expiry) are still read per packet.
type neighCache struct {
	gen  uint64
	port uint16
	k    neighWords
	n    *neighbour // nil: empty
}

// cachedNeigh is w's cached neighbour if it is the one for key k on
// port out, or nil: the hit test, small enough to be inlined where it is
// made per packet; neighbourFor makes the lookup on a miss.
func (w *Worker) cachedNeigh(out uint16, k neighWords) *neighbour {
	c := &w.nc
	if c.k != k || c.port != out || c.gen != w.e.neighGen.Load() {
		return nil
	}
	return c.n
}

// ready returns n's MAC (never 0: neighValid is set) when a packet can go
// to it at once: resolved, confirmed and not due for a refresh probe
// (probeBefore is never negative, so not expired either); otherwise 0,
// and nextHop decides.
func (n *neighbour) ready(now, probeBefore int64) uint64 {
	if mac := n.mac.Load(); mac&neighValid != 0 && n.expires.Load()-now >= probeBefore && n.confirmed.Load() {
		return mac
	}
	return 0
}

// neighbourFor is lookupWords through w's cache. nextHop tests for a hit
// in line (a call costs the spills of all that is live across it) and
// calls this on a miss.
func (w *Worker) neighbourFor(port uint16, k neighWords) *neighbour {
	c := &w.nc
	gen := w.e.neighGen.Load()
	if c.n != nil && c.gen == gen && c.port == port && c.k == k {
		return c.n
	}
	n := w.e.neigh.Load().lookupWords(port, k)
	c.gen, c.port, c.k, c.n = gen, port, k, n
	return n
}
