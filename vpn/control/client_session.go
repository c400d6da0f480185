package control

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
)

// clientSession is one connection of a Client: session ids, the control
// channel's replay state and reliable layers, and the keys negotiated on
// it. A reconnect starts a new clientSession.
type clientSession struct {
	c    *Client
	wrap *wrapper

	mu        sync.Mutex
	sid       [sessionIDLen]byte
	peerSID   [sessionIDLen]byte
	replayOut replaySender
	replayIn  replayState
	keys      [keyIDMask + 1]*clientKeyState
	primary   *clientKeyState // newest key; control messages go on it
	pushed    *Pushed         // the PUSH_REPLY being assembled, then the applied one
	lastPush  time.Time       // last PUSH_REQUEST sent
	ready     chan error      // the first key's result: nil once the data channel is up
	readyOnce sync.Once
	renegAt   time.Time
	// deriveFirst makes the first key's data keys once the PUSH_REPLY
	// has named the cipher and the derivation.
	deriveFirst func(*Pushed) (*vpn.KeyMaterial, error)

	// acked is signalled (without blocking) when an ack from the server
	// was processed; waitDelivered sleeps on it.
	acked chan struct{}

	done    chan struct{}
	endErr  error
	endOnce sync.Once
}

type clientKeyState struct {
	id          uint8
	first       bool
	start       time.Time
	rel         reliable
	conn        *streamConn
	tls         *tls.Conn
	gotReset    chan struct{}
	established bool
	// serverTalked: the server sent more than its reset on this key,
	// so it has a session and our ack of the reset arrived.
	serverTalked bool
}

func newClientSession(c *Client) *clientSession {
	w, _ := newWrapper(c.cfg.Wrap, &c.cfg.WrapKey, c.cfg.AuthDigest, c.cfg.KeyDirection, false) // validated by Dial
	s := &clientSession{c: c, wrap: w, ready: make(chan error, 1), acked: make(chan struct{}, 1), done: make(chan struct{})}
	_, _ = rand.Read(s.sid[:])
	return s
}

// connect starts the first key and waits until its PUSH_REPLY has been
// applied, the session ends, or hand-window passes.
func (s *clientSession) connect() error {
	s.mu.Lock()
	k := s.newKey(0, opControlHardResetClient2, time.Now())
	k.first = true
	s.flush(time.Now())
	s.mu.Unlock()
	go s.runKey(k)
	t := time.NewTimer(handWindow)
	defer t.Stop()
	select {
	case err := <-s.ready:
		return err
	case <-s.done:
		return s.err()
	case <-t.C:
		s.end(errHandWindow)
		return errHandWindow
	}
}

func (s *clientSession) err() error {
	<-s.done
	return s.endErr
}

// end stops the session with err (first reason wins).
func (s *clientSession) end(err error) {
	s.endOnce.Do(func() {
		s.endErr = err
		close(s.done)
		s.readyOnce.Do(func() { s.ready <- err })
	})
}

// shutdown closes every key's TLS stream so the key goroutines return.
func (s *clientSession) shutdown() {
	s.end(errors.New("session replaced"))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range s.keys {
		if k != nil {
			k.conn.Close()
			s.keys[i] = nil
		}
	}
}

// newKey creates key id and queues its opening message (hard or soft
// reset). Called with mu held.
func (s *clientSession) newKey(id uint8, op uint8, now time.Time) *clientKeyState {
	k := &clientKeyState{id: id, start: now, gotReset: make(chan struct{})}
	remote := net.UDPAddrFromAddrPort(s.c.cfg.Remote)
	k.conn = newStreamConn(func(b []byte) error { return s.writeTLS(k, b) }, &net.UDPAddr{}, remote)
	k.tls = tls.Client(k.conn, s.c.tlsConfig())
	k.rel.queue(op, nil)
	if old := s.keys[id]; old != nil {
		old.conn.Close()
	}
	s.keys[id] = k
	s.primary = k
	return k
}

