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
	dropReasons
)

var dropNames = [dropReasons]string{
	"short", "opcode", "unsupported", "wrap_auth", "malformed", "replay",
	"no_session", "bad_cookie", "rate_limit", "half_open", "max_peers",
	"bad_session_id", "key_id", "recv_window", "data_no_handler", "auth_failed", "draining",
}

func (r DropReason) String() string {
	if r < dropReasons {
		return dropNames[r]
	}
	return "unknown"
}

type dropCounters [dropReasons]atomic.Uint64

func (d *dropCounters) add(r DropReason) { d[r].Add(1) }
