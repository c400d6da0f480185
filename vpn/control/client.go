package control

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/statickey"
)

// ClientConfig configures the OpenVPN client role (the other side of the
// handshake Server implements). ParseProfile fills one from an .ovpn file.
type ClientConfig struct {
	Remote netip.AddrPort // the server's UDP address
	// Local is the address (and port) to send from; zero picks one. Load
	// generators bind many clients to several source addresses.
	Local netip.AddrPort

	Certificate tls.Certificate // client certificate and key
	RootCAs     *x509.CertPool  // CA(s) the server certificate must chain to
	// ServerName, when set, must match the server certificate; otherwise
	// only the chain and the serverAuth key usage are checked (openvpn's
	// remote-cert-tls server).
	ServerName string

	Wrap         WrapMode
	WrapKey      statickey.Key
	AuthDigest   Digest       // tls-auth only
	KeyDirection KeyDirection // tls-auth only; clients conventionally use KeyDir1

	// Ciphers offered in IV_CIPHERS; default AES-256-GCM, AES-128-GCM and
	// CHACHA20-POLY1305 when this build has it.
	Ciphers []vpn.Cipher
	// RenegSec starts a client-initiated renegotiation this long after
	// each key was established; zero never does (the server's reneg-sec
	// still applies).
	RenegSec time.Duration
	// NoReconnect ends the Client instead of reconnecting after
	// ping-restart, a server RESTART or a failed renegotiation.
	NoReconnect bool

	// Username and Password, when set, go in key method 2 (a 2.6
	// client's auth-user-pass).
	Username, Password string

	// Receive, when set, gets every decrypted inner IP packet on the
	// Client's reader goroutine; ip is only valid during the call. When
	// nil, packets queue for Recv (bounded; overflow is counted).
	Receive func(ip []byte)
	// Logf logs connection events; nil discards them.
	Logf func(format string, args ...any)
}

// Client errors.
var (
	ErrNotConnected = errors.New("control: client not connected")
	ErrClientClosed = errors.New("control: client closed")
	errPingRestart  = errors.New("ping-restart: nothing received from the server")
	errRestart      = errors.New("server sent RESTART")
	errHandWindow   = errors.New("hand-window expired")
	errHandSilent   = errors.New("handshake stalled: the server stopped answering")
)

// handshakeSilence ends a connection attempt the server has stopped
// answering before its PUSH_REPLY, sooner than hand-window (60 s) or the
// pre-pull ping-restart (120 s) would. A server that restarts in the middle
// of our handshake (openvpn with explicit-exit-notify keeps answering for
// two seconds while it exits, long enough for a reconnecting client's reset
// and even its TLS handshake) has forgotten the session: its successor
// drops our retransmissions and push requests without a word, and waiting
// out those timers kept site-to-site uplinks down for minutes.
// Retransmissions are 2, 4 and 8 s apart and push requests 5 s, so 10 s of
// silence is at least two unanswered ones. A variable so tests can shorten
// it.
var handshakeSilence = 10 * time.Second

// Client-side timers (common.h PUSH_REQUEST_INTERVAL, ping.h, forward.c
// check_push_request).
const (
	pushRequestDelay       = time.Second
	pushRequestInterval    = 5 * time.Second
	prePullPingRestart     = 120 * time.Second // PRE_PULL_INITIAL_PING_RESTART
	clientTick             = 100 * time.Millisecond
	reconnectBackoffMin    = 250 * time.Millisecond
	reconnectBackoffMax    = 8 * time.Second
	clientRecvQueue        = 256
	clientIVProto          = ivProtoDataV2 | ivProtoRequestPush | ivProtoTLSKeyExp | ivProtoCCExit
	clientControlChunk     = 1000       // TLS bytes per P_CONTROL_V1, below tls-mtu
	packetIDRenegThreshold = 0xFF000000 // PACKET_ID_WRAP_TRIGGER
	// exitDeliveryWait bounds Close's wait for the server's ack of EXIT:
	// past the first retransmission (tls-timeout 2 s).
	exitDeliveryWait = initialRetransmit + time.Second
)

// clientOptionsString is the OCC string a 2.6 client sends (options.c
// options_string).
const clientOptionsString = "V4,dev-type tun,link-mtu 1541,tun-mtu 1500,proto UDPv4,auth SHA1,keysize 128,key-method 2,tls-client"

