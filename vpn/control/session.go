package control

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/hooks"
	"github.com/ovfwd/ovfwd/vpn/statickey"
)

// keyState is one key_id's negotiation: its reliability layer and the TLS
// session that runs over it (ssl.c struct key_state, key_state_soft_reset).
type keyState struct {
	id          uint8
	first       bool // key_id 0 of the session: also carries push/auth
	rel         reliable
	conn        *streamConn
	tls         *tls.Conn
	start       time.Time
	established bool // data keys installed
	promoted    bool // transmit key in the data plane
	rxBytes     int  // stream bytes taken while not established (handshakeByteLimit)
}

// session is one client: a (remote address, session id pair) with up to
// two key states, the newest (primary) and the previous (lame duck).
// Fields below mu are guarded by it; fields marked "Server.mu" by the
// server lock.
type session struct {
	srv       *Server
	wrap      *wrapper       // the server's, or the client's own key under tls-crypt-v2
	addr      netip.AddrPort // written under Server.mu and mu (float); read under either
	localSID  [sessionIDLen]byte
	remoteSID [sessionIDLen]byte
	created   time.Time
	set       *Tunables      // the server's Tunables when the session began; read-only
	source    netip.Prefix   // the address (IPv4) or /64 (IPv6) it began from: its half-open share
	v2Key     *statickey.Key // under tls-crypt-v2, the client key it began with

	// Server.mu
	removed  bool // torn down (or being)
	admitted bool // out of the half-open count

	mu            sync.Mutex
	dead          bool
	hasPeerID     bool
	peerID        uint32
	vpn4, vpn6    netip.Addr
	replayOut     replaySender
	replayIn      replayState
	primary, lame *keyState
	lastRecv      time.Time
	lastPing      time.Time
	peerAdded     bool
	cipher        vpn.Cipher
	compression   vpn.Comp
	info          PeerInfo
	commonName    string            // written under Server.mu and mu (admit); read under either
	cert          *x509.Certificate // the client's certificate; as commonName
	certCN        string            // cert's common name (commonName may be the username); as commonName
	username      string            // the first key's username, when Auth checks one; as commonName
	group         string            // the access group Auth's command named ("" none); as commonName
	peerInfo      string            // the client's IV_* lines, for hooks
	dyn           hooks.Dynamic     // what client-connect's configuration file said
	ignored       int               // unknown control messages since the last one logged
	ignoredAt     time.Time         // when one was last logged
	useEKM        bool
	renegAt       time.Time
	lameExpire    time.Time
	exitAt        time.Time
	lastPush      time.Time
	maxPayload    int
}

func newSession(srv *Server, src netip.AddrPort, local, remote [sessionIDLen]byte, now time.Time, w *wrapper) *session {
	s := &session{srv: srv, wrap: w, addr: src, localSID: local, remoteSID: remote, created: now, lastRecv: now}
	// The stateless reset reply used replay id 1 and msg-id 0; both sides'
	// msg 0 are acked by the packet that completed the handshake.
	s.replayOut = replaySender{time: uint32(now.Unix()), next: 2}
	ks := s.newKeyState(0, now)
	ks.first = true
	ks.rel.sendNext, ks.rel.recvNext = 1, 1
	s.primary = ks
	mtu := tlsMTU - 28
	if !src.Addr().Is4() {
		mtu = tlsMTU - ipv6UDPHeaders
	}
	s.maxPayload = mtu - (1 + sessionIDLen + srv.wrap.overhead()) - bodyOverhead(maxAcksPiggyback)
	return s
}

func (s *session) newKeyState(id uint8, now time.Time) *keyState {
	ks := &keyState{id: id, start: now}
	ks.rel.rto = s.srv.rto
	local := &net.UDPAddr{}
	ks.conn = newStreamConn(func(b []byte) error { return s.writeTLS(ks, b) }, local, net.UDPAddrFromAddrPort(s.addr))
	ks.tls = tls.Server(ks.conn, s.srv.tlsConf)
	return ks
}

func (s *session) start() {
	s.mu.Lock()
	ks := s.primary
	s.mu.Unlock()
	go s.runKey(ks)
}

// nextKeyID rotates 1..7; 0 is only the session's first key.
func nextKeyID(id uint8) uint8 {
	if id >= 7 {
		return 1
	}
	return id + 1
}

