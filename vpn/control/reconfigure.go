package control

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Tunables are the server settings a running server can change
// (Reconfigure): what it pushes, its timers and its admission limits. The
// rest of Config (certificates, wrap key, ciphers, pools) needs a new
// Server.
//
// A session takes the Tunables current when it is created and keeps them:
// the ping and ping-restart the server keeps and reaps by are those it
// pushed to that client, so a reload never reaps a client for following
// what it was told. RenegSec is read when a data key is established, so
// an existing session's next key follows a change.
type Tunables struct {
	Routes      []netip.Prefix
	Ping        time.Duration
	PingRestart time.Duration
	RenegSec    time.Duration // <0 disables
	TunMTU      int

	MaxPeers    int // at most the MaxPeers the server was created with (its pools' size)
	MaxHalfOpen int
	// MaxHalfOpenPerSource and HandshakeTimeout: see Config.
	MaxHalfOpenPerSource int
	HandshakeTimeout     time.Duration
	HandshakeRate        float64
	HandshakeBurst       int

	// Operator policy, read when a client authenticates; Reconfigure also
	// disconnects admitted clients it newly refuses (revoked, disabled).
	// Clients and Revoked must not change after being handed over.
	DuplicateCN bool                         // several sessions per common name (else the newest wins)
	Revoked     func(*x509.Certificate) bool // nil: no revocation list
	Clients     map[string]ClientPolicy      // by certificate common name
	Push        []string                     // options pushed to every client (redirect-gateway, dhcp-option)

	// Auth, when set, checks every client's username and password
	// (auth-user-pass-verify); UsernameAsCN then names the client by its
	// username (username-as-common-name). Past AuthFailLimit failures
	// within AuthFailWindow a source address is refused unchecked.
	Auth           *UserPass
	UsernameAsCN   bool
	AuthFailLimit  int
	AuthFailWindow time.Duration
}

// ClientPolicy is what the operator set for one common name (openvpn's
// client-config-dir file).
type ClientPolicy struct {
	IPv4, IPv6 netip.Addr     // fixed tunnel addresses inside the pools (ifconfig-push)
	Routes     []netip.Prefix // pushed besides Tunables.Routes
	Disabled   bool           // refused with AUTH_FAILED
}

// refusal is why policy t refuses a client with common name cn and
// certificate cert, or "".
func (t *Tunables) refusal(cn string, cert *x509.Certificate) string {
	if t.Revoked != nil && cert != nil && t.Revoked(cert) {
		return "certificate revoked"
	}
	if t.Clients[cn].Disabled {
		return "client disabled"
	}
	return ""
}

func (c *Config) tunables() *Tunables {
	return &Tunables{
		Routes: slices.Clone(c.Routes), Ping: c.Ping, PingRestart: c.PingRestart,
		RenegSec: c.RenegSec, TunMTU: c.TunMTU,
		MaxPeers: c.MaxPeers, MaxHalfOpen: c.MaxHalfOpen,
		MaxHalfOpenPerSource: c.MaxHalfOpenPerSource, HandshakeTimeout: c.HandshakeTimeout,
		HandshakeRate: c.HandshakeRate, HandshakeBurst: c.HandshakeBurst,
		DuplicateCN: c.DuplicateCN, Revoked: c.Revoked, Clients: c.Clients, Push: slices.Clone(c.Push),
		Auth: c.Auth, UsernameAsCN: c.UsernameAsCN, AuthFailLimit: c.AuthFailLimit, AuthFailWindow: c.AuthFailWindow,
	}
}

// Reconfigure applies t to sessions created from now on and to the
// admission limits, leaving established sessions' keys, addresses and
// pushed options alone. Zero fields take NewServer's defaults (MaxPeers:
// the start value). MaxPeers above the server's original MaxPeers is refused: the peer-id and address
// pools were sized for it.
func (s *Server) Reconfigure(t Tunables) error {
	t.Routes = slices.Clone(t.Routes)
	t.Push = slices.Clone(t.Push)
	setDefault(&t.Ping, 10*time.Second)
	setDefault(&t.PingRestart, 60*time.Second)
	setDefault(&t.RenegSec, renegSecDefault)
	setDefault(&t.TunMTU, 1500)
	setDefault(&t.MaxPeers, s.cfg.MaxPeers)
	setDefault(&t.MaxHalfOpen, 256)
	setDefault(&t.MaxHalfOpenPerSource, defaultHalfOpenPerSource)
	setDefault(&t.HandshakeTimeout, defaultHandshakeTimeout)
	setDefault(&t.HandshakeRate, 10)
	setDefault(&t.HandshakeBurst, 100)
	var errs []error
	if t.MaxPeers > s.cfg.MaxPeers {
		errs = append(errs, fmt.Errorf("control: MaxPeers %d above the %d this server was started with (restart to raise it)", t.MaxPeers, s.cfg.MaxPeers))
	}
	if t.Ping < 0 || t.PingRestart < 0 || t.TunMTU < 0 || t.MaxPeers < 0 || t.MaxHalfOpen < 0 || t.MaxHalfOpenPerSource < 0 || t.HandshakeTimeout < 0 || t.HandshakeRate < 0 || t.HandshakeBurst < 0 {
		errs = append(errs, errors.New("control: negative tunable"))
	}
	for _, p := range t.Routes {
		if !p.IsValid() {
			errs = append(errs, errors.New("control: invalid pushed route"))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	s.mu.Lock()
	// The bucket keeps its level, capped at the new depth.
	s.tokens = min(s.tokens, float64(t.HandshakeBurst))
	s.live.Store(&t)
	s.reserve(&t)
	var refused []*session
	var reasons []string
	for _, sess := range s.byPeer {
		if r := t.refusal(sess.commonName, sess.cert); r != "" {
			refused = append(refused, sess)
			reasons = append(reasons, r)
		}
	}
	s.mu.Unlock()
	for i, sess := range refused {
		s.logf("control: %s: %s (%s): disconnecting", sess.remote(), reasons[i], sess.commonName)
		go s.closeWith(sess, msgAuthFailed+","+reasons[i])
	}
	return nil
}

// Tunables returns the settings new sessions get.
func (s *Server) Tunables() Tunables {
	t := *s.live.Load()
	t.Routes = slices.Clone(t.Routes)
	return t
}