// ClientStats are a Client's counters.
type ClientStats struct {
	Connects   uint64 // completed handshakes (first connect and reconnects)
	Renegs     uint64 // completed renegotiations
	TxPackets  uint64 // data packets sent (pings included)
	RxPackets  uint64 // data packets decrypted (pings included)
	RxDropped  uint64 // decrypted packets Recv's queue had no room for
	RxBad      uint64 // data packets that failed key lookup, AEAD or replay
	ControlBad uint64 // control packets that failed unwrap, parse or session checks
	LastError  string // why the last connection ended
}

// Client is an OpenVPN 2.6 client: one UDP socket, one control session at
// a time (reconnected on ping-restart or RESTART unless NoReconnect) and a
// data channel that seals and opens P_DATA_V2 with vpn.DataKey.
//
// Threading: Send may be called from any goroutine; Recv from one at a
// time. A reader goroutine owns the socket's receive side, a timer
// goroutine drives retransmission, pings and timeouts, and each key's TLS
// handshake runs on a goroutine of its own. The data path reads the
// current keys through an atomic pointer and takes no lock.
type Client struct {
	cfg   ClientConfig
	conn  *net.UDPConn
	epoch time.Time

	data     atomic.Pointer[clientData]
	lastRecv atomic.Int64 // ns since epoch: last authenticated packet
	lastSend atomic.Int64 // ns since epoch: last data packet sent
	recvq    chan []byte

	connects, renegs, txPackets, rxPackets, rxDropped, rxBad, controlBad atomic.Uint64

	mu      sync.Mutex
	sess    *clientSession
	lastErr error

	// The credentials the next key presents (SetCredentials).
	credMu   sync.Mutex
	cert     tls.Certificate
	username string
	password string

	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// clientData is what the data path needs, replaced as a whole when keys
// change.
type clientData struct {
	peerID uint32
	pushed *Pushed
	tx     *clientDataKey
	rx     [vpn.KeyIDMask + 1]*clientDataKey
}

type clientDataKey struct {
	dk     *vpn.DataKey
	sent   atomic.Uint32 // last packet id sent
	replay replayState   // reader goroutine only
}

var sendBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// Dial connects to cfg.Remote and returns once the first handshake is
// complete and the PUSH_REPLY has been applied (or fails with the reason
// the first attempt failed). The Client then keeps itself connected until
// Close.
func Dial(ctx context.Context, cfg ClientConfig) (*Client, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	first := c.start()
	select {
	case err = <-first:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// newClient checks cfg and opens the socket; start runs the client.
func newClient(cfg ClientConfig) (*Client, error) {
	if len(cfg.Certificate.Certificate) == 0 || cfg.RootCAs == nil {
		return nil, errors.New("control: client certificate and CA are required")
	}
	if !cfg.Remote.IsValid() {
		return nil, errors.New("control: no remote")
	}
	if len(cfg.Ciphers) == 0 {
		cfg.Ciphers = []vpn.Cipher{vpn.AES256GCM, vpn.AES128GCM}
		if _, err := vpn.NewDataKey(&vpn.KeyMaterial{Cipher: vpn.ChaCha20Poly1305}); err == nil {
			cfg.Ciphers = append(cfg.Ciphers, vpn.ChaCha20Poly1305)
		}
	}
	if _, err := newWrapper(cfg.Wrap, &cfg.WrapKey, cfg.AuthDigest, cfg.KeyDirection, false); err != nil {
		return nil, err
	}
	var laddr *net.UDPAddr
	if cfg.Local.IsValid() {
		laddr = net.UDPAddrFromAddrPort(cfg.Local)
	}
	conn, err := net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(cfg.Remote))
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	c := &Client{cfg: cfg, conn: conn, epoch: time.Now(), closed: make(chan struct{}),
		cert: cfg.Certificate, username: cfg.Username, password: cfg.Password}
	if cfg.Receive == nil {
		c.recvq = make(chan []byte, clientRecvQueue)
	}
	return c, nil
}

// SetCredentials makes every key from now on (renegotiations and
// reconnects) present cert and, when the server checks them, username and
// password: a renewed certificate or a changed password takes effect at
// the next renegotiation (Renegotiate) without a reconnect, if the server
// accepts it (openvpn refuses a changed certificate or username
// mid-session; ovfwd does too).
func (c *Client) SetCredentials(cert tls.Certificate, username, password string) {
	c.credMu.Lock()
	c.cert, c.username, c.password = cert, username, password
	c.credMu.Unlock()
}

func (c *Client) credentials() (cert tls.Certificate, username, password string) {
	c.credMu.Lock()
	defer c.credMu.Unlock()
	return c.cert, c.username, c.password
}

// Renegotiate starts a client-initiated renegotiation now; it reports
// false when not connected or one is already in flight.
func (c *Client) Renegotiate() bool {
	s := c.session()
	if s == nil || !c.Connected() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.primary == nil || !s.primary.established {
		return false
	}
	s.renegAt = time.Now() // the timer starts it on its next tick
	return true
}

// SendControl writes msg as one control-channel message (NUL-terminated)
// on the newest key, as openvpn's management send-cc-message does; the
// server ignores (and counts) messages it does not know.
func (c *Client) SendControl(msg string) error {
	s := c.session()
	if s == nil || !c.Connected() {
		return ErrNotConnected
	}
	s.sendText(msg)
	return nil
}

// start runs the client's goroutines; the first connection's result
// goes to the channel it returns.
func (c *Client) start() <-chan error {
	first := make(chan error, 1)
	c.wg.Add(3)
	go c.readLoop()
	go c.timerLoop()
	go c.run(first)
	return first
}

func (c *Client) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf(format, args...)
	}
}

