//go:build mlx5lab

package dp

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
)

// FuzzPlainEqualsGeneral: the inline decoder for plain receive CQEs
// (pollPlain) and the general one (decodeOne) give the same packets,
// counters, consumer index and WQE accounting for any ring contents; the
// inline loop must stop, consuming nothing, at every CQE it does not handle.
// The general-only path is a Lab variant: go test -tags mlx5lab.
func FuzzPlainEqualsGeneral(f *testing.F) {
	f.Add(uint64(1), uint8(0))
	f.Add(uint64(2), uint8(3))
	f.Add(uint64(3), uint8(255))
	f.Fuzz(func(t *testing.T, seed uint64, bad uint8) {
		r := rand.New(rand.NewPCG(seed, uint64(bad)))
		ring := make([]byte, 64*CQESize)
		invalidate(ring)
		// Mostly good completions in stride order, with a few of every
		// kind the inline loop must leave to the general decoder.
		wqe, stride := uint16(0), uint16(0)
		for i := 0; i < 64; i++ {
			l := uint32(14 + r.IntN(1500))
			op := uint8(CQERespSend << 4)
			bc := 1<<16 | l
			w := wqe
			switch x := r.IntN(256); {
			case x < int(bad)/8:
				bc = 1<<16 | uint32(r.IntN(14)) // runt
			case x < int(bad)/4:
				bc = MPWRQFillerFlag | uint32(8-stride)<<16 // filler to the WQE end
			case x < int(bad)/3:
				op = CQERespErr << 4
			case x < int(bad)/2:
				w = uint16(r.IntN(8)) // a WQE out of order or out of range
			case x < int(bad):
				bc = 1<<16 | 1600 // above the frame limit
			}
			putCQE(ring[i*CQESize:], op, w, stride, bc)
			if bc&MPWRQFillerFlag != 0 || stride == 7 {
				wqe, stride = (wqe+1)%4, 0
			} else {
				stride++
			}
			if r.IntN(64) == 0 {
				break // the rest stays invalid: the poll stops there
			}
		}
		run := func(general bool) ([]fwd.Packet, RxStats, uint32, []wqeRec) {
			q, qring := fuzzQueue(t, false, false, 0)
			if err := q.SetLab(Lab{GeneralDecoder: general}); err != nil {
				t.Fatal(err)
			}
			copy(qring, ring)
			var pkts []fwd.Packet
			b := fwd.NewBatch(1 + int(seed%64))
			for round := 0; round < 80; round++ {
				b.Reset()
				q.Rx(b)
				pkts = append(pkts, b.Pkts...)
			}
			return pkts, q.Stats, q.cq.cc, append([]wqeRec(nil), q.pool.recs...)
		}
		pa, sa, ca, ra := run(false)
		pb, sb, cb, rb := run(true)
		if seed == 1 && bad == 0 && len(pa) < 10 {
			t.Fatalf("seed ring delivered %d packets: the comparison is vacuous", len(pa))
		}
		if len(pa) != len(pb) || ca != cb || !reflect.DeepEqual(ra, rb) {
			t.Fatalf("inline: %d packets, consumer %d, recs %v; general: %d, %d, %v", len(pa), ca, ra, len(pb), cb, rb)
		}
		sa.PrefetchExact, sb.PrefetchExact = 0, 0 // the head prefetch groups differ
		sa.PrefetchL2, sb.PrefetchL2 = 0, 0
		if sa != sb {
			t.Fatalf("counters: inline %+v, general %+v", sa, sb)
		}
		for i := range pa {
			a, b := pa[i], pb[i]
			if a.Handle != b.Handle || a.Off != b.Off || a.Len != b.Len || a.Flags != b.Flags || a.L3Off != b.L3Off ||
				a.L4Off != b.L4Off || a.VLAN != b.VLAN || len(a.Buf) != len(b.Buf) {
				t.Fatalf("packet %d: inline %+v, general %+v", i, a, b)
			}
		}
	})
}
