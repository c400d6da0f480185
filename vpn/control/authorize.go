package control

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/hooks"
)

// authorize checks the first key's client: cipher negotiation, peer id and
// addresses. A non-empty result is the AUTH_FAILED reason.
func (s *session) authorize(ckm *keyMethod2, cs *tls.ConnectionState) string {
	info := parsePeerInfo(ckm.peerInfo)
	var names []string
	for _, c := range s.srv.cfg.Ciphers {
		names = append(names, c.String())
	}
	chosen := negotiateCipher(names, info.Ciphers)
	if chosen == "" {
		return "no common data cipher (server: " + strings.Join(names, ":") + ")"
	}
	var cipher vpn.Cipher
	for _, c := range s.srv.cfg.Ciphers {
		if c.String() == chosen {
			cipher = c
		}
	}
	// openvpn 2.6 "compress migrate": a client whose OCC string says
	// comp-lzo is moved to stub-v2 framing, or kept on "comp-lzo no" when it
	// cannot do stub-v2 (multi.c multi_client_set_protocol_options, comp.h).
	comp := vpn.CompNone
	if strings.Contains(ckm.options+",", ",comp-lzo,") {
		comp = vpn.CompLZO
		if info.CompStubV2 {
			comp = vpn.CompStubV2
		}
	}
	cn := ""
	var cert *x509.Certificate
	if len(cs.PeerCertificates) > 0 {
		cert = cs.PeerCertificates[0]
		cn = cert.Subject.CommonName
	}
	srv := s.srv
	t := srv.live.Load()
	certCN, user, group := cn, "", ""
	if t.Auth != nil {
		var reason string
		user, group, reason = s.checkUserPass(t, ckm, cn)
		if reason != "" {
			return reason
		}
		if t.UsernameAsCN {
			cn = user
		}
	} else if cert == nil {
		return "client certificate required"
	}
	if reason := t.refusal(cn, cert); reason != "" {
		if reason == "certificate revoked" {
			srv.event("revoked", "src", s.remote(), "cn", cn, "serial", cert.SerialNumber.String())
		}
		return reason
	}
	// Without duplicate_cn a name has one session: the newest, as in
	// openvpn (multi.c multi_delete_dup), so a reconnecting laptop is never
	// locked out by its own stale session.
	if !t.DuplicateCN && cn != "" {
		srv.mu.Lock()
		old := srv.sameName(cn, s)
		srv.mu.Unlock()
		for _, o := range old {
			srv.logf("control: %s: %q connected again from %s; dropping its previous session", o.remote(), cn, s.remote())
			srv.teardown(o)
		}
	}
	id, v4, v6, err := srv.admit(s, cn, cert)
	if err != nil {
		return err.Error()
	}
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		srv.release(id, v4, v6)
		return "session closed"
	}
	s.hasPeerID, s.peerID, s.vpn4, s.vpn6 = true, id, v4, v6
	s.certCN, s.username, s.group = certCN, user, group
	s.info, s.cipher, s.compression = info, cipher, comp
	s.useEKM = info.Proto&ivProtoTLSKeyExp != 0
	s.peerInfo = ckm.peerInfo
	s.mu.Unlock()
	if h := srv.cfg.Hooks; h != nil && len(h.ClientConnect) > 0 {
		return s.clientConnect(h)
	}
	return ""
}

// clientConnect runs the client-connect command for an admitted client
// and applies its configuration file; a non-empty result refuses the
// client, as openvpn's failed client-connect does (multi.c
// multi_connection_established: AUTH_FAILED). The session keeps its peer
// id and addresses meanwhile; teardown returns them.
func (s *session) clientConnect(h *hooks.Hooks) string {
	srv := s.srv
	start := time.Now()
	s.mu.Lock()
	c := s.hookClientLocked()
	s.mu.Unlock()
	d, err := h.RunConnect(context.Background(), &c)
	if err != nil {
		srv.logf("control: %s: client-connect for %q failed after %v: %v", s.remote(), c.CommonName, time.Since(start).Round(time.Millisecond), err)
		return "client-connect failed"
	}
	if d.Disable {
		srv.logf("control: %s: client-connect disabled %q", s.remote(), c.CommonName)
		return "client disabled"
	}
	if err := srv.readdress(s, d.IPv4, d.IPv6); err != nil {
		srv.logf("control: %s: client-connect for %q: %v", s.remote(), c.CommonName, err)
		return "client-connect failed"
	}
	s.mu.Lock()
	s.dyn = d
	s.mu.Unlock()
	return ""
}

// hookClientLocked is what the hooks are told about the session. Called
// with mu held.
func (s *session) hookClientLocked() hooks.Client {
	c := hooks.Client{CommonName: s.commonName, Username: s.username, Real: s.addr, VPNIPv4: s.vpn4, VPNIPv6: s.vpn6,
		Cert: s.cert, Since: s.created, PeerInfo: s.peerInfo}
	if p := s.srv.pool4; p != nil {
		c.Bits4 = p.Prefix().Bits()
	}
	if p := s.srv.pool6; p != nil {
		c.Bits6 = p.Prefix().Bits()
	}
	return c
}

