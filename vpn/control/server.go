package control

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/hooks"
	"github.com/ovfwd/ovfwd/vpn/statickey"
)

// Config is the server's control-plane configuration.
type Config struct {
	Certificate tls.Certificate // server certificate and key
	ClientCAs   *x509.CertPool  // CA(s) client certificates must chain to

	Wrap         WrapMode
	WrapKey      statickey.Key // tls-crypt / tls-auth key file content
	AuthDigest   Digest        // tls-auth only (--auth)
	KeyDirection KeyDirection  // tls-auth only; the server normally uses KeyDir0

	// Ciphers in server preference order; default AES-256-GCM,
	// AES-128-GCM, CHACHA20-POLY1305.
	Ciphers []vpn.Cipher

	Pool4  netip.Prefix   // IPv4 tunnel subnet (server takes .1); optional
	Pool6  netip.Prefix   // IPv6 tunnel subnet (server takes ::1); optional
	Routes []netip.Prefix // pushed route / route-ipv6

	Ping        time.Duration // pushed ping (default 10 s)
	PingRestart time.Duration // pushed ping-restart (default 60 s); the server reaps after twice this
	RenegSec    time.Duration // server-initiated renegotiation (default 3600 s; <0 disables)
	TunMTU      int           // pushed tun-mtu (default 1500)

	MaxPeers    int // default 1024
	MaxHalfOpen int // sessions not yet through key method 2; default 256
	// MaxHalfOpenPerSource bounds those from one IPv4 address or IPv6
	// /64; default 16. Logins in progress are half-open, so it bounds a
	// source's share of the auth command too.
	MaxHalfOpenPerSource int
	// HandshakeTimeout is the time a key's TLS handshake may take from
	// its first packet; default 10 s.
	HandshakeTimeout time.Duration
	HandshakeRate    float64 // reset replies per second; default 10 (openvpn connect-freq 100/10s)
	HandshakeBurst   int     // default 100

	// Hooks are the operator's client-connect, client-disconnect and
	// learn-address commands; the server runs client-connect (a failure
	// refuses the client), the DataPlane the others. Nil = none.
	Hooks *hooks.Hooks

	// Operator policy; see Tunables.
	DuplicateCN    bool
	Revoked        func(*x509.Certificate) bool
	Clients        map[string]ClientPolicy
	Push           []string
	Auth           *UserPass
	UsernameAsCN   bool
	AuthFailLimit  int
	AuthFailWindow time.Duration
	// VerifyClientCert is "require" (default), "optional" or "none"
	// (openvpn's verify-client-cert); without a required certificate Auth
	// must be set.
	VerifyClientCert string

	// TLSCryptV2, when set, is the tls-crypt-v2 server key: every client
	// brings its own tls-crypt key, wrapped with it (Wrap and WrapKey are
	// then unused). Only clients that support early negotiation (2.6 and
	// later) are served, so a reset never creates state.
	TLSCryptV2 *TLSCryptV2ServerKey

	// PoolPersist is a file that keeps each common name's pool addresses
	// across restarts (openvpn's ifconfig-pool-persist); "" = off.
	PoolPersist string

	// Send transmits one UDP payload. Serve sets it when nil.
	Send func(dst netip.AddrPort, pkt []byte) error
	// SendPing asks the data plane to seal and send a keepalive ping.
	SendPing func(peerID uint32)
	// DataPacket receives P_DATA_V1/V2 packets that reach the control
	// socket (kernel-socket mode); nil drops and counts them. pkt is only
	// valid during the call.
	DataPacket func(src netip.AddrPort, pkt []byte)
	// Logf logs control-plane events; nil discards them.
	Logf func(format string, args ...any)
	// Event reports what an operator alerts on (auth_failed, revoked,
	// killed) as an event name and key-value pairs, instead of a Logf
	// line; nil falls back to Logf.
	Event func(event string, kv ...any)
}