func (c *Client) since() int64 { return int64(time.Since(c.epoch)) }

// LocalAddr is the client's UDP address.
func (c *Client) LocalAddr() netip.AddrPort { return c.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Pushed returns the current connection's PUSH_REPLY, or nil while the
// client is not connected.
func (c *Client) Pushed() *Pushed {
	if d := c.data.Load(); d != nil {
		return d.pushed
	}
	return nil
}

// Connected reports whether the data channel is up.
func (c *Client) Connected() bool { return c.data.Load() != nil }

// Stats returns the client's counters.
func (c *Client) Stats() ClientStats {
	c.mu.Lock()
	var last string
	if c.lastErr != nil {
		last = c.lastErr.Error()
	}
	c.mu.Unlock()
	return ClientStats{
		Connects: c.connects.Load(), Renegs: c.renegs.Load(),
		TxPackets: c.txPackets.Load(), RxPackets: c.rxPackets.Load(),
		RxDropped: c.rxDropped.Load(), RxBad: c.rxBad.Load(), ControlBad: c.controlBad.Load(),
		LastError: last,
	}
}

// Send seals one inner IP packet (or any payload; the server decides what
// it accepts) and sends it to the server.
func (c *Client) Send(ip []byte) error {
	d := c.data.Load()
	if d == nil {
		return ErrNotConnected
	}
	k := d.tx
	id := k.sent.Add(1)
	if id == 0 {
		return errors.New("control: data packet id exhausted")
	}
	bp := sendBufs.Get().(*[]byte)
	pkt := k.dk.Seal((*bp)[:0], d.peerID, id, ip)
	_, err := c.conn.Write(pkt)
	if cap(pkt) <= cap(*bp) {
		sendBufs.Put(bp)
	}
	if err != nil {
		return err
	}
	c.txPackets.Add(1)
	c.lastSend.Store(c.since())
	return nil
}

// Recv returns the next decrypted inner packet (not keepalive pings). It
// is only usable when ClientConfig.Receive is nil.
func (c *Client) Recv(ctx context.Context) ([]byte, error) {
	if c.recvq == nil {
		return nil, errors.New("control: client delivers to ClientConfig.Receive")
	}
	select {
	case p := <-c.recvq:
		return p, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, ErrClientClosed
	}
}

// Close sends EXIT on the control channel (cc-exit), stops the client and
// waits for its goroutines.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		s := c.sess
		c.mu.Unlock()
		if s != nil && c.data.Load() != nil {
			s.sendText(msgExit)
			// Like openvpn's delayed exit after EXIT: stay until the server
			// acked it (one retransmission fits in the bound).
			s.waitDelivered(exitDeliveryWait)
		}
		close(c.closed)
		if s != nil {
			s.end(ErrClientClosed)
		}
		c.conn.Close()
	})
	c.wg.Wait()
	return nil
}

// Drop stops the client without telling the server (no EXIT), as a
// crashed or unplugged client would; the server must reap it by
// ping-restart. For tests and load generators.
func (c *Client) Drop() {
	c.closeOnce.Do(func() {
		close(c.closed)
		if s := c.session(); s != nil {
			s.end(ErrClientClosed)
		}
		c.conn.Close()
	})
	c.wg.Wait()
}

// Done is closed when the client stops (Close, or a fatal error with
// NoReconnect or AUTH_FAILED).
func (c *Client) Done() <-chan struct{} { return c.closed }

