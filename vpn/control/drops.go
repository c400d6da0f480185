package control

import "sync/atomic"

// DropReason says why the control plane discarded a packet.
type DropReason uint8

const (
	DropShort DropReason = iota
	DropOpcode
	DropUnsupported // key-method 1, tls-crypt-v2
	DropWrapAuth    // tls-auth HMAC / tls-crypt tag mismatch
	DropMalformed
	DropReplay
	DropNoSession
	DropBadCookie
	DropRateLimit
	DropHalfOpen
	DropMaxPeers
	DropBadSessionID
	DropKeyID
	DropRecvWindow
	DropDataNoHandler
	DropAuthFailed // a client refused with AUTH_FAILED (any reason)
	DropDraining   // a new client told to reconnect elsewhere (SetDraining)
	// Limits a client holding valid keys can run into (docs/hardening.md).
	DropOversize         // a control payload larger than maxControlPayload
	DropStreamFull       // a message not taken (nor acked): its key's unread stream is full
	DropHandshakeBytes   // a session ended: it sent more than handshakeByteLimit before its key was up
	DropSendQueue        // a session ended: it left more than sendQueueLimit messages unacknowledged
	DropHalfOpenSource   // a new session refused: its source's half-open share is used up
	DropHandshakeTimeout // a session ended: its TLS handshake missed HandshakeTimeout
	DropV2KeyMismatch    // a tls-crypt-v2 packet for a session that began with another client key
	DropRenegRefused     // a renegotiation refused (name, certificate, revocation or login changed)
	DropLoginLimited     // a login refused unchecked: its source's failures plus logins in flight reached the limit
	DropIgnoredText      // an unknown control message from a client
	dropReasons
)

var dropNames = [dropReasons]string{
	"short", "opcode", "unsupported", "wrap_auth", "malformed", "replay",
	"no_session", "bad_cookie", "rate_limit", "half_open", "max_peers",
	"bad_session_id", "key_id", "recv_window", "data_no_handler", "auth_failed", "draining",
	"oversize", "stream_full", "handshake_bytes", "send_queue", "half_open_source", "handshake_timeout",
	"v2_key_mismatch", "reneg_refused", "login_limited", "ignored_text",
}

func (r DropReason) String() string {
	if r < dropReasons {
		return dropNames[r]
	}
	return "unknown"
}

type dropCounters [dropReasons]atomic.Uint64

func (d *dropCounters) add(r DropReason) { d[r].Add(1) }