// Server is the OpenVPN server role of the control channel.
//
// Threading: HandlePacket may be called from any goroutine (Serve calls it
// from its read loop); each session's TLS handshakes run on goroutines of
// their own and a timer goroutine drives retransmission, renegotiation
// and reaping. Lock order: Server.mu before session.mu, never the reverse.
type Server struct {
	cfg     Config
	live    atomic.Pointer[Tunables] // what Reconfigure changes; see Tunables
	dp      DataPlane
	wrap    *wrapper
	tlsConf *tls.Config
	cookie  [32]byte

	mu       sync.Mutex
	sessions map[netip.AddrPort]*session
	byPeer   map[uint32]*session // admitted sessions by peer id
	halfOpen int
	// halfOpenBy counts half-open sessions per source (session.source).
	halfOpenBy map[netip.Prefix]int
	peerIDs    *indexPool
	pool4      *Pool
	pool6      *Pool
	tokens     float64
	tokensAt   time.Time
	conn       net.PacketConn
	closed     bool
	leases     map[string]lease // pool addresses by common name (PoolPersist)
	// fixedInUse are fixed addresses outside the pools' dynamic range
	// that a session holds.
	fixedInUse map[netip.Addr]bool
	fails      failLimiter // failed logins by source (Tunables.AuthFailLimit)
	dirty      bool        // leases changed since last written

	draining atomic.Bool // see SetDraining

	rto   time.Duration // tests shorten the retransmit timeout
	drops dropCounters
	done  chan struct{}
	wg    sync.WaitGroup
}

// NewServer validates cfg and starts the timer goroutine.
func NewServer(cfg Config, dp DataPlane) (*Server, error) {
	if dp == nil {
		return nil, errors.New("control: nil DataPlane")
	}
	if len(cfg.Certificate.Certificate) == 0 || cfg.ClientCAs == nil {
		return nil, errors.New("control: certificate and client CAs are required")
	}
	clientAuth := tls.RequireAndVerifyClientCert
	switch cfg.VerifyClientCert {
	case "", "require":
	case "optional":
		clientAuth = tls.VerifyClientCertIfGiven
	case "none":
		clientAuth = tls.NoClientCert
	default:
		return nil, fmt.Errorf("control: VerifyClientCert %q", cfg.VerifyClientCert)
	}
	if clientAuth != tls.RequireAndVerifyClientCert && cfg.Auth == nil {
		return nil, errors.New("control: without a required client certificate a username/password check is needed")
	}
	if len(cfg.Ciphers) == 0 {
		cfg.Ciphers = []vpn.Cipher{vpn.AES256GCM, vpn.AES128GCM, vpn.ChaCha20Poly1305}
	}
	setDefault(&cfg.Ping, 10*time.Second)
	setDefault(&cfg.PingRestart, 60*time.Second)
	setDefault(&cfg.RenegSec, renegSecDefault)
	setDefault(&cfg.TunMTU, 1500)
	setDefault(&cfg.MaxPeers, 1024)
	setDefault(&cfg.MaxHalfOpen, 256)
	setDefault(&cfg.MaxHalfOpenPerSource, defaultHalfOpenPerSource)
	setDefault(&cfg.HandshakeTimeout, defaultHandshakeTimeout)
	setDefault(&cfg.HandshakeRate, 10)
	setDefault(&cfg.HandshakeBurst, 100)
	if cfg.MaxPeers > maxPeerID+1 {
		return nil, errors.New("control: MaxPeers above the 24-bit peer-id space")
	}
	if cfg.TLSCryptV2 != nil {
		cfg.Wrap, cfg.WrapKey = WrapTLSCrypt, statickey.Key{} // per-session keys; this one only sizes packets
	}
	w, err := newWrapper(cfg.Wrap, &cfg.WrapKey, cfg.AuthDigest, cfg.KeyDirection, true)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, dp: dp, wrap: w,
		sessions:   map[netip.AddrPort]*session{},
		byPeer:     map[uint32]*session{},
		halfOpenBy: map[netip.Prefix]int{},
		peerIDs:    newIndexPool(cfg.MaxPeers),
		tokens:     float64(cfg.HandshakeBurst),
		done:       make(chan struct{}),
	}
	s.live.Store(cfg.tunables())
	if cfg.Pool4.IsValid() {
		if s.pool4, err = NewPool(cfg.Pool4, cfg.MaxPeers); err != nil {
			return nil, err
		}
	}
	if cfg.Pool6.IsValid() {
		if s.pool6, err = NewPool(cfg.Pool6, cfg.MaxPeers); err != nil {
			return nil, err
		}
	}
	if _, err := rand.Read(s.cookie[:]); err != nil {
		return nil, err
	}
	s.leases, s.fixedInUse = map[string]lease{}, map[netip.Addr]bool{}
	if cfg.PoolPersist != "" {
		data, err := os.ReadFile(cfg.PoolPersist)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("control: pool_persist: %w", err)
		}
		var bad int
		s.leases, bad = parseLeases(data)
		if bad > 0 {
			s.logf("control: %s: skipped %d lines that do not parse", cfg.PoolPersist, bad)
		}
	}
	s.reserve(s.live.Load())
	s.tlsConf = &tls.Config{
		MinVersion:                  tls.VersionTLS12,
		Certificates:                []tls.Certificate{cfg.Certificate},
		ClientAuth:                  clientAuth,
		ClientCAs:                   cfg.ClientCAs,
		SessionTicketsDisabled:      true,
		DynamicRecordSizingDisabled: true, // one Write = one record: ssl.c key_method_2_read takes one record
	}
	s.wg.Add(1)
	go s.timerLoop()
	return s, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// event reports an operator-facing event; without cfg.Event it becomes a
