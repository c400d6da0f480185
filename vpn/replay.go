package vpn

// ReplayWindow is an RFC 6479 anti-replay window over 32-bit packet-ids: a
// ring of 64-bit bitmap blocks, one more than the window needs, so sliding
// forward clears whole blocks instead of shifting bits.
//
// A ReplayWindow is not safe for concurrent use; the peer's key slot
// serialises access (slotKey.checkReplay). Call Check only after the packet has
// authenticated, so forged packets can never move the window.
type ReplayWindow struct {
	top    uint64 // highest packet-id accepted; 0 before the first
	size   uint64 // packets behind top that may still arrive
	mask   uint64 // len(blocks)-1
	blocks []uint64
}

// DefaultReplayWindow is the window size used when the config gives none
// (the Linux ovpn module uses 2048 too).
const DefaultReplayWindow = 2048

// ReplayResult is the verdict of ReplayWindow.Check.
type ReplayResult uint8

const (
	ReplayOK        ReplayResult = iota // new: accepted and recorded
	ReplayDuplicate                     // seen before
	ReplayTooOld                        // behind the window
)

// NewReplayWindow makes a window that accepts packets up to size-1 behind
// the highest seen (size ≤ 0 selects DefaultReplayWindow). size is rounded
// up to a multiple of 64.
func NewReplayWindow(size int) *ReplayWindow {
	w := &ReplayWindow{}
	w.init(size)
	return w
}

func (w *ReplayWindow) init(size int) {
	if size <= 0 {
		size = DefaultReplayWindow
	}
	words := (size + 63) / 64
	n := 1
	for n < words+1 { // one spare block, and a power of two for the index mask
		n <<= 1
	}
	w.size = uint64(words) * 64
	w.mask = uint64(n - 1)
	w.blocks = make([]uint64, n)
	w.top = 0
}

// Size is the number of packet-ids the window covers.
func (w *ReplayWindow) Size() int { return int(w.size) }

// Top is the highest packet-id accepted so far.
func (w *ReplayWindow) Top() uint32 { return uint32(w.top) }

// Check decides whether packet-id id is new and records it if so.
// id 0 never reaches here (Open rejects it).
func (w *ReplayWindow) Check(id uint32) ReplayResult {
	seq := uint64(id)
	// In order within top's block, the common case: no block to clear, and
	// no bit above top is ever set.
	if seq > w.top && seq>>6 == w.top>>6 {
		w.top = seq
		w.blocks[(seq>>6)&w.mask] |= uint64(1) << (seq & 63)
		return ReplayOK
	}
	return w.check(seq)
}

func (w *ReplayWindow) check(seq uint64) ReplayResult {
	if seq > w.top {
		cur, next := w.top>>6, seq>>6
		steps := next - cur
		if steps > w.mask+1 {
			steps = w.mask + 1 // a far jump: every block is stale
		}
		for i := uint64(1); i <= steps; i++ {
			w.blocks[(cur+i)&w.mask] = 0
		}
		w.top = seq
	} else if w.top-seq >= w.size {
		return ReplayTooOld
	}
	block, bit := &w.blocks[(seq>>6)&w.mask], uint64(1)<<(seq&63)
	if *block&bit != 0 {
		return ReplayDuplicate
	}
	*block |= bit
	return ReplayOK
}
