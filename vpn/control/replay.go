package control

import "time"

// replayState is the receive side of the long-form packet-id that
// tls-auth and tls-crypt carry (packet_id.c packet_id_test): a 32-bit
// counter and a
// 32-bit unix time. It is per session, not per key.
type replayState struct {
	time     uint32
	highest  uint32
	seen     uint64    // bit i: highest-i was received
	lastHigh time.Time // when highest last advanced
}

// replayID is the 8 wire bytes of a long-form packet-id as one number:
// the counter first, then the time, as packet_id.c packet_id_write puts
// them on the wire.
func replayID(id, t uint32) uint64 { return uint64(id)<<32 | uint64(t) }

// check reports whether id is acceptable and, if so, records it.
func (r *replayState) check(rid uint64, now time.Time) bool {
	id, t := uint32(rid>>32), uint32(rid)
	if id == 0 {
		return false
	}
	switch {
	case r.highest == 0 || t > r.time:
		r.time, r.highest, r.seen, r.lastHigh = t, id, 1, now
		return true
	case t < r.time:
		return false
	}
	if id > r.highest {
		shift := id - r.highest
		if shift >= 64 {
			r.seen = 0
		} else {
			r.seen <<= shift
		}
		r.seen |= 1
		r.highest, r.lastHigh = id, now
		return true
	}
	back := r.highest - id
	if back >= replayWindow || now.Sub(r.lastHigh) > replayBacktrackTime {
		return false
	}
	if r.seen&(1<<back) != 0 {
		return false
	}
	r.seen |= 1 << back
	return true
}

// replaySender produces the long-form ids a sender puts on the wire: time
// fixed at the session's first packet, counter from 1, +1 per packet
// including retransmissions and acks.
type replaySender struct {
	time uint32
	next uint32
}

func (s *replaySender) nextID(now time.Time) uint64 {
	if s.time == 0 {
		s.time, s.next = uint32(now.Unix()), 1
	}
	if s.next == 0 { // wrapped: restart only because time moved on
		s.time, s.next = uint32(now.Unix()), 1
	}
	id := s.next
	s.next++
	return replayID(id, s.time)
}