// Logf line with the same pairs.
func (s *Server) event(name string, kv ...any) {
	if s.cfg.Event != nil {
		s.cfg.Event(name, kv...)
		return
	}
	s.logf("control: event=%s %v", name, kv)
}

// Drops returns the drop counters by reason name.
func (s *Server) Drops() map[string]uint64 {
	m := map[string]uint64{}
	for r := DropReason(0); r < dropReasons; r++ {
		if v := s.drops[r].Load(); v != 0 {
			m[r.String()] = v
		}
	}
	return m
}

// Drop returns one drop counter.
func (s *Server) Drop(r DropReason) uint64 { return s.drops[r].Load() }

// Serve reads control packets from conn until it fails or Close is called.
// Close closes conn.
func (s *Server) Serve(conn net.PacketConn) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.conn = conn
	if s.cfg.Send == nil {
		s.cfg.Send = func(dst netip.AddrPort, pkt []byte) error {
			_, err := conn.WriteTo(pkt, net.UDPAddrFromAddrPort(dst))
			return err
		}
	}
	s.mu.Unlock()
	buf := make([]byte, 65536)
	for {
		n, addr, err := conn.ReadFrom(buf)
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		ua, ok := addr.(*net.UDPAddr)
		if !ok {
			continue
		}
		s.HandlePacket(ua.AddrPort(), buf[:n])
	}
}

func (s *Server) send(dst netip.AddrPort, pkt []byte) {
	if s.cfg.Send != nil {
		_ = s.cfg.Send(dst, pkt)
	}
}

