package control

import "time"

// outMsg is one reliable control message awaiting acknowledgement.
type outMsg struct {
	id         uint32
	op         uint8
	payload    []byte
	sent       bool
	deadline   time.Time     // next retransmission
	timeout    time.Duration // current backoff
	higherAcks int           // acks seen for later ids since the last send
}

// reliable is the per-key reliability layer (reliable.c, reliable.h): a send
// window of 6 unacked messages with exponential-backoff retransmission and
// fast retransmit, and a 12-slot receive window delivering payloads in
// msg-id order. It is not safe for concurrent use; the session lock
// guards it.
type reliable struct {
	rto      time.Duration // initial retransmit timeout; 0 means tls-timeout
	sendNext uint32
	out      []*outMsg // unacked, in id order

	recvNext uint32
	recvBuf  [reliableRecvWindow][]byte
	recvHave [reliableRecvWindow]bool
	acks     []uint32 // ids to acknowledge
}

// queue appends a message to the send queue and returns its msg-id.
func (r *reliable) queue(op uint8, payload []byte) uint32 {
	id := r.sendNext
	r.sendNext++
	rto := r.rto
	if rto == 0 {
		rto = initialRetransmit
	}
	r.out = append(r.out, &outMsg{id: id, op: op, payload: payload, timeout: rto})
	return id
}

// acked removes every message p acknowledges; messages with lower ids
// than an acked one count towards fast retransmit.
func (r *reliable) acked(p *packet) {
	for i := 0; i < p.nAcks; i++ {
		id := p.acks[i]
		for j, m := range r.out {
			if m.id == id {
				r.out = append(r.out[:j], r.out[j+1:]...)
				for _, lower := range r.out[:j] {
					if lower.sent {
						lower.higherAcks++
					}
				}
				break
			}
		}
	}
}

// receive stores a message; it reports false when the id is outside the
// receive window (dropped, not acked). Duplicates are acked again so the
// sender stops retransmitting (ssl.c tls_pre_decrypt, "even if it's a replay").
func (r *reliable) receive(id uint32, payload []byte) bool {
	if id >= r.recvNext+reliableRecvWindow {
		return false
	}
	if id < r.recvNext {
		r.ack(id)
		return true
	}
	slot := id % reliableRecvWindow
	if !r.recvHave[slot] {
		r.recvHave[slot] = true
		r.recvBuf[slot] = append([]byte(nil), payload...)
	}
	r.ack(id)
	return true
}

func (r *reliable) ack(id uint32) {
	for _, a := range r.acks {
		if a == id {
			return
		}
	}
	r.acks = append(r.acks, id)
}

// next pops the next in-order payload, if it has arrived.
func (r *reliable) next() ([]byte, bool) {
	slot := r.recvNext % reliableRecvWindow
	if !r.recvHave[slot] {
		return nil, false
	}
	b := r.recvBuf[slot]
	r.recvHave[slot], r.recvBuf[slot] = false, nil
	r.recvNext++
	return b, true
}

// takeAcks removes up to max pending acks into p.
func (r *reliable) takeAcks(p *packet, max int) {
	n := min(max, len(r.acks))
	p.nAcks = n
	copy(p.acks[:n], r.acks[:n])
	r.acks = r.acks[:copy(r.acks, r.acks[n:])]
}

// due returns the messages to (re)transmit at now: unsent messages inside
// the window, expired ones (with doubled timeout), and fast retransmits.
func (r *reliable) due(now time.Time, into []*outMsg) []*outMsg {
	if len(r.out) == 0 {
		return into
	}
	limit := r.out[0].id + reliableSendWindow
	for _, m := range r.out {
		if m.id >= limit {
			break
		}
		switch {
		case !m.sent:
			m.sent = true
		case m.higherAcks >= fastRetransmitAcks:
		case !now.Before(m.deadline):
			m.timeout = min(2*m.timeout, maxRetransmit)
		default:
			continue
		}
		m.higherAcks = 0
		m.deadline = now.Add(m.timeout)
		into = append(into, m)
	}
	return into
}

// pending reports whether messages are unacknowledged.
func (r *reliable) pending() bool { return len(r.out) > 0 }