func (s *session) keyFor(id uint8) *keyState {
	if s.primary != nil && s.primary.id == id {
		return s.primary
	}
	if s.lame != nil && s.lame.id == id {
		return s.lame
	}
	return nil
}

// handle processes one authenticated, parsed packet of this session.
func (s *session) handle(p *packet, rid uint64, now time.Time) {
	drops := &s.srv.drops
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	if s.wrap.mode != WrapNone && !s.replayIn.check(rid, now) {
		drops.add(DropReplay)
		return
	}
	if p.nAcks > 0 && p.peerSID != s.localSID {
		drops.add(DropBadSessionID)
		return
	}
	s.lastRecv = now
	ks := s.keyFor(p.keyID)
	if ks == nil && p.op == opControlSoftResetV1 && s.primary.established && p.keyID == nextKeyID(s.primary.id) {
		ks = s.beginRenegotiation(p.keyID, now) // client-initiated
	}
	if ks == nil {
		drops.add(DropKeyID)
		return
	}
	ks.rel.acked(p)
	if p.op != opAckV1 {
		switch {
		case ks != s.primary:
			drops.add(DropKeyID) // only the newest key takes new messages
			return
		case p.op == opControlHardResetClient2 && ks.id != 0:
			drops.add(DropKeyID)
			return
		}
		payload := p.payload
		if p.op != opControlV1 {
			payload = nil // resets carry no TLS bytes
		}
		switch {
		case len(payload) > maxControlPayload:
			drops.add(DropOversize)
			return
		case !ks.established && ks.rxBytes > handshakeByteLimit:
			drops.add(DropStreamFull) // the session is on its way out
			return
		case p.msgID >= ks.rel.recvNext && ks.conn.buffered() >= streamBufferLimit:
			// Not taken, not acked: the client retransmits it once the
			// reader has caught up (reliable.c reliable_can_get).
			drops.add(DropStreamFull)
			s.flush(now)
			return
		}
		if !ks.rel.receive(p.msgID, payload) {
			drops.add(DropRecvWindow)
			return
		}
		for b, ok := ks.rel.next(); ok; b, ok = ks.rel.next() {
			if len(b) > 0 {
				ks.conn.deliver(b)
				if !ks.established {
					ks.rxBytes += len(b)
				}
			}
		}
		if !ks.established && ks.rxBytes > handshakeByteLimit && s.exitAt.IsZero() {
			drops.add(DropHandshakeBytes)
			s.srv.logf("control: %s: key %d: more than %d bytes before the key was up; closing", s.addr, ks.id, handshakeByteLimit)
			s.exitAt = now
		}
	}
	s.flush(now)
}

// beginRenegotiation makes a new primary key with id, retiring the lame
// duck and demoting the current key (ssl.c key_state_soft_reset). Called
// with mu held.
func (s *session) beginRenegotiation(id uint8, now time.Time) *keyState {
	s.retireLame()
	s.lame = s.primary
	ks := s.newKeyState(id, now)
	ks.rel.queue(opControlSoftResetV1, nil)
	s.primary = ks
	s.renegAt = time.Time{}
	go s.runKey(ks)
	return ks
}

func (s *session) retireLame() {
	if s.lame == nil {
		return
	}
	if s.lame.established && s.peerAdded {
		_ = s.srv.dp.DropKey(s.peerID, s.lame.id)
	}
	s.lame.conn.Close()
	s.lame = nil
}

// writeTLS packetises TLS output of ks into P_CONTROL_V1 messages.
func (s *session) writeTLS(ks *keyState, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return errConnClosed
	}
	if len(ks.rel.out) >= sendQueueLimit {
		if s.exitAt.IsZero() || s.exitAt.After(time.Now()) {
			s.srv.drops.add(DropSendQueue)
			s.srv.logf("control: %s: key %d: %d messages unacknowledged; closing", s.addr, ks.id, len(ks.rel.out))
			s.exitAt = time.Now()
		}
		return errConnClosed
	}
	for len(b) > 0 {
		n := min(len(b), s.maxPayload)
		ks.rel.queue(opControlV1, b[:n])
		b = b[n:]
	}
	s.flush(time.Now())
	return nil
}