// HandlePacket processes one UDP payload from src. It does not retain pkt.
func (s *Server) HandlePacket(src netip.AddrPort, pkt []byte) {
	src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	if len(pkt) < 1 {
		s.drops.add(DropShort)
		return
	}
	op := pkt[0] >> opShift
	switch {
	case op == opDataV2 || op == opDataV1:
		if s.cfg.DataPacket == nil {
			s.drops.add(DropDataNoHandler)
			return
		}
		s.cfg.DataPacket(src, pkt)
		return
	case (op == opControlHardResetClient3 || op == opControlWKCV1) && s.cfg.TLSCryptV2 == nil || op < opControlSoftResetV1:
		s.drops.add(DropUnsupported)
		return
	case !isControlOpcode(op):
		s.drops.add(DropOpcode)
		return
	}
	if len(pkt) < 1+sessionIDLen {
		s.drops.add(DropShort)
		return
	}
	// Authenticate before any per-session state exists.
	w := s.wrap
	var v2Key *statickey.Key // the client key a WKc packet carried
	if s.cfg.TLSCryptV2 != nil {
		if w, v2Key = s.v2Wrapper(src, op, &pkt); w == nil {
			return
		}
	}
	rid, body, err := w.unwrap(pkt)
	if err != nil {
		if err == errAuth {
			s.drops.add(DropWrapAuth)
		} else {
			s.drops.add(DropShort)
		}
		return
	}
	rawOp := op
	switch op { // tls-crypt-v2's opcodes are v2's plus the appended WKc
	case opControlHardResetClient3:
		op = opControlHardResetClient2
	case opControlWKCV1:
		op = opControlV1
	}
	p := packet{op: op, keyID: pkt[0] & keyIDMask}
	copy(p.sid[:], pkt[1:])
	if err := p.parseBody(body); err != nil {
		s.drops.add(DropMalformed)
		return
	}
	if p.sid == ([sessionIDLen]byte{}) {
		s.drops.add(DropMalformed)
		return
	}
	now := time.Now()

	s.mu.Lock()
	sess := s.sessions[src]
	s.mu.Unlock()
	if sess != nil && sess.remoteSID == p.sid {
		// Session ids and the address are cleartext: a packet authenticated
		// with another client's tls-crypt-v2 key is not this session's.
		if v2Key != nil && (sess.v2Key == nil || subtle.ConstantTimeCompare(v2Key[:], sess.v2Key[:]) != 1) {
			s.drops.add(DropV2KeyMismatch)
			return
		}
		sess.handle(&p, rid, now)
		return
	}
	// Unknown (address, session id): either a new client's reset, or the
	// packet completing the stateless three-way handshake.
	if op == opControlHardResetClient2 {
		if p.keyID != 0 || p.msgID != 0 {
			s.drops.add(DropMalformed)
			return
		}
		var tlv []byte
		if s.cfg.TLSCryptV2 != nil {
			// A client without early negotiation would need the server to
			// keep its key from this packet on: refused, as openvpn's
			// tls-crypt-v2-force-cookie (mudp.c do_pre_decrypt_check).
			if uint32(rid>>32)&earlyNegMask != earlyNegStart {
				s.drops.add(DropUnsupported)
				return
			}
			tlv = earlyNegTLV
		}
		s.replyReset(src, &p, now, w, tlv)
		return
	}
	if s.cfg.TLSCryptV2 != nil && rawOp != opControlWKCV1 {
		s.drops.add(DropNoSession) // only a WKC_V1 can complete a tls-crypt-v2 handshake
		return
	}
	if (op != opControlV1 && op != opAckV1) || p.keyID != 0 || !p.hasAck(0) {
		s.drops.add(DropNoSession)
		return
	}
	if !s.checkCookie(src, p.sid, p.peerSID, now) {
		s.drops.add(DropBadCookie)
		return
	}
	sess = s.newSession(src, &p, rid, now, sess, w, v2Key)
	if sess != nil {
		sess.handle(&p, rid, now)
	}
}

// cookieFor is the stateless server session id (ssl_pkt.c
// calculate_session_id_hmac, mudp.c do_pre_decrypt_check):
// HMAC-SHA256(secret, quantised time ‖ client address ‖ client sid)[:8].
func (s *Server) cookieFor(src netip.AddrPort, clientSID [sessionIDLen]byte, bucket int64) [sessionIDLen]byte {
	m := hmac.New(sha256.New, s.cookie[:])
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(bucket))
	m.Write(b[:])
	a, _ := src.MarshalBinary()
	m.Write(a)
	m.Write(clientSID[:])
	var sid [sessionIDLen]byte
	copy(sid[:], m.Sum(nil))
	if sid == ([sessionIDLen]byte{}) {
		sid[0] = 1
	}
	return sid
}

