package control

import (
	"crypto/rand"
	"time"
)

// msgRestartNext is RESTART with the N flag: the client reconnects and
// moves on to its next --remote even after a completed connection, which
// otherwise makes it retry the same server (openvpn push.c
// server_pushed_signal; init.c initialization_sequence_completed sets
// no_advance).
const msgRestartNext = msgRestart + ",[N]"

// SetDraining turns drain on or off. While on, a new client is not
// admitted: once its TLS handshake and key method 2 are through (so a
// stock client takes control messages) it is told RESTART,[N] and goes to
// its next remote; established clients are left alone.
func (s *Server) SetDraining(on bool) { s.draining.Store(on) }

// refuseDraining answers a new client's key method 2 with ours, so its
// key state becomes active, then RESTART,[N] instead of admitting it: no
// peer id, address or data-plane peer is spent on it.
func (s *session) refuseDraining(ks *keyState) {
	skm := keyMethod2{options: serverOptionsString}
	_, _ = rand.Read(skm.random1[:])
	_, _ = rand.Read(skm.random2[:])
	if _, err := ks.tls.Write(skm.marshal(false)); err != nil {
		s.fail(ks, "writing key method 2: "+err.Error())
		return
	}
	s.srv.drops.add(DropDraining) // counted before the client can act on it
	s.srv.logf("control: %s: draining; told the client to reconnect elsewhere", s.remote())
	_, _ = ks.tls.Write(append([]byte(msgRestartNext), 0))
	s.mu.Lock()
	s.exitAt = time.Now().Add(5 * time.Second) // let the reliable layer deliver it
	s.mu.Unlock()
}

// EvictAll tells every established client to reconnect elsewhere
// (RESTART,[N]), waits up to 2 s for the notices to be acknowledged, and
// removes their sessions; it is the end of a drain.
func (s *Server) EvictAll() int {
	s.mu.Lock()
	all := make([]*session, 0, len(s.byPeer))
	for _, sess := range s.byPeer {
		all = append(all, sess)
	}
	s.mu.Unlock()
	deliverText(all, msgRestartNext, time.Second, 2*time.Second)
	for _, sess := range all {
		s.teardown(sess)
	}
	return len(all)
}