func (c *Client) tlsConfig() *tls.Config {
	roots, name := c.cfg.RootCAs, c.cfg.ServerName
	cert, _, _ := c.credentials()
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		// openvpn checks the chain and "remote-cert-tls server", not a
		// host name, so the standard verification (which insists on one)
		// is replaced by the same check.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("control: server sent no certificate")
			}
			certs := make([]*x509.Certificate, len(raw))
			for i, der := range raw {
				cert, err := x509.ParseCertificate(der)
				if err != nil {
					return err
				}
				certs[i] = cert
			}
			inter := x509.NewCertPool()
			for _, cert := range certs[1:] {
				inter.AddCert(cert)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: name,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			return err
		},
	}
}

// writeTLS packetises TLS output into P_CONTROL_V1 messages.
func (s *clientSession) writeTLS(k *clientKeyState, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return errConnClosed
	default:
	}
	for len(b) > 0 {
		n := min(len(b), clientControlChunk)
		k.rel.queue(opControlV1, b[:n])
		b = b[n:]
	}
	s.flush(time.Now())
	return nil
}

// flush sends due (re)transmissions and pending acks. Called with mu held.
func (s *clientSession) flush(now time.Time) {
	var due [reliableSendWindow]*outMsg
	for _, k := range s.keys {
		if k == nil {
			continue
		}
		for _, m := range k.rel.due(now, due[:0]) {
			p := packet{op: m.op, keyID: k.id, msgID: m.id, payload: m.payload, peerSID: s.peerSID}
			k.rel.takeAcks(&p, maxAcksPiggyback)
			s.reackReset(k, &p)
			s.sendPacket(&p, now)
		}
		for len(k.rel.acks) > 0 {
			p := packet{op: opAckV1, keyID: k.id, peerSID: s.peerSID}
			k.rel.takeAcks(&p, maxAcksPerAck)
			s.sendPacket(&p, now)
		}
	}
}

// reackReset acknowledges the server's hard reset (msg-id 0) again in
// every packet of the first key until the server has sent anything else:
// a stateless 2.6 server creates the session only from a packet that acks
// its reset, so if the first such packet is lost, retransmissions must
// carry the ack too (openvpn 2.6 does the same with its recently-acked
// list, reliable.c copy_acks_to_mru). Called with mu held.
func (s *clientSession) reackReset(k *clientKeyState, p *packet) {
	if !k.first || k.serverTalked || s.peerSID == ([sessionIDLen]byte{}) || p.hasAck(0) || p.nAcks >= maxAcksPiggyback {
		return
	}
	p.acks[p.nAcks] = 0
	p.nAcks++
}

func (s *clientSession) sendPacket(p *packet, now time.Time) {
	body := p.appendBody(make([]byte, 0, 64+len(p.payload)))
	out := s.wrap.wrap(make([]byte, 0, len(body)+tlsCryptHeaderLen+64), p.op<<opShift|p.keyID, &s.sid, s.replayOut.nextID(now), body)
	_, _ = s.c.conn.Write(out)
}