// flush sends due (re)transmissions and pending acks. Called with mu held.
func (s *session) flush(now time.Time) {
	var due [reliableSendWindow]*outMsg
	for _, ks := range [2]*keyState{s.primary, s.lame} {
		if ks == nil {
			continue
		}
		for _, m := range ks.rel.due(now, due[:0]) {
			p := packet{op: m.op, keyID: ks.id, msgID: m.id, payload: m.payload, peerSID: s.remoteSID}
			ks.rel.takeAcks(&p, maxAcksPiggyback)
			s.sendPacket(&p, now)
		}
		for len(ks.rel.acks) > 0 {
			p := packet{op: opAckV1, keyID: ks.id, peerSID: s.remoteSID}
			ks.rel.takeAcks(&p, maxAcksPerAck)
			s.sendPacket(&p, now)
		}
	}
}

func (s *session) sendPacket(p *packet, now time.Time) {
	body := p.appendBody(make([]byte, 0, 64+len(p.payload)))
	out := s.wrap.wrap(make([]byte, 0, len(body)+tlsCryptHeaderLen+64), p.op<<opShift|p.keyID, &s.localSID, s.replayOut.nextID(now), body)
	s.srv.send(s.addr, out)
}

// sendTextOnce writes msg (one NUL-terminated control message, one TLS
// record) on the primary key unless it already went out on that key
// (sent), and returns the key that now carries it: a 2.6 peer takes
// control messages only on its newest key ("key IDs out of sync"
// otherwise, openvpn ssl.c tls_pre_decrypt). A client that
// starts a renegotiation after the write drops it as sent on an old key,
// so a caller waiting for delivery calls this again until the key stops
// changing. It waits for a renegotiation in flight to settle unless force.
func (s *session) sendTextOnce(msg string, sent *keyState, force bool) *keyState {
	s.mu.Lock()
	ks := s.primary
	ok := !s.dead && ks != sent && ks.established && (force || ks.promoted)
	s.mu.Unlock()
	if !ok {
		return sent
	}
	_, _ = ks.tls.Write(append([]byte(msg), 0))
	return ks
}

