package fullsim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// TestPropertyRingWraps drives random configurations (queues, ring sizes,
// strides per WQE, CQE compression off/basic/enhanced, NOP padding or edge
// reuse) through the whole stack — commands, steering, RSS, both engines, the
// data path — over many RX and TX ring wraps, with random frame sizes, burst
// sizes, poll batch sizes and a random share of received frames freed
// instead of sent. Every frame must arrive byte-exact on the queue RSS picks,
// in order; every sent frame must leave the model byte-exact, in order; the
// model must see no error, drop nothing, and hold nothing after Close.
func TestPropertyRingWraps(t *testing.T) {
	seeds := 12
	if testing.Short() {
		seeds = 4
	}
	for seed := uint64(0); seed < uint64(seeds); seed++ {
		r := rand.New(rand.NewPCG(seed, 0xfeed))
		cfg := mlx5.FwdPortConfig{
			Name: "prop", PoolID: 5,
			Queues:     1 + r.IntN(3),
			LogWQEs:    uint8(2 + r.IntN(3)),
			LogStrides: uint8(3 + r.IntN(4)),
			LogSQ:      uint8(6 + r.IntN(3)),
			Tx:         dp.TxOptions{PadToEdge: r.IntN(2) == 0},
		}
		// Every mini-CQE format the data path accepts.
		format := []uint8{prm.MiniCQEHash, prm.MiniCQECsum, prm.MiniCQECsumStridx}[r.IntN(3)]
		switch r.IntN(3) {
		case 1:
			cfg.RXCompression = mlx5.CQECompression{Enabled: true, Layout: prm.CQECompLayoutBasic, MiniFormat: format}
		case 2:
			cfg.RXCompression = mlx5.CQECompression{Enabled: true, Layout: prm.CQECompLayoutEnhanced, MiniFormat: format}
		}
		cfg.StripVLAN = r.IntN(2) == 0
		t.Run(fmt.Sprintf("seed%d/q%d/wqe%d/strides%d/sq%d/comp%v-%d-fmt%d/pad%v/strip%v", seed, cfg.Queues, cfg.LogWQEs,
			cfg.LogStrides, cfg.LogSQ, cfg.RXCompression.Enabled, cfg.RXCompression.Layout, cfg.RXCompression.MiniFormat,
			cfg.Tx.PadToEdge, cfg.StripVLAN), func(t *testing.T) {
			propertyRun(t, r, cfg)
		})
	}
}

