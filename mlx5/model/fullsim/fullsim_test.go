package fullsim

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// TestToeplitzVerificationSuite checks the RSS hash against Microsoft's
// published verification values (the DefaultRSSKey): 66.9.149.187:2794 →
// 161.142.100.80:1766 hashes to 0x323e8fc2 over addresses and 0x51ccc178
// with ports.
func TestToeplitzVerificationSuite(t *testing.T) {
	var key [prm.ToeplitzKeySize + 8]byte
	copy(key[:], mlx5.DefaultRSSKey[:])
	addrs := []byte{66, 9, 149, 187, 161, 142, 100, 80}
	if h := toeplitz(&key, addrs); h != 0x323e8fc2 {
		t.Fatalf("IPv4 hash %#x, want 0x323e8fc2", h)
	}
	if h := toeplitz(&key, append(addrs, 0x0a, 0xea, 0x06, 0xe6)); h != 0x51ccc178 {
		t.Fatalf("IPv4/TCP hash %#x, want 0x51ccc178", h)
	}
}

// TestFullStackRoundTrip: bring-up on the joined model, a 2-queue forwarding
// port through the command interface, frames of random sizes injected at the
// wire are steered by the flow table and RSS over both queues, received
// byte-exact on the queue Toeplitz picks, sent back, and delivered by the
// model byte-exact and in order per queue; after Close the model holds no
// object, page or mapping. Twice in one process.
func TestFullStackRoundTrip(t *testing.T) {
	for run := 0; run < 2; run++ {
		roundTrip(t, uint64(run))
	}
}