// deliverText tells every session msg on its newest key and waits until
// each has acknowledged it or ack has passed. A renegotiation in flight
// gets settle to finish first; one started after the write gets the
// message again on its new key.
func deliverText(all []*session, msg string, settle, ack time.Duration) {
	start := time.Now()
	sent := make([]*keyState, len(all))
	for {
		now := time.Now()
		if now.Sub(start) >= ack {
			return
		}
		force := now.Sub(start) >= settle
		waiting := false
		for i, sess := range all {
			prev := sent[i]
			sent[i] = sess.sendTextOnce(msg, prev, force)
			switch {
			case sent[i] == nil:
				// No established key yet: wait for one until settle,
				// then there is nothing a client would take.
				waiting = waiting || !force && !sess.isDead()
			case sent[i] != prev || sess.unackedOn(sent[i]):
				waiting = waiting || !sess.isDead()
			}
		}
		if !waiting {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// remote is the client's current address (it changes on a float).
func (s *session) remote() netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// unackedOn reports whether ks has messages in flight or is no longer the
// session's primary key (the message must go out again).
func (s *session) unackedOn(ks *keyState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.dead && (ks != s.primary || ks.rel.pending())
}

func (s *session) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// tick runs the session's timers; a non-empty result means "tear down".
func (s *session) tick(now time.Time) string {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return ""
	}
	s.flush(now)
	cfg := &s.srv.cfg
	var reason string
	ping := false
	switch {
	case !s.exitAt.IsZero() && now.After(s.exitAt):
		reason = "exit"
	case !s.primary.established && now.Sub(s.primary.start) > handWindow:
		reason = "hand-window expired"
	case s.peerAdded:
		rx, tx := s.srv.dp.LastActivity(s.peerID)
		if rx.Before(s.lastRecv) {
			rx = s.lastRecv
		}
		if now.Sub(rx) > 2*s.set.PingRestart {
			reason = "ping-restart"
			break
		}
		if tx.Before(s.lastPing) {
			tx = s.lastPing
		}
		if cfg.SendPing != nil && now.Sub(tx) >= s.set.Ping {
			ping, s.lastPing = true, now
		}
		// Move transmission to a renegotiated key once the client has
		// acknowledged everything we sent on it, i.e. our key method 2
		// message, so it holds the key too (ssl.c tls_select_encryption_key).
		if s.primary.established && !s.primary.promoted && !s.primary.rel.pending() {
			if s.srv.dp.SetPrimary(s.peerID, s.primary.id) == nil {
				s.primary.promoted = true
			}
		}
		if s.lame != nil && s.primary.established && now.After(s.lameExpire) {
			s.retireLame()
		}
		if s.primary.established && !s.renegAt.IsZero() && now.After(s.renegAt) {
			s.beginRenegotiation(nextKeyID(s.primary.id), now) // server-initiated
			s.flush(now)
		}
	}
	peerID := s.peerID
	s.mu.Unlock()
	if ping {
		cfg.SendPing(peerID)
	}
	return reason
}

// runKey drives one key's TLS handshake, key method 2 exchange and (for
// the primary key) the text messages that follow.
func (s *session) runKey(ks *keyState) {
	srv := s.srv
	// A client that stalls its TLS handshake holds a half-open slot: it
	// gets HandshakeTimeout from its first packet, not openvpn's 60 s
	// hand-window, which still bounds the whole negotiation.
	ctx, cancel := context.WithTimeout(context.Background(), s.set.HandshakeTimeout)
	err := ks.tls.HandshakeContext(ctx)
	timedOut := ctx.Err() != nil
	cancel()
	if err != nil {
		if timedOut {
			srv.drops.add(DropHandshakeTimeout)
		}
		s.fail(ks, "TLS handshake: "+err.Error())
		return
	}
	cs := ks.tls.ConnectionState()
	buf := make([]byte, 16384+tlsChannelBufSize)
	n, err := ks.tls.Read(buf)
	if err != nil {
		s.fail(ks, "reading key method 2: "+err.Error())
		return
	}
	var ckm keyMethod2
	if err := ckm.unmarshal(buf[:n], true); err != nil {
		s.fail(ks, err.Error())
		return
	}
	if ks.first && srv.draining.Load() {
		s.refuseDraining(ks)
		return
	}
	var refused string
	if ks.first {
		refused = s.authorize(&ckm, &cs)
	} else if why := s.reauthorize(&ckm, &cs); why != "" {
		srv.drops.add(DropRenegRefused)
		s.fail(ks, "renegotiation refused: "+why)
		return
	}
	// Our key method 2 goes first even for a refused client: a 2.6 client
	// reads the first record after TLS as key method 2 (ssl.c
	// key_method_2_read), and takes AUTH_FAILED only as a control message
	// after it (push.c send_auth_failed, receive_auth_failed).
	skm := keyMethod2{options: serverOptionsString}
	_, _ = rand.Read(skm.random1[:])
	_, _ = rand.Read(skm.random2[:])
	if _, err := ks.tls.Write(skm.marshal(false)); err != nil {
		s.fail(ks, "writing key method 2: "+err.Error())
		return
	}
	if refused != "" {
		s.authFailed(ks, refused, certName(&cs), ckm.username, buf)
		return
	}
	s.mu.Lock()
	useEKM, cipher := s.useEKM, s.cipher
	s.mu.Unlock()
	var key2 []byte
	if useEKM {
		if key2, err = cs.ExportKeyingMaterial(ekmLabelDataKeys, nil, ekmLen); err != nil {
			s.fail(ks, "EKM: "+err.Error())
			return
		}
	} else {
		key2 = legacyKey2(&ckm, &skm, s.remoteSID, s.localSID)
	}
	km := splitKey2(key2, cipher, ks.id, true)

	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return
	}
	if ks.first {
		err = srv.dp.AddPeer(Peer{PeerID: s.peerID, Addr: s.addr, VPNIPv4: s.vpn4, VPNIPv6: s.vpn6, Comp: s.compression, CommonName: s.commonName,
			Username: s.username, Cipher: s.cipher, Since: s.created, Group: s.group, IRoutes: s.dyn.IRoutes, Client: s.hookClientLocked()})
		s.peerAdded = err == nil
	}
	if err == nil {
		slot := vpn.Primary
		if !ks.first {
			slot = vpn.Secondary // promoted by tick once the client acked our KM2
		}
		err = srv.dp.InstallKey(s.peerID, slot, &km)
	}
	if err == nil {
		now := time.Now()
		ks.established = true
		ks.promoted = ks.first
		s.lameExpire = now.Add(tranWindow)
		s.renegAt = time.Time{}
		if reneg := srv.live.Load().RenegSec; reneg > 0 {
			// Servers jitter reneg-sec into [90 %, 100 %] (init.c
			// do_init_crypto_tls, options.c reneg-sec).
			j, _ := rand.Int(rand.Reader, big.NewInt(int64(reneg/10)+1))
			s.renegAt = now.Add(reneg - time.Duration(j.Int64()))
		}
	}
	push := ks.first && s.info.Proto&ivProtoRequestPush != 0
	s.mu.Unlock()
	if err != nil {
		s.fail(ks, "data plane: "+err.Error())
		return
	}
	srv.logf("control: %s: key %d established (%s, cipher %s, ekm %v)", s.remote(), ks.id, tlsVersion(cs.Version), cipher, useEKM)
	if push {
		s.sendPush(ks)
	}
	for {
		n, err := ks.tls.Read(buf)
		if err != nil {
			return
		}
		for _, msg := range bytes.Split(buf[:n], []byte{0}) {
			if len(msg) > 0 {
				s.handleText(ks, string(msg))
			}
		}
	}
}

func tlsVersion(v uint16) string {
	if v == tls.VersionTLS13 {
		return "TLS 1.3"
	}
	return "TLS 1.2"
}

// fail abandons a key; for the first key (or a failed renegotiation) the
// whole session goes, the client will reconnect.
func (s *session) fail(ks *keyState, why string) {
	s.srv.logf("control: %s: key %d: %s", s.remote(), ks.id, why)
	s.mu.Lock()
	if !s.dead && s.exitAt.IsZero() {
		s.exitAt = time.Now()
	}
	s.mu.Unlock()
}

func (s *session) sendPush(ks *keyState) {
	s.mu.Lock()
	srv := s.srv
	routes := s.set.Routes
	if extra := srv.live.Load().Clients[s.commonName].Routes; len(extra) > 0 {
		routes = append(slices.Clone(routes), extra...)
	}
	p := pushParams{
		vpn4: s.vpn4, vpn6: s.vpn6, routes: routes, extraOptions: append(slices.Clip(s.set.Push), s.dyn.Push...),
		ping: s.set.Ping, pingRestart: s.set.PingRestart,
		peerID: s.peerID, cipher: s.cipher.String(), ivProto: s.info.Proto,
		compression: s.compression,
	}
	if s.info.MTU > 0 {
		p.mtu = min(s.set.TunMTU, s.info.MTU)
	}
	if srv.pool4 != nil {
		p.gw4, p.bits4 = srv.pool4.ServerAddr(), srv.pool4.Prefix().Bits()
	}
	if srv.pool6 != nil {
		p.gw6, p.bits6 = srv.pool6.ServerAddr(), srv.pool6.Prefix().Bits()
	}
	s.lastPush = time.Now()
	s.mu.Unlock()
	for _, m := range pushReplies(p.pushOptions()) {
		if _, err := ks.tls.Write(append([]byte(m), 0)); err != nil {
			return
		}
	}
}

func (s *session) handleText(ks *keyState, msg string) {
	switch {
	case msg == msgPushRequest:
		s.mu.Lock()
		ready := s.peerAdded && (s.lastPush.IsZero() || time.Since(s.lastPush) > 30*time.Second)
		s.mu.Unlock()
		if ready {
			s.sendPush(ks)
		}
	case msg == msgExit || strings.HasPrefix(msg, msgExit+","):
		s.mu.Lock()
		first := s.exitAt.IsZero()
		if first {
			s.exitAt = time.Now().Add(5 * time.Second) // absorb retransmits
		}
		s.mu.Unlock()
		if first {
			s.srv.logf("control: %s: client sent EXIT", s.remote())
		}
	default:
		s.srv.drops.add(DropIgnoredText)
		// One line per ignoredLogEvery at most: a client must not be able
		// to write the log at its link rate.
		now := time.Now()
		s.mu.Lock()
		s.ignored++
		n, due := s.ignored, now.Sub(s.ignoredAt) >= ignoredLogEvery
		if due {
			s.ignored, s.ignoredAt = 0, now
		}
		s.mu.Unlock()
		if due {
			if len(msg) > 64 {
				msg = msg[:64] + "…"
			}
			s.srv.logf("control: %s: ignoring %d unknown control message(s), the last %q", s.remote(), n, msg)
		}
	}
}

// ignoredLogEvery spaces the log lines about unknown control messages of
// one session (all are counted, DropIgnoredText).
const ignoredLogEvery = 10 * time.Second
