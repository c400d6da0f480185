package control

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

func ackOf(ids ...uint32) *packet {
	p := &packet{nAcks: len(ids)}
	copy(p.acks[:], ids)
	return p
}

func TestReliableSendWindowAndBackoff(t *testing.T) {
	var r reliable
	for i := 0; i < 10; i++ {
		r.queue(opControlV1, []byte{byte(i)})
	}
	now := testTime
	due := r.due(now, nil)
	if len(due) != reliableSendWindow || due[0].id != 0 || due[5].id != 5 {
		t.Fatalf("first send: %d messages", len(due))
	}
	if len(r.due(now.Add(time.Second), nil)) != 0 {
		t.Fatal("retransmitted before tls-timeout")
	}
	// After 2 s everything is resent, and the next timeout is 4 s.
	if got := r.due(now.Add(initialRetransmit), nil); len(got) != 6 {
		t.Fatalf("retransmit: %d", len(got))
	}
	if got := r.due(now.Add(initialRetransmit+3*time.Second), nil); len(got) != 0 {
		t.Fatal("backoff did not double")
	}
	if got := r.due(now.Add(initialRetransmit+4*time.Second), nil); len(got) != 6 {
		t.Fatalf("second retransmit: %d", len(got))
	}
	// Acking 0 and 1 opens the window for 6 and 7 only.
	r.acked(ackOf(0, 1))
	got := r.due(now.Add(initialRetransmit+4*time.Second), nil)
	if len(got) != 2 || got[0].id != 6 || got[1].id != 7 {
		t.Fatalf("window after ack: %v", ids(got))
	}
	// Three acks for higher ids fast-retransmit the hole (2).
	r.acked(ackOf(3))
	r.acked(ackOf(4))
	r.acked(ackOf(5))
	got = r.due(now.Add(initialRetransmit+4*time.Second+time.Millisecond), nil)
	if len(got) != 1 || got[0].id != 2 {
		t.Fatalf("fast retransmit: %v", ids(got))
	}
}

func ids(ms []*outMsg) []uint32 {
	var out []uint32
	for _, m := range ms {
		out = append(out, m.id)
	}
	return out
}

func TestReliableReceiveWindow(t *testing.T) {
	var r reliable
	if r.receive(reliableRecvWindow, []byte("far")) {
		t.Fatal("accepted a message beyond the receive window")
	}
	if len(r.acks) != 0 {
		t.Fatal("acked a message it dropped")
	}
	r.receive(1, []byte("b"))
	if _, ok := r.next(); ok {
		t.Fatal("delivered out of order")
	}
	r.receive(0, []byte("a"))
	r.receive(0, []byte("a")) // duplicate: acked again, delivered once
	var got string
	for b, ok := r.next(); ok; b, ok = r.next() {
		got += string(b)
	}
	if got != "ab" {
		t.Fatalf("delivered %q", got)
	}
	r.acks = nil
	if !r.receive(0, []byte("a")) || len(r.acks) != 1 || r.acks[0] != 0 {
		t.Fatal("old duplicate not re-acked")
	}
	var p packet
	r.acks = []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	r.takeAcks(&p, maxAcksPiggyback)
	if p.nAcks != 4 || len(r.acks) != 6 || r.acks[0] != 5 {
		t.Fatalf("takeAcks: %d taken, %v left", p.nAcks, r.acks)
	}
}

// Two reliable endpoints exchanging a byte stream over a channel that
// drops, duplicates and reorders: the receiver gets the exact stream.
func TestReliableStreamUnderLoss(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			var tx, rx reliable
			var want, got []byte
			for i := 0; i < 100; i++ {
				b := []byte(fmt.Sprintf("message %d;", i))
				want = append(want, b...)
				tx.queue(opControlV1, b)
			}
			type dgram struct {
				id      uint32
				payload []byte
			}
			now := testTime
			for step := 0; step < 10000 && len(got) < len(want); step++ {
				now = now.Add(50 * time.Millisecond)
				var wire []dgram
				for _, m := range tx.due(now, nil) {
					if rng.Float64() < 0.3 {
						continue // lost
					}
					wire = append(wire, dgram{m.id, m.payload})
					if rng.Float64() < 0.1 {
						wire = append(wire, dgram{m.id, m.payload})
					}
				}
				rng.Shuffle(len(wire), func(i, j int) { wire[i], wire[j] = wire[j], wire[i] })
				for _, d := range wire {
					rx.receive(d.id, d.payload)
				}
				for b, ok := rx.next(); ok; b, ok = rx.next() {
					got = append(got, b...)
				}
				for len(rx.acks) > 0 {
					var p packet
					rx.takeAcks(&p, maxAcksPerAck)
					if rng.Float64() < 0.3 {
						continue // ack lost
					}
					tx.acked(&p)
				}
			}
			if string(got) != string(want) {
				t.Fatalf("stream mismatch: got %d bytes, want %d", len(got), len(want))
			}
		})
	}
}