// handle processes one control packet from the server and reports whether
// it was acceptable.
func (s *clientSession) handle(pkt []byte) bool {
	if len(pkt) < 1+sessionIDLen {
		return false
	}
	rid, body, err := s.wrap.unwrap(pkt)
	if err != nil {
		return false
	}
	p := packet{op: pkt[0] >> opShift, keyID: pkt[0] & keyIDMask}
	copy(p.sid[:], pkt[1:])
	if err := p.parseBody(body); err != nil {
		return false
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return true // late packet of a finished session
	default:
	}
	if s.wrap.mode != WrapNone && !s.replayIn.check(rid, now) {
		return false
	}
	if p.op == opControlHardResetServer2 && p.keyID == 0 && s.peerSID == ([sessionIDLen]byte{}) {
		s.peerSID = p.sid
	}
	if p.sid != s.peerSID || (p.nAcks > 0 && p.peerSID != s.sid) {
		return false
	}
	s.c.lastRecv.Store(s.c.since())
	k := s.keys[p.keyID]
	if p.op == opControlSoftResetV1 && (k == nil || k.established) && s.primary != nil && s.primary.established && p.keyID != s.primary.id {
		k = s.newKey(p.keyID, opControlSoftResetV1, now) // server-initiated renegotiation
		go s.runKey(k)
	}
	if k == nil {
		return true // a key we dropped
	}
	k.rel.acked(&p)
	if p.nAcks > 0 {
		select {
		case s.acked <- struct{}{}:
		default:
		}
	}
	if p.op != opControlHardResetServer2 {
		k.serverTalked = true
	}
	if p.op != opAckV1 {
		payload := p.payload
		if p.op != opControlV1 {
			payload = nil
			if p.msgID == 0 {
				select {
				case <-k.gotReset:
				default:
					close(k.gotReset)
				}
			}
		}
		k.rel.receive(p.msgID, payload)
		for b, ok := k.rel.next(); ok; b, ok = k.rel.next() {
			if len(b) > 0 {
				k.conn.deliver(b)
			}
		}
	}
	s.flush(now)
	return true
}

// runKey drives one key: TLS handshake, key method 2 exchange, then (first
// key) the PUSH_REPLY and the text messages that follow.
func (s *clientSession) runKey(k *clientKeyState) {
	err := s.negotiate(k)
	if err != nil {
		s.end(err)
		return
	}
	if !k.first {
		s.c.renegs.Add(1)
	}
	var pending []byte
	buf := make([]byte, 16384+tlsChannelBufSize)
	for {
		n, err := k.tls.Read(buf)
		if err != nil {
			return
		}
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.IndexByte(pending, 0)
			if i < 0 {
				break
			}
			msg := string(pending[:i])
			pending = pending[i+1:]
			if msg != "" {
				s.handleText(k, msg)
			}
		}
	}
}

// negotiate runs the TLS handshake and key method 2 on k and, for a
// renegotiated key, installs its data keys.
func (s *clientSession) negotiate(k *clientKeyState) error {
	ctx, cancel := context.WithTimeout(context.Background(), handWindow)
	defer cancel()
	select {
	case <-k.gotReset:
	case <-s.done:
		return s.endErr
	case <-ctx.Done():
		return errHandWindow
	}
	if err := k.tls.HandshakeContext(ctx); err != nil {
		return errors.New("TLS handshake: " + err.Error())
	}
	_, username, password := s.c.credentials()
	var ciphers []string
	for _, c := range s.c.cfg.Ciphers {
		ciphers = append(ciphers, c.String())
	}
	km := keyMethod2{options: clientOptionsString,
		peerInfo: "IV_VER=2.6.14\nIV_PLAT=linux\nIV_PROTO=" + strconv.Itoa(clientIVProto) +
			"\nIV_CIPHERS=" + strings.Join(ciphers, ":") + "\nIV_MTU=1600\nIV_GUI_VER=ovfwd\n",
		username: username, password: password}
	_, _ = rand.Read(km.preMaster[:])
	_, _ = rand.Read(km.random1[:])
	_, _ = rand.Read(km.random2[:])
	if _, err := k.tls.Write(km.marshal(true)); err != nil {
		return err
	}
	buf := make([]byte, 16384+tlsChannelBufSize)
	n, err := k.tls.Read(buf)
	if err != nil {
		return errors.New("reading key method 2: " + err.Error())
	}
	var skm keyMethod2
	if err := skm.unmarshal(buf[:n], false); err != nil {
		return err
	}
	cs := k.tls.ConnectionState()
	ekm, err := cs.ExportKeyingMaterial(ekmLabelDataKeys, nil, ekmLen)
	if err != nil {
		ekm = nil // TLS 1.2 without EMS: only the legacy PRF is possible
	}
	s.mu.Lock()
	legacy := legacyKey2(&km, &skm, s.sid, s.peerSID)
	k.established = true
	pushed := s.pushed
	s.mu.Unlock()
	derive := func(p *Pushed) (*vpn.KeyMaterial, error) {
		key2 := legacy
		if p.EKM {
			if ekm == nil {
				return nil, errors.New("server pushed tls-ekm but TLS has no exporter")
			}
			key2 = ekm
		}
		m := splitKey2(key2, p.Cipher, k.id, false)
		return &m, nil
	}
	if k.first {
		// Data keys wait for the PUSH_REPLY, which names the cipher and
		// the derivation (push.c prepare_push_reply, ssl.c tls_session_generate_data_channel_keys).
		s.mu.Lock()
		s.deriveFirst = derive
		s.mu.Unlock()
		return nil
	}
	if pushed == nil {
		return errors.New("renegotiation before PUSH_REPLY")
	}
	m, err := derive(pushed)
	if err == nil {
		err = s.c.install(pushed, m)
	}
	if err == nil {
		s.mu.Lock()
		s.scheduleReneg(time.Now())
		s.retire(k)
		s.mu.Unlock()
	}
	return err
}