// Err is why the last connection ended (nil while the first one lasts).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

func (c *Client) session() *clientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

// run connects, waits for the connection to end and reconnects with
// backoff until Close. The first attempt's result goes to first.
func (c *Client) run(first chan<- error) {
	defer c.wg.Done()
	backoff := reconnectBackoffMin
	for attempt := 0; ; attempt++ {
		s := newClientSession(c)
		c.mu.Lock()
		c.sess = s
		c.mu.Unlock()
		c.lastRecv.Store(c.since())
		err := s.connect()
		if err == nil {
			c.connects.Add(1)
			backoff = reconnectBackoffMin
			if attempt == 0 {
				first <- nil
			}
			c.logf("control client: %v: connected, peer-id %d, %v", c.cfg.Remote, c.data.Load().peerID, c.data.Load().pushed.IPv4)
			<-s.done
			err = s.err()
		}
		c.data.Store(nil)
		s.shutdown()
		c.mu.Lock()
		c.lastErr = err
		c.mu.Unlock()
		if attempt == 0 && c.connects.Load() == 0 {
			first <- err
			return
		}
		select {
		case <-c.closed:
			return
		default:
		}
		var fatal *fatalError
		if c.cfg.NoReconnect || errors.As(err, &fatal) {
			c.logf("control client: %v: stopping: %v", c.cfg.Remote, err)
			c.closeOnce.Do(func() { close(c.closed); c.conn.Close() })
			return
		}
		c.logf("control client: %v: reconnecting in %v: %v", c.cfg.Remote, backoff, err)
		select {
		case <-c.closed:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, reconnectBackoffMax)
	}
}

// fatalError ends the client instead of reconnecting (AUTH_FAILED, HALT).
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return "control: " + e.msg }

func (c *Client) readLoop() {
	defer c.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, err := c.conn.Read(buf)
		if err != nil {
			select {
			case <-c.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// ICMP port unreachable surfaces as ECONNREFUSED on a
			// connected socket while the server is down: keep reading.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if n == 0 {
			continue
		}
		pkt := buf[:n]
		switch pkt[0] >> opShift {
		case opDataV2:
			c.handleData(pkt)
		case opDataV1:
			c.rxBad.Add(1)
		default:
			if s := c.session(); s == nil || !s.handle(pkt) {
				c.controlBad.Add(1)
			}
		}
	}
}

// handleData opens one P_DATA_V2 packet. pkt has spare capacity for Open.
func (c *Client) handleData(pkt []byte) {
	d := c.data.Load()
	if d == nil {
		c.rxBad.Add(1)
		return
	}
	k := d.rx[pkt[0]&keyIDMask]
	if k == nil {
		c.rxBad.Add(1)
		return
	}
	plain, id, err := k.dk.Open(pkt)
	if err != nil || !k.replay.check(replayID(id, 0), time.Now()) { // short form: no time
		c.rxBad.Add(1)
		return
	}
	c.rxPackets.Add(1)
	c.lastRecv.Store(c.since())
	if len(plain) == len(vpn.PingMagic) && [16]byte(plain) == vpn.PingMagic {
		return
	}
	if c.cfg.Receive != nil {
		c.cfg.Receive(plain)
		return
	}
	select {
	case c.recvq <- append([]byte(nil), plain...):
	default:
		c.rxDropped.Add(1)
	}
}

func (c *Client) timerLoop() {
	defer c.wg.Done()
	t := time.NewTicker(clientTick)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case now := <-t.C:
			if s := c.session(); s != nil {
				s.tick(now)
			}
		}
	}
}

// sendPing sends a keepalive when nothing was sent for the pushed ping
// interval.
func (c *Client) sendPing() { _ = c.Send(vpn.PingMagic[:]) }

// install publishes the data keys of a newly established key: km becomes
// the transmit key, and the previous transmit key keeps receiving (the lame
// duck, ssl.c tls_select_encryption_key).
func (c *Client) install(pushed *Pushed, km *vpn.KeyMaterial) error {
	dk, err := vpn.NewDataKey(km)
	if err != nil {
		return err
	}
	nk := &clientDataKey{dk: dk}
	nd := &clientData{peerID: pushed.PeerID, pushed: pushed, tx: nk}
	if old := c.data.Load(); old != nil {
		nd.rx[old.tx.dk.KeyID()] = old.tx
	}
	nd.rx[km.KeyID] = nk
	c.data.Store(nd)
	return nil
}