func (s *Server) checkCookie(src netip.AddrPort, clientSID, got [sessionIDLen]byte, now time.Time) bool {
	bucket := now.Unix() / int64(cookieQuantum/time.Second)
	for off := int64(-2); off <= 1; off++ {
		want := s.cookieFor(src, clientSID, bucket+off)
		if hmac.Equal(want[:], got[:]) {
			return true
		}
	}
	return false
}

// replyReset answers a client hard reset without keeping state: our
// session id is the cookie, we ack msg 0 and send our own msg 0.
// v2Wrapper picks the tls-crypt-v2 wrapping for a packet: for a V3 reset
// or WKC_V1 the client key unwrapped (and authenticated) from the WKc it
// carries, which it strips from *pkt; for anything else the session's.
// nil means dropped (and counted).
func (s *Server) v2Wrapper(src netip.AddrPort, op uint8, pkt *[]byte) (*wrapper, *statickey.Key) {
	switch op {
	case opControlHardResetClient3, opControlWKCV1:
		inner, wkc, ok := splitWKc(*pkt)
		if !ok {
			s.drops.add(DropMalformed)
			return nil, nil
		}
		kc, _, err := s.cfg.TLSCryptV2.unwrapClientKey(wkc)
		if err != nil {
			s.drops.add(DropWrapAuth)
			return nil, nil
		}
		w, err := newWrapper(WrapTLSCrypt, &kc, 0, 0, true)
		if err != nil {
			s.drops.add(DropWrapAuth)
			return nil, nil
		}
		*pkt = inner
		return w, &kc
	case opControlHardResetClient2:
		s.drops.add(DropUnsupported) // a tls-crypt v1 client
		return nil, nil
	}
	s.mu.Lock()
	sess := s.sessions[src]
	s.mu.Unlock()
	if sess == nil {
		s.drops.add(DropNoSession)
		return nil, nil
	}
	return sess.wrap, nil
}

func (s *Server) replyReset(src netip.AddrPort, p *packet, now time.Time, w *wrapper, payload []byte) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	elapsed := now.Sub(s.tokensAt).Seconds()
	s.tokensAt = now
	t := s.live.Load()
	s.tokens = min(s.tokens+elapsed*t.HandshakeRate, float64(t.HandshakeBurst))
	if s.tokens < 1 {
		s.mu.Unlock()
		s.drops.add(DropRateLimit)
		return
	}
	s.tokens--
	s.mu.Unlock()
	sid := s.cookieFor(src, p.sid, now.Unix()/int64(cookieQuantum/time.Second))
	reply := packet{op: opControlHardResetServer2, nAcks: 1, peerSID: p.sid, payload: payload}
	reply.acks[0] = 0
	rs := replaySender{}
	rid := rs.nextID(now)
	out := w.wrap(nil, opControlHardResetServer2<<opShift, &sid, rid, reply.appendBody(nil))
	s.send(src, out)
}

// saveLeases writes the pool_persist file if it changed.
func (s *Server) saveLeases() {
	s.mu.Lock()
	if !s.dirty || s.cfg.PoolPersist == "" {
		s.mu.Unlock()
		return
	}
	data := formatLeases(s.leases)
	s.dirty = false
	s.mu.Unlock()
	if err := writeFileAtomic(s.cfg.PoolPersist, data); err != nil {
		s.logf("control: pool_persist: %v", err)
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
	}
}

// closeWith tells sess msg (RESTART, HALT, AUTH_FAILED), waits up to a
// second for the client's ack, and removes the session. Its data-plane
// peer goes first, so no packet passes once closeWith starts.
func (s *Server) closeWith(sess *session, msg string) {
	sess.mu.Lock()
	if sess.peerAdded {
		_ = s.dp.RemovePeer(sess.peerID)
		sess.peerAdded = false
	}
	sess.mu.Unlock()
	deliverText([]*session{sess}, msg, 0, time.Second)
	s.teardown(sess)
}

