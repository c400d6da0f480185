package control

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/ovfwd/ovfwd/vpn/statickey"
)

// newSession creates the session for a completed three-way handshake,
// replacing old (the same address's previous session) if any.
func (s *Server) newSession(src netip.AddrPort, p *packet, rid uint64, now time.Time, old *session, w *wrapper, v2Key *statickey.Key) *session {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	t := s.live.Load()
	if s.halfOpen >= t.MaxHalfOpen {
		s.mu.Unlock()
		s.drops.add(DropHalfOpen)
		return nil
	}
	source := sourcePrefix(src.Addr())
	// A session this one replaces gives its share back below, after
	// the new one exists; it does not count against it.
	n := s.halfOpenBy[source]
	if old != nil && !old.admitted && !old.removed && old.source == source {
		n--
	}
	if n >= t.MaxHalfOpenPerSource {
		s.mu.Unlock()
		s.drops.add(DropHalfOpenSource)
		return nil
	}
	// Sessions are at most MaxHalfOpen plus the admitted peers, which
	// admit bounds by MaxPeers where the client can be told (AUTH_FAILED).
	sess := newSession(s, src, p.peerSID, p.sid, now, w)
	sess.set, sess.source, sess.v2Key = t, source, v2Key
	s.sessions[src] = sess
	s.halfOpen++
	s.halfOpenBy[source]++
	s.mu.Unlock()
	if old != nil {
		s.logf("control: %s: new session replaces the old one", src)
		s.teardown(old)
	}
	s.logf("control: %s: session created", src)
	sess.start()
	return sess
}

// teardown removes sess: its data-plane peer first, then its peer id and
// addresses, so a reused peer id never meets a stale RemovePeer.
func (s *Server) teardown(sess *session) {
	s.mu.Lock()
	if sess.removed {
		s.mu.Unlock()
		return
	}
	sess.removed = true
	if s.sessions[sess.addr] == sess {
		delete(s.sessions, sess.addr)
	}
	if !sess.admitted {
		s.leaveHalfOpen(sess)
	}
	s.mu.Unlock()

	sess.mu.Lock()
	sess.dead = true
	keys := [2]*keyState{sess.primary, sess.lame}
	if sess.peerAdded {
		_ = s.dp.RemovePeer(sess.peerID)
		sess.peerAdded = false
	}
	hasID, id, v4, v6 := sess.hasPeerID, sess.peerID, sess.vpn4, sess.vpn6
	sess.hasPeerID = false
	sess.mu.Unlock()
	for _, ks := range keys {
		if ks != nil {
			ks.conn.Close()
		}
	}
	if hasID {
		s.release(id, v4, v6)
	}
	s.logf("control: %s: session removed", sess.remote())
}

// leaveHalfOpen takes sess out of the half-open counts. Called with mu
// held.
func (s *Server) leaveHalfOpen(sess *session) {
	s.halfOpen--
	if n := s.halfOpenBy[sess.source] - 1; n > 0 {
		s.halfOpenBy[sess.source] = n
	} else {
		delete(s.halfOpenBy, sess.source)
	}
}

// sourcePrefix is what per-source limits count by: the IPv4 address, or
// the IPv6 /64 (one host usually holds a whole /64, RFC 4291 §2.5.1).
func sourcePrefix(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

// release returns a peer id and its addresses to the pools.
func (s *Server) release(id uint32, v4, v6 netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byPeer, id)
	s.peerIDs.release(id)
	if v4.IsValid() && !s.pool4.Free(v4) {
		delete(s.fixedInUse, v4)
	}
	if v6.IsValid() && !s.pool6.Free(v6) {
		delete(s.fixedInUse, v6)
	}
}

// reserve keeps the fixed addresses of t's clients out of dynamic
// allocation. Called with mu held.
func (s *Server) reserve(t *Tunables) {
	var as4, as6 []netip.Addr
	for _, p := range t.Clients {
		if p.IPv4.IsValid() {
			as4 = append(as4, p.IPv4)
		}
		if p.IPv6.IsValid() {
			as6 = append(as6, p.IPv6)
		}
	}
	if s.pool4 != nil {
		s.pool4.SetReserved(as4)
	}
	if s.pool6 != nil {
		s.pool6.SetReserved(as6)
	}
}