// retire drops keys older than the lame duck once k is established.
// Called with mu held.
func (s *clientSession) retire(k *clientKeyState) {
	keep := map[uint8]bool{k.id: true}
	if d := s.c.data.Load(); d != nil {
		for id, dk := range d.rx {
			if dk != nil {
				keep[uint8(id)] = true
			}
		}
	}
	for id, old := range s.keys {
		if old != nil && !keep[uint8(id)] {
			old.conn.Close()
			s.keys[id] = nil
		}
	}
}

func (s *clientSession) scheduleReneg(now time.Time) {
	if s.c.cfg.RenegSec > 0 {
		s.renegAt = now.Add(s.c.cfg.RenegSec)
	}
}

// handleText acts on one control-channel message from the server.
func (s *clientSession) handleText(k *clientKeyState, msg string) {
	switch {
	case strings.HasPrefix(msg, msgPushReply):
		s.mu.Lock()
		if s.pushed != nil && s.pushed.complete {
			s.mu.Unlock()
			return // a repeated reply (our PUSH_REQUEST crossed it)
		}
		if s.pushed == nil {
			s.pushed = &Pushed{PeerID: vpn.PeerIDUndefined}
		}
		p := s.pushed
		derive := s.deriveFirst
		more, err := parsePushReply(msg, p)
		if err == nil && !more {
			p.complete = true
		}
		s.mu.Unlock()
		if err != nil {
			s.end(err)
			return
		}
		if !more {
			s.applyPush(p, derive)
		}
	case msg == msgRestart || strings.HasPrefix(msg, msgRestart+","):
		s.end(errRestart)
	case msg == "HALT" || strings.HasPrefix(msg, "HALT,"):
		s.end(&fatalError{msg: "server sent " + msg})
	case strings.HasPrefix(msg, msgAuthFailed+",TEMP"):
		s.end(errors.New("server sent " + msg))
	case msg == msgAuthFailed || strings.HasPrefix(msg, msgAuthFailed+","):
		s.end(&fatalError{msg: "server sent " + msg})
	default:
		s.c.logf("control client: %v: ignoring control message %q", s.c.cfg.Remote, msg)
	}
}

