package vpn

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

// pair is two tunnels facing each other with mirror keys: what one
// encapsulates, the other decapsulates in the same buffer, and back. It runs
// the data path in a loop with no copying and no re-sealing by the test.
type pair struct {
	a, b *Tunnel
	id   uint32
}

func newPair(t testing.TB, c Cipher, comp Comp, queues int) *pair {
	p := &pair{id: 7}
	p.a = NewTunnel(TunnelConfig{Queues: queues, MaxPeers: 16})
	p.b = NewTunnel(TunnelConfig{Queues: queues, MaxPeers: 16})
	// One peer per queue: a peer's one UDP flow lands on one queue.
	for q := 0; q < queues; q++ {
		id := p.id + uint32(q)
		if err := p.a.AddPeer(PeerConfig{ID: id, Remote: cliRemote6, Local: srvLocal6, Comp: comp}); err != nil {
			t.Fatal(err)
		}
		if err := p.b.AddPeer(PeerConfig{ID: id, Remote: srvLocal6, Local: cliRemote6, Comp: comp}); err != nil {
			t.Fatal(err)
		}
		p.installKeys(t, id, c, 0, Primary)
	}
	return p
}

func (p *pair) installKeys(t testing.TB, id uint32, c Cipher, kid uint8, slot Slot) {
	sa, sb := testKeys(c, kid)
	if err := p.a.InstallKey(id, slot, sa); err != nil {
		t.Fatal(err)
	}
	if err := p.b.InstallKey(id, slot, sb); err != nil {
		t.Fatal(err)
	}
}

func (p *pair) v4() *pair {
	_ = p.a.SetRemote(p.id, cliRemote4, srvLocal4)
	_ = p.b.SetRemote(p.id, srvLocal4, cliRemote4)
	return p
}

func (p *pair) batch(n, size int, v6 bool) *fwd.Batch { return p.batchFor(p.id, n, size, v6) }

func (p *pair) batchFor(id uint32, n, size int, v6 bool) *fwd.Batch {
	b := fwd.NewBatch(n)
	for i := 0; i < n; i++ {
		inner := inner4(size)
		if v6 {
			inner = inner6(size)
		}
		pk := innerPacket(id, inner)
		b.Add(&pk)
	}
	return b
}

// roundTrip sends the batch a → b → a on queue q; every packet is encrypted
// twice and decrypted twice in place.
func (p *pair) roundTrip(q int, b *fwd.Batch) {
	p.a.Encap(q, b)
	p.b.Decap(q, b)
	p.b.Encap(q, b)
	p.a.Decap(q, b)
}

func TestPairRoundTripKeepsPayload(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		p := newPair(t, AES256GCM, CompStub, 1)
		if !v6 {
			p.v4()
		}
		b := p.batch(8, 300, v6)
		want := append([]byte(nil), b.Pkts[3].Data()...)
		for i := 0; i < 10; i++ {
			p.roundTrip(0, b)
		}
		for i := range b.Pkts {
			if b.Pkts[i].Verdict != fwd.VerdictForward || !bytes.Equal(b.Pkts[i].Data(), want) || b.Pkts[i].Off != fwd.Headroom {
				t.Fatalf("v6=%v packet %d after 10 round trips: verdict %d off %d, drops a %v b %v", v6, i,
					b.Pkts[i].Verdict, b.Pkts[i].Off, p.a.Stats().Drops, p.b.Stats().Drops)
			}
		}
	}
}

// TestDecapEncapAllocs proves the per-batch data path allocates nothing.
func TestDecapEncapAllocs(t *testing.T) {
	for _, c := range []Cipher{AES128GCM, AES256GCM, ChaCha20Poly1305} {
		for _, comp := range []Comp{CompNone, CompLZO} {
			for _, v6 := range []bool{false, true} {
				p := newPair(t, c, comp, 1)
				if !v6 {
					p.v4()
				}
				b := p.batch(32, 1400, v6)
				allocs := testing.AllocsPerRun(50, func() { p.roundTrip(0, b) })
				if allocs != 0 {
					t.Fatalf("%v comp %d v6 %v: %v allocations per batch", c, comp, v6, allocs)
				}
				if b.Pkts[0].Verdict != fwd.VerdictForward {
					t.Fatalf("%v: packets dropped: %v", c, p.a.Stats().Drops)
				}
			}
		}
	}
}

// TestConcurrentWorkersAndControl runs two workers through the data path
// while the control plane rotates keys, polls and reads stats; run it with
// -race. Both key_ids stay installed in both tunnels around each swap, so
// no packet may fail.
func TestConcurrentWorkersAndControl(t *testing.T) {
	p := newPair(t, AES128GCM, CompNone, 2)
	var wg sync.WaitGroup
	var rounds [2]atomic.Int64
	stop := make(chan struct{})
	for q := 0; q < 2; q++ {
		wg.Add(1)
		go func(q int) {
			defer wg.Done()
			b := p.batchFor(p.id+uint32(q), 16, 200, q == 1)
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p.roundTrip(q, b)
				rounds[q].Add(1)
				for j := range b.Pkts {
					if b.Pkts[j].Verdict != fwd.VerdictForward {
						t.Errorf("queue %d: packet dropped, drops a %v b %v", q, p.a.Stats().Drops, p.b.Stats().Drops)
						return
					}
				}
			}
		}(q)
	}
	deadline := time.After(20 * time.Second)
	kid := uint8(0)
	for i := 0; i < 10; i++ {
		next := kid%7 + 1
		for q := uint32(0); q < 2; q++ {
			p.installKeys(t, p.id+q, AES128GCM, next, Secondary)
			for _, tun := range []*Tunnel{p.a, p.b} {
				if err := tun.SetPrimary(p.id+q, next); err != nil {
					t.Fatal(err)
				}
			}
		}
		kid = next
		p.a.Poll(time.Now(), nil)
		p.b.Stats()
		p.a.PeerStats(p.id)
		// The old key is the lame duck until both workers have finished
		// a round trip begun after the swap (tran-window, in miniature);
		// only then may the next rotation push it out.
		r0, r1 := rounds[0].Load(), rounds[1].Load()
		for rounds[0].Load() < r0+2 || rounds[1].Load() < r1+2 {
			select {
			case <-deadline:
				t.Fatal("timed out")
			case <-time.After(100 * time.Microsecond):
			}
			if t.Failed() {
				break
			}
		}
	}
	close(stop)
	wg.Wait()
}