// address picks a client's address from pool: its fixed one, else the
// one it had last (PoolPersist), else any free one. A fixed address held
// by another session of the same name (duplicate_cn) falls back to the
// pool. Called with mu held.
func (s *Server) address(pool *Pool, fixed, last netip.Addr) (a netip.Addr, remembered bool, err error) {
	if pool == nil {
		return a, false, nil
	}
	if fixed.IsValid() {
		// Inside the dynamic range the pool accounts for it; outside it
		// (e.g. below the IPv6 pool's ::1000) the server does.
		if pool.InRange(fixed) {
			if pool.Take(fixed) {
				return fixed, false, nil
			}
		} else if !s.fixedInUse[fixed] {
			s.fixedInUse[fixed] = true
			return fixed, false, nil
		}
	}
	if !fixed.IsValid() && last.IsValid() && !pool.Reserved(last) && pool.Take(last) {
		return last, true, nil
	}
	a, err = pool.Allocate()
	return a, !fixed.IsValid(), err
}

// admit gives an authenticated session with common name cn a peer id and
// tunnel addresses and moves it out of the half-open count.
func (s *Server) admit(sess *session, cn string, cert *x509.Certificate) (id uint32, v4, v6 netip.Addr, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.removed {
		return 0, v4, v6, errors.New("session closed")
	}
	t := s.live.Load()
	var ok bool
	if len(s.byPeer) < t.MaxPeers {
		id, ok = s.peerIDs.alloc()
	}
	if !ok {
		s.drops.add(DropMaxPeers)
		return 0, v4, v6, errors.New("server full (max_peers reached)")
	}
	pol, last := t.Clients[cn], s.leases[cn]
	v4, keep4, err := s.address(s.pool4, pol.IPv4, last.v4)
	if err == nil {
		var keep6 bool
		v6, keep6, err = s.address(s.pool6, pol.IPv6, last.v6)
		if err != nil && v4.IsValid() && !s.pool4.Free(v4) {
			delete(s.fixedInUse, v4)
		}
		if err == nil && s.cfg.PoolPersist != "" && leaseName(cn) && (keep4 || keep6) {
			nl := lease{}
			if keep4 {
				nl.v4 = v4
			}
			if keep6 {
				nl.v6 = v6
			}
			if nl != last {
				s.leases[cn], s.dirty = nl, true
			}
		}
	}
	if err != nil {
		s.peerIDs.release(id)
		return 0, netip.Addr{}, netip.Addr{}, err
	}
	sess.admitted = true
	s.leaveHalfOpen(sess)
	s.byPeer[id] = sess
	sess.mu.Lock()
	sess.commonName, sess.cert = cn, cert
	sess.mu.Unlock()
	return id, v4, v6, nil
}

// readdress gives sess the addresses a client-connect file pushed
// (ifconfig-push, ifconfig-ipv6-push) in place of those admit chose: each
// must be in its pool's subnet and free; the old one is returned after the
// new one is held.
func (s *Server) readdress(sess *session, v4, v6 netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.mu.Lock()
	defer sess.mu.Unlock()
	for _, f := range []struct {
		pool *Pool
		want netip.Addr
		cur  *netip.Addr
	}{{s.pool4, v4, &sess.vpn4}, {s.pool6, v6, &sess.vpn6}} {
		if !f.want.IsValid() || f.want == *f.cur {
			continue
		}
		switch {
		case f.pool == nil || !f.pool.Prefix().Contains(f.want) || f.want == f.pool.ServerAddr():
			return fmt.Errorf("pushed address %s is not in the tunnel subnet", f.want)
		case f.pool.InRange(f.want):
			if !f.pool.Take(f.want) {
				return fmt.Errorf("pushed address %s is in use", f.want)
			}
		case s.fixedInUse[f.want]:
			return fmt.Errorf("pushed address %s is in use", f.want)
		default:
			s.fixedInUse[f.want] = true
		}
		if old := *f.cur; old.IsValid() && !f.pool.Free(old) {
			delete(s.fixedInUse, old)
		}
		*f.cur = f.want
	}
	return nil
}

// sameName lists the admitted sessions with common name cn other than
// except. Called with mu held.
func (s *Server) sameName(cn string, except *session) []*session {
	var out []*session
	for _, o := range s.byPeer {
		if o != except && o.commonName == cn {
			out = append(out, o)
		}
	}
	return out
}