// reauthorize checks a renegotiation's client as openvpn does
// (ssl_verify.c verify_final_auth_checks, tls_lock_common_name,
// tls_lock_cert_hash_set, verify_user_pass): the certificate must be the
// one the session began with (so its common name too), it must not be
// revoked or disabled now, and with Auth the username must be the same
// and its password pass the command again. A non-empty result refuses it.
func (s *session) reauthorize(ckm *keyMethod2, cs *tls.ConnectionState) string {
	var cert *x509.Certificate
	cn := ""
	if len(cs.PeerCertificates) > 0 {
		cert = cs.PeerCertificates[0]
		cn = cert.Subject.CommonName
	}
	s.mu.Lock()
	first, firstCN, name, user := s.cert, s.certCN, s.commonName, s.username
	s.mu.Unlock()
	t := s.srv.live.Load()
	switch {
	case t.Revoked != nil && cert != nil && t.Revoked(cert):
		return fmt.Sprintf("certificate of %q (serial %s) is revoked", cn, cert.SerialNumber)
	case cn != firstCN:
		return fmt.Sprintf("common name changed from %q to %q", firstCN, cn)
	case (cert == nil) != (first == nil) || cert != nil && !bytes.Equal(cert.Raw, first.Raw):
		return fmt.Sprintf("certificate of %q changed", cn)
	case t.Clients[name].Disabled:
		return "client disabled"
	}
	if t.Auth == nil {
		return ""
	}
	if ckm.username != user {
		return fmt.Sprintf("username changed from %q", user)
	}
	_, _, reason := s.checkUserPass(t, ckm, cn)
	return reason
}

// maxUsername bounds a username (openvpn's USER_PASS_LEN is 128 in most
// builds); longer ones are refused before any command runs.
const maxUsername = 128

// checkUserPass runs t.Auth for the client's key method 2 credentials;
// a non-empty reason refuses it, group is the command's (VerifyGroup).
// The password never reaches a log.
func (s *session) checkUserPass(t *Tunables, ckm *keyMethod2, cn string) (user, group, reason string) {
	srv, src, now := s.srv, s.remote(), time.Now()
	user = ckm.username
	if !srv.fails.begin(src.Addr(), t.AuthFailLimit, t.AuthFailWindow, now) {
		srv.drops.add(DropLoginLimited)
		srv.logf("control: %s: too many failed or unfinished logins; refused without checking", src)
		// TEMP: a stock client backs off and retries instead of exiting
		// (push.c receive_auth_failed).
		return user, "", "TEMP:too many failed logins, try again later"
	}
	failed := true
	defer func() { srv.fails.end(src.Addr(), failed, t.AuthFailWindow, time.Now()) }()
	switch {
	case user == "" || ckm.password == "":
		reason = "username and password required"
	case len(user) > maxUsername || strings.ContainsFunc(user, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ',' }):
		reason = "bad username"
	}
	if reason == "" {
		start := time.Now()
		g, err := t.Auth.VerifyGroup(context.Background(), AuthRequest{Username: user, Password: ckm.password, CommonName: cn, Source: src, PeerInfo: ckm.peerInfo})
		if err == nil {
			srv.logf("control: %s: user %q authenticated (%v)", src, user, time.Since(start).Round(time.Millisecond))
			failed = false
			return user, g, ""
		}
		reason = err.Error()
	}
	srv.logf("control: %s: user %q: %s", src, user, reason)
	return user, "", reason
}

// authFailed refuses the client: AUTH_FAILED,reason now and again for
// each PUSH_REQUEST, and the session ends 5 s later (openvpn's
// scheduled exit, so the reliable layer can deliver the message). No peer,
// key or address is ever installed for it.
func (s *session) authFailed(ks *keyState, reason, cn, user string, buf []byte) {
	s.srv.event("auth_failed", "src", s.remote(), "cn", cn, "user", user, "reason", reason)
	s.srv.drops.add(DropAuthFailed)
	msg := append([]byte(msgAuthFailed+","+reason), 0)
	s.mu.Lock()
	s.exitAt = time.Now().Add(5 * time.Second)
	s.mu.Unlock()
	if _, err := ks.tls.Write(msg); err != nil {
		return
	}
	for {
		n, err := ks.tls.Read(buf)
		if err != nil {
			return
		}
		if bytes.Contains(buf[:n], []byte(msgPushRequest)) {
			if _, err := ks.tls.Write(msg); err != nil {
				return
			}
		}
	}
}

// certName is the common name of the client's certificate, "" without one.
func certName(cs *tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].Subject.CommonName
}