func propertyRun(t *testing.T, r *rand.Rand, cfg mlx5.FwdPortConfig) {
	dev, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := dev.OpenPort(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nq := cfg.Queues
	sinks := make([]*capture, nq)
	for q := range sinks {
		sinks[q] = &capture{}
		dev.SetSink(q, sinks[q].sink)
	}
	strides := 1 << (cfg.LogWQEs + cfg.LogStrides)
	nWQE := uint64(1) << cfg.LogWQEs
	// Frames of one round plus the previous round's (held until their TX
	// completions are reaped) must fit one queue's RX window.
	maxBurst := max(1, strides/4)
	var seq uint32
	sent := make([][][]byte, nq)
	received := make([]int, nq)
	for round := 0; round < 4000; round++ {
		done := true
		for q := 0; q < nq; q++ {
			if p.Queue(q).RX.Pool().Reposted < 3*nWQE || dev.TxStats(q).WQEBBs < 2<<cfg.LogSQ {
				done = false
			}
		}
		if done && round > 0 {
			break
		}
		n := 1 + r.IntN(maxBurst)
		want := make([][][]byte, nq)
		frames := make([][]byte, 0, n)
		for i := 0; i < n; i++ {
			size := 60 + r.IntN(1514-60+1)
			if r.IntN(2) == 0 {
				size = 60 + r.IntN(200)
			}
			f := udpFrame(r, size, seq)
			seq++
			q := expectedQueue(f, nq)
			if r.IntN(3) == 0 {
				// Tagged traffic: the driver must find L3 behind the
				// tag whether the device stripped it or not.
				f = tagged(f, uint16(1+r.IntN(4094)))
			}
			frames = append(frames, f)
			want[q] = append(want[q], f)
		}
		// Sometimes one batch, sometimes frame by frame (different CQE
		// compression sessions).
		if r.IntN(2) == 0 {
			dev.InjectBatch(frames)
		} else {
			for _, f := range frames {
				dev.Inject(f)
			}
		}
		for q := 0; q < nq; q++ {
			var got []fwd.Packet
			var data [][]byte
			// Poll batches are often smaller than a compressed session
			// (up to 64 mini-CQEs), which the data path must split.
			b := fwd.NewBatch(1 + r.IntN(fwd.MaxBatch))
			for guard := 0; guard < 10000; guard++ {
				k := p.Rx(q, b)
				if k == 0 {
					break
				}
				for i := range b.Pkts {
					data = append(data, bytes.Clone(b.Pkts[i].Data()))
					if err := checkTagInfo(&b.Pkts[i]); err != nil {
						t.Fatalf("round %d queue %d: %v (%s)", round, q, err, describe(b.Pkts[i].Data()))
					}
				}
				got = append(got, b.Pkts...)
				b.Reset()
			}
			if len(data) != len(want[q]) {
				t.Fatalf("round %d queue %d: received %d, want %d (engine %+v, device %+v)",
					round, q, len(data), len(want[q]), dev.RxStats(q), dev.Stats)
			}
			for i := range data {
				if !bytes.Equal(data[i], want[q][i]) {
					t.Fatalf("round %d queue %d frame %d: got %s, want %s", round, q, i, describe(data[i]), describe(want[q][i]))
				}
			}
			received[q] += len(data)
			// Send or free them in random chunks, in order.
			for len(got) > 0 {
				k := 1 + r.IntN(len(got))
				out := fwd.NewBatch(k)
				out.Pkts = append(out.Pkts, got[:k]...)
				if r.IntN(4) == 0 {
					p.Free(q, out)
				} else {
					for i := 0; i < k; i++ {
						sent[q] = append(sent[q], data[i])
					}
					if s := p.Tx(q, out); s != k {
						t.Fatalf("round %d queue %d: Tx sent %d of %d (%+v)", round, q, s, k, p.Queue(q).TX.Stats)
					}
				}
				got, data = got[k:], data[k:]
			}
		}
		if err := dev.Err(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	for q := 0; q < nq; q++ {
		if len(sinks[q].frames) != len(sent[q]) {
			t.Fatalf("queue %d: model delivered %d of %d", q, len(sinks[q].frames), len(sent[q]))
		}
		for i := range sent[q] {
			if !bytes.Equal(sinks[q].frames[i], sent[q][i]) {
				t.Fatalf("queue %d: delivered #%d %s, sent %s", q, i, describe(sinks[q].frames[i]), describe(sent[q][i]))
			}
		}
		rs := dev.RxStats(q)
		if rs.OutOfBuffer+rs.CQFull+rs.TooBig+rs.Faults != 0 {
			t.Fatalf("queue %d: engine dropped frames: %+v", q, rs)
		}
		if rp := p.Queue(q).RX.Pool().Reposted; rp < 3*nWQE {
			t.Fatalf("queue %d: only %d RX WQEs reposted (ring of %d)", q, rp, nWQE)
		}
		ts := p.Queue(q).TX.Stats
		if ts.WQEBBs < 2<<cfg.LogSQ {
			t.Fatalf("queue %d: SQ wrapped less than twice (%d WQEBBs)", q, ts.WQEBBs)
		}
		if !cfg.Tx.PadToEdge && ts.NOPs != 0 {
			t.Fatalf("queue %d: %d NOPs with edge reuse", q, ts.NOPs)
		}
		if received[q] == 0 {
			t.Fatalf("queue %d received nothing", q)
		}
	}
	if cfg.RXCompression.Enabled {
		comp := uint64(0)
		for q := 0; q < nq; q++ {
			comp += dev.RxStats(q).CompSessions
		}
		if comp == 0 {
			t.Fatal("compression on but the model wrote no compressed session")
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
}

// tagged inserts an 802.1Q tag with VLAN id vid after the MAC addresses.
func tagged(f []byte, vid uint16) []byte {
	t := make([]byte, len(f)+4)
	copy(t, f[:12])
	binary.BigEndian.PutUint16(t[12:], 0x8100)
	binary.BigEndian.PutUint16(t[14:], vid)
	copy(t[16:], f[12:])
	return t
}

// checkTagInfo checks what the driver derived from the CQE and the frame:
// the VLAN flag and id exactly when the frame carries a tag, and L3/L4
// offsets behind it.
func checkTagInfo(p *fwd.Packet) error {
	d := p.Data()
	isTagged := binary.BigEndian.Uint16(d[12:]) == 0x8100
	l3 := uint8(14)
	if isTagged {
		l3 = 18
		if vid := binary.BigEndian.Uint16(d[14:]) & 0xFFF; p.Flags&fwd.FlagVLAN == 0 || p.VLAN != vid {
			return fmt.Errorf("tagged frame (VLAN %d): flags %#x VLAN %d", vid, p.Flags, p.VLAN)
		}
	} else if p.Flags&fwd.FlagVLAN != 0 {
		return fmt.Errorf("untagged frame flagged VLAN %d", p.VLAN)
	}
	if p.Flags&fwd.FlagParsed == 0 || p.L3Off != l3 || p.L4Off != l3+20 || p.Flags&(fwd.FlagIPv4|fwd.FlagUDP) != fwd.FlagIPv4|fwd.FlagUDP {
		return fmt.Errorf("flags %#x L3 %d L4 %d, want IPv4/UDP at %d/%d", p.Flags, p.L3Off, p.L4Off, l3, l3+20)
	}
	return nil
}
