package vpn

import (
	"math/rand/v2"
	"testing"
)

func TestReplayWindow(t *testing.T) {
	w := NewReplayWindow(2048)
	if w.Size() != 2048 {
		t.Fatalf("size %d", w.Size())
	}
	steps := []struct {
		id   uint32
		want ReplayResult
	}{
		{1, ReplayOK},
		{1, ReplayDuplicate},
		{3, ReplayOK},
		{2, ReplayOK}, // late but in the window
		{2, ReplayDuplicate},
		{3, ReplayDuplicate},
		{2000, ReplayOK},
		{4, ReplayOK},        // 1996 behind: still inside 2048
		{4, ReplayDuplicate}, //
		{2047 + 3, ReplayOK}, // top 2050; 3 is now 2047 behind, still in
		{3, ReplayDuplicate}, // and remembered
		{2051, ReplayOK},     // top 2051: 3 is 2048 behind, out
		{3, ReplayTooOld},    //
		{5, ReplayOK},        // 2046 behind, never seen
		{100000, ReplayOK},   // far jump: clears every block
		{2000, ReplayTooOld}, //
		{99999, ReplayOK},    // just behind the top, after the clear
		{100000, ReplayDuplicate},
		{100000 - 2047, ReplayOK},
		{100000 - 2048, ReplayTooOld},
		{0xFFFFFFFF, ReplayOK}, // the largest id
		{0xFFFFFFFF, ReplayDuplicate},
		{0xFFFFFFFE, ReplayOK},
	}
	for i, s := range steps {
		if got := w.Check(s.id); got != s.want {
			t.Fatalf("step %d: Check(%d) = %d, want %d", i, s.id, got, s.want)
		}
	}
}

// TestReplayWindowBlockWrap walks the window across many wraps of the block
// ring and checks it against a model that remembers every id.
func TestReplayWindowBlockWrap(t *testing.T) {
	for _, size := range []int{64, 100, 2048, 4096} {
		w := NewReplayWindow(size)
		seen := map[uint32]bool{}
		var top uint32
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		for i := 0; i < 50000; i++ {
			var id uint32
			switch r := rng.IntN(10); {
			case r < 6: // mostly forward, small steps
				id = top + uint32(rng.IntN(70))
			case r < 9: // late packets around the window edge
				back := uint32(rng.IntN(w.Size() + 130))
				if back >= top {
					continue
				}
				id = top - back
			default: // jumps of a few blocks
				id = top + uint32(rng.IntN(5*w.Size()))
			}
			if id == 0 {
				continue
			}
			want := ReplayOK
			switch {
			case id <= top && uint64(top-id) >= uint64(w.Size()):
				want = ReplayTooOld
			case seen[id]:
				want = ReplayDuplicate
			}
			if got := w.Check(id); got != want {
				t.Fatalf("size %d step %d: Check(%d) top %d = %d, want %d", size, i, id, top, got, want)
			}
			if want == ReplayOK {
				seen[id] = true
				if id > top {
					top = id
				}
			}
		}
	}
}

func TestReplayWindowDefaultSize(t *testing.T) {
	if got := NewReplayWindow(0).Size(); got != DefaultReplayWindow {
		t.Fatalf("default size %d", got)
	}
	if got := NewReplayWindow(65).Size(); got != 128 {
		t.Fatalf("size 65 rounds to %d, want 128", got)
	}
}