// Kill disconnects the admitted sessions whose common name, real address
// (ip or ip:port) or tunnel address is target, telling each client msg
// first (RESTART: reconnect; HALT: exit), like openvpn's management kill.
// It returns how many it found.
func (s *Server) Kill(target, msg string) int {
	s.mu.Lock()
	var hit []*session
	for _, sess := range s.byPeer {
		sess.mu.Lock()
		match := sess.commonName == target || sess.addr.String() == target || sess.addr.Addr().String() == target ||
			sess.vpn4.IsValid() && sess.vpn4.String() == target || sess.vpn6.IsValid() && sess.vpn6.String() == target
		sess.mu.Unlock()
		if match {
			hit = append(hit, sess)
		}
	}
	s.mu.Unlock()
	for _, sess := range hit {
		sess.mu.Lock()
		cn := sess.commonName
		sess.mu.Unlock()
		s.event("killed", "src", sess.remote(), "cn", cn, "reason", msg)
		go s.closeWith(sess, msg)
	}
	return len(hit)
}

// PeerFloated tells the control plane that the data plane moved peerID to
// a new address after an authenticated data packet from it (multi.c
// multi_process_float): control packets are then expected from there too. It reports
// false if no session has that peer id or another session owns addr.
func (s *Server) PeerFloated(peerID uint32, addr netip.AddrPort) bool {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.byPeer[peerID]
	if _, taken := s.sessions[addr]; taken || sess == nil || sess.removed {
		return false
	}
	sess.mu.Lock()
	old := sess.addr
	sess.addr = addr
	sess.mu.Unlock()
	if s.sessions[old] == sess {
		delete(s.sessions, old)
	}
	s.sessions[addr] = sess
	return true
}

// Renegotiate starts a server-initiated renegotiation of peerID now, e.g.
// when the data plane reports a key wearing out (packet-id near wrap). It
// reports false if the peer is unknown or a renegotiation is in flight.
func (s *Server) Renegotiate(peerID uint32) bool {
	s.mu.Lock()
	sess := s.byPeer[peerID]
	s.mu.Unlock()
	if sess == nil {
		return false
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.dead || !sess.primary.established || !sess.primary.promoted {
		return false
	}
	now := time.Now()
	sess.beginRenegotiation(nextKeyID(sess.primary.id), now)
	sess.flush(now)
	return true
}

// Disconnect removes peerID's session, e.g. when the data plane reports it
// expired (keepalive timeout) or sent an OCC EXIT. It reports whether the
// peer existed.
func (s *Server) Disconnect(peerID uint32) bool {
	s.mu.Lock()
	sess := s.byPeer[peerID]
	s.mu.Unlock()
	if sess == nil {
		return false
	}
	s.teardown(sess)
	return true
}

// Sessions is the number of sessions (half-open included).
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Close tells every established client to reconnect (RESTART), waits
// briefly for the notices to be acknowledged, removes all peers, stops
// the timers and closes the socket Serve was given.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	conn := s.conn
	s.mu.Unlock()
	// Like openvpn's 2 s exit delay: let the reliable layer deliver, on
	// the key the client takes control messages on.
	deliverText(all, msgRestart, time.Second, 2*time.Second)
	for _, sess := range all {
		s.teardown(sess)
	}
	close(s.done)
	s.wg.Wait()
	s.saveLeases()
	if conn != nil {
		return conn.Close()
	}
	return nil
}

func (s *Server) timerLoop() {
	defer s.wg.Done()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			s.saveLeases()
			s.mu.Lock()
			all := make([]*session, 0, len(s.sessions))
			for _, sess := range s.sessions {
				all = append(all, sess)
			}
			s.mu.Unlock()
			for _, sess := range all {
				if reason := sess.tick(now); reason != "" {
					s.logf("control: %s: %s", sess.remote(), reason)
					s.teardown(sess)
				}
			}
		}
	}
}

// String describes the server for logs.
func (s *Server) String() string {
	return fmt.Sprintf("ovfwd control server (%d sessions)", s.Sessions())
}