func roundTrip(t *testing.T, seed uint64) {
	dev, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := dev.OpenPort(mlx5.FwdPortConfig{Name: "m0", Queues: 2, PoolID: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rq := p.Objects.RQs[0]; rq.WQType != prm.WQTypeCyclicStridingRQ {
		t.Fatalf("bring-up created wq_type %d", rq.WQType)
	}
	sinks := []*capture{{}, {}}
	for q, c := range sinks {
		dev.SetSink(q, c.sink)
	}
	r := rand.New(rand.NewPCG(seed, 42))
	b := fwd.NewBatch(fwd.MaxBatch)
	var seq uint32
	perQueue := [2]int{}
	for round := 0; round < 250; round++ {
		n := 1 + r.IntN(200)
		want := [2][][]byte{}
		var frames [][]byte
		for i := 0; i < n; i++ {
			f := udpFrame(r, 60+r.IntN(1514-60+1), seq)
			seq++
			frames = append(frames, f)
			q := expectedQueue(f, 2)
			want[q] = append(want[q], f)
		}
		dev.InjectBatch(frames)
		for q := 0; q < 2; q++ {
			got := drain(t, p, q, b)
			if len(got) != len(want[q]) {
				t.Fatalf("round %d queue %d: received %d frames, want %d (model %+v, device %+v)",
					round, q, len(got), len(want[q]), dev.RxStats(q), dev.Stats)
			}
			for i := range got {
				if !bytes.Equal(got[i], want[q][i]) {
					t.Fatalf("round %d queue %d frame %d: got %s, want %s", round, q, i, describe(got[i]), describe(want[q][i]))
				}
			}
			before := len(sinks[q].frames)
			if sent := p.Tx(q, b); sent != len(got) {
				t.Fatalf("round %d queue %d: sent %d of %d", round, q, sent, len(got))
			}
			out := sinks[q].frames[before:]
			if len(out) != len(got) {
				t.Fatalf("round %d queue %d: model delivered %d of %d", round, q, len(out), len(got))
			}
			for i := range out {
				if !bytes.Equal(out[i], got[i]) {
					t.Fatalf("round %d queue %d: delivered %s, sent %s", round, q, describe(out[i]), describe(got[i]))
				}
			}
			perQueue[q] += len(got)
		}
	}
	if perQueue[0] == 0 || perQueue[1] == 0 {
		t.Fatalf("RSS did not spread: %v", perQueue)
	}
	if err := dev.Err(); err != nil {
		t.Fatal(err)
	}
	// Both RX rings (16 WQEs of 64 strides) and SQs (1024 WQEBBs) must have
	// wrapped several times.
	for q := 0; q < 2; q++ {
		if rp := p.Queue(q).RX.Pool().Reposted; rp < 4*16 {
			t.Fatalf("queue %d: RX ring reposted only %d WQEs", q, rp)
		}
		if bb := dev.TxStats(q).WQEBBs; bb < 2*1024 {
			t.Fatalf("queue %d: SQ consumed only %d WQEBBs", q, bb)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if objs := dev.Model().Objects(); len(objs) != 2 {
		t.Fatalf("after the port closed the model holds %v; want only the HCA's UAR and EQ", objs)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	checkEmpty(t, dev)
}

// TestRSSAndSteeringFollowTheTables: non-IP frames go to the catch-all TIR
// (queue 0); frames for another MAC are filtered by the vport (the port is
// not promiscuous); frames above the vport MTU are dropped by the engine.
func TestRSSAndSteeringFollowTheTables(t *testing.T) {
	dev, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	p, err := dev.OpenPort(mlx5.FwdPortConfig{Queues: 2, PoolID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := rand.New(rand.NewPCG(1, 2))
	b := fwd.NewBatch(64)

	arp := udpFrame(r, 60, 0)
	arp[12], arp[13] = 0x08, 0x06
	for i := 0; i < 8; i++ {
		dev.Inject(arp)
	}
	if n := p.Rx(1, b); n != 0 {
		t.Fatalf("non-IP frame on queue 1")
	}
	if n := p.Rx(0, b); n != 8 {
		t.Fatalf("catch-all delivered %d of 8 to queue 0", n)
	}
	p.Free(0, b)

	other := udpFrame(r, 100, 1)
	other[5] ^= 0x40
	dev.Inject(other)
	if dev.Stats.Filtered != 1 {
		t.Fatalf("foreign unicast not filtered: %+v", dev.Stats)
	}
	big := udpFrame(r, 1500+prm.HWMTUOverhead+1, 2) // one byte above the vport's HW MTU
	dev.Inject(big)
	q := expectedQueue(big, 2)
	if dev.RxStats(q).TooBig != 1 {
		t.Fatalf("oversize frame not dropped: %+v", dev.RxStats(q))
	}
}

// TestUnmappedLKeyFailsLoudly: a data path that posts a send with an lkey the
// driver never created, or a buffer IOVA it never mapped, gets an error CQE,
// the frame is not delivered, and the model reports why.
func TestUnmappedLKeyFailsLoudly(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		q          int
	}{{"lkey", "lkey", 0}, {"iova", "not mapped", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			dev, err := Open(Config{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := dev.OpenPort(mlx5.FwdPortConfig{Queues: 2, PoolID: 1})
			if err != nil {
				t.Fatal(err)
			}
			var c capture
			dev.SetSink(tc.q, c.sink)
			o := p.Objects
			sq, txcq := o.SQs[tc.q], o.TXCQs[tc.q]
			rx := p.Queue(tc.q).RX
			lkey := sq.LKey
			if tc.name == "lkey" {
				lkey ^= 0x5500 // an mkey index never created
			} else {
				// A pool whose window the device sees at an IOVA nobody mapped.
				ring := make([]byte, 16*dp.RxWQESize)
				pages := make([][]byte, 0)
				for i := 0; i < 520; i++ {
					pages = append(pages, make([]byte, dp.PageSize))
				}
				rx, err = dp.NewRxQueue(&dp.CQMem{Ring: make([]byte, 64<<10), LogSize: 10, DBRec: make([]byte, 8)},
					&dp.RQMem{WQType: dp.WQTypeCyclicStride, Ring: ring, LogWQEs: 4, LogStrides: 6, LogStrideSize: 11,
						DBRec: make([]byte, 8), LKey: lkey, IOVA: 0x7ff0_0000_0000, Pages: pages, Spare: 8}, 1, dp.RxOptions{})
				if err != nil {
					t.Fatal(err)
				}
			}
			cqDBR := txcq.DBRec[:8]
			tx, err := dp.NewTxQueue(&dp.SQMem{SQN: sq.SQN, Ring: sq.Ring, LogWQEBBs: sq.LogWQEBBs, DBRec: sq.DBRec,
				LKey: lkey, MMIO: &mmio{dev}, Doorbell: sq.Doorbell, EnhancedMPW: sq.EnhancedMPW},
				&dp.CQMem{CQN: txcq.CQN, Ring: txcq.Ring, LogSize: txcq.LogSize, DBRec: cqDBR}, rx.Pool(), dp.TxOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// A one-queue driver port over the rogue TX queue, to lend a buffer.
			rogue, err := dp.NewPort(fwd.PortInfo{Name: "rogue"}, []dp.Queue{{RX: rx, TX: tx}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			b := fwd.NewBatch(4)
			if rogue.Alloc(0, b, 1) != 1 {
				t.Fatal("no spare buffer")
			}
			f := udpFrame(rand.New(rand.NewPCG(3, 4)), 200, 7)
			pk := &b.Pkts[0]
			copy(pk.Buf[pk.Off:], f)
			pk.Len = uint16(len(f))
			if rogue.Tx(0, b) != 1 {
				t.Fatal("the data path refused to post")
			}
			if len(c.frames) != 0 {
				t.Fatal("the model delivered a frame from memory it may not read")
			}
			err = dev.Err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("model error %v, want one mentioning %q", err, tc.want)
			}
			tx.Reap()
			if tx.Stats.ErrCQEs == 0 {
				t.Fatalf("driver saw no error completion: %+v", tx.Stats)
			}
			p.Close()
			dev.Close()
		})
	}
	t.Run("rx-lkey", func(t *testing.T) {
		dev, err := Open(Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		p, err := dev.OpenPort(mlx5.FwdPortConfig{Queues: 2, PoolID: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		// Every posted WQE of queue 0 now names an mkey nobody created.
		rq := p.Objects.RQs[0]
		for w := 0; w < 1<<rq.LogWQEs; w++ {
			rq.Ring[w*dp.RxWQESize+dp.RxWQEOffLKey] ^= 0x55
		}
		arp := udpFrame(rand.New(rand.NewPCG(1, 1)), 60, 0)
		arp[12], arp[13] = 0x08, 0x06 // catch-all: queue 0
		dev.Inject(arp)
		b := fwd.NewBatch(4)
		if p.Rx(0, b) != 0 {
			t.Fatal("frame written through an invalid lkey")
		}
		if err := dev.Err(); err == nil || !strings.Contains(err.Error(), "invalid lkey") {
			t.Fatalf("model error %v", err)
		}
	})
}