// applyPush installs the first key's data keys from a complete PUSH_REPLY.
func (s *clientSession) applyPush(p *Pushed, derive func(*Pushed) (*vpn.KeyMaterial, error)) {
	var err error
	switch {
	case derive == nil:
		err = errors.New("PUSH_REPLY before key method 2")
	case p.Cipher == vpn.CipherNone:
		err = errors.New("PUSH_REPLY names no data cipher")
	case p.PeerID == vpn.PeerIDUndefined:
		err = errors.New("PUSH_REPLY has no peer-id (P_DATA_V1 is not supported)")
	case p.Comp != vpn.CompNone:
		err = errors.New("pushed compression framing is not supported")
	}
	var m *vpn.KeyMaterial
	if err == nil {
		m, err = derive(p)
	}
	if err == nil {
		err = s.c.install(p, m)
	}
	if err != nil {
		s.end(err)
		return
	}
	s.mu.Lock()
	s.scheduleReneg(time.Now())
	s.mu.Unlock()
	s.readyOnce.Do(func() { s.ready <- nil })
}

// sendText writes one NUL-terminated control message on the newest key.
func (s *clientSession) sendText(msg string) {
	s.mu.Lock()
	k := s.primary
	ok := k != nil && k.established
	s.mu.Unlock()
	if ok {
		_, _ = k.tls.Write(append([]byte(msg), 0))
	}
}

// waitDelivered waits until the server has acknowledged every message on
// the newest key, the session ends or d passes; it reports whether all
// were acknowledged. The read loop and the timer keep running meanwhile,
// so acks arrive and a lost message is retransmitted.
func (s *clientSession) waitDelivered(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		s.mu.Lock()
		pending := s.primary != nil && s.primary.rel.pending()
		s.mu.Unlock()
		if !pending {
			return true
		}
		select {
		case <-s.acked:
		case <-s.done:
			return false
		case <-t.C:
			return false
		}
	}
}

// tick runs the session's timers.
func (s *clientSession) tick(now time.Time) {
	select {
	case <-s.done:
		return
	default:
	}
	c := s.c
	s.mu.Lock()
	s.flush(now)
	pushed := s.pushed
	complete := pushed != nil && pushed.complete
	var requestPush bool
	primary := s.primary
	if primary != nil && primary.first && primary.established && !complete &&
		now.Sub(primary.start) > pushRequestDelay && now.Sub(s.lastPush) > pushRequestInterval {
		requestPush, s.lastPush = true, now
	}
	var handExpired, handSilent bool
	if primary != nil && !primary.established && now.Sub(primary.start) > handWindow {
		handExpired = true
	}
	// Until PUSH_REPLY completes the connection, silence means the server
	// lost the session (it may have finished TLS and then restarted).
	if primary != nil && primary.first && !(primary.established && complete) &&
		time.Duration(c.since()-c.lastRecv.Load()) > handshakeSilence {
		handSilent = true
	}
	// Renegotiate at reneg-sec, or before the packet id wraps (2.6 does
	// at PACKET_ID_WRAP_TRIGGER, packet_id.h; ssl.c tls_process).
	nearWrap := false
	if d := c.data.Load(); d != nil {
		nearWrap = d.tx.sent.Load() >= packetIDRenegThreshold
	}
	if complete && primary.established && (nearWrap || !s.renegAt.IsZero() && now.After(s.renegAt)) {
		s.renegAt = time.Time{}
		// We initiate; TLS starts once the server's own soft reset
		// (msg-id 0 of the new key) arrives (ssl.c key_state_soft_reset).
		k := s.newKey(nextKeyID(primary.id), opControlSoftResetV1, now)
		s.flush(now)
		go s.runKey(k)
	}
	s.mu.Unlock()
	if handExpired {
		s.end(errHandWindow)
		return
	}
	if handSilent {
		s.end(errHandSilent)
		return
	}
	if requestPush {
		s.sendText(msgPushRequest)
	}
	restart := prePullPingRestart
	if complete && pushed.PingRestart > 0 {
		restart = pushed.PingRestart
	}
	if time.Duration(c.since()-c.lastRecv.Load()) > restart {
		s.end(errPingRestart)
		return
	}
	if complete && pushed.Ping > 0 && c.Connected() && time.Duration(c.since()-c.lastSend.Load()) >= pushed.Ping {
		c.sendPing()
	}
}
