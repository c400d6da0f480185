package control

import "time"

// Opcodes (ssl_pkt.h). The first byte of every packet is
// opcode<<3 | key_id.
const (
	opControlSoftResetV1      = 3 // P_CONTROL_SOFT_RESET_V1
	opControlV1               = 4 // P_CONTROL_V1
	opAckV1                   = 5 // P_ACK_V1
	opDataV1                  = 6 // P_DATA_V1
	opControlHardResetClient2 = 7 // P_CONTROL_HARD_RESET_CLIENT_V2
	opControlHardResetServer2 = 8 // P_CONTROL_HARD_RESET_SERVER_V2
	opDataV2                  = 9 // P_DATA_V2
	opControlHardResetClient3 = 10
	opControlWKCV1            = 11

	opShift   = 3
	keyIDMask = 0x07
)

// Reliability layer (reliable.h, ssl_pkt.h, ssl.h, common.h).
const (
	reliableSendWindow  = 6  // TLS_RELIABLE_N_SEND_BUFFERS
	reliableRecvWindow  = 12 // TLS_RELIABLE_N_REC_BUFFERS
	maxAcksParsed       = 8  // RELIABLE_ACK_SIZE: more rejects the packet
	maxAcksPiggyback    = 4  // CONTROL_SEND_ACK_MAX
	maxAcksPerAck       = 8
	fastRetransmitAcks  = 3               // N_ACK_RETRANSMIT
	initialRetransmit   = 2 * time.Second // tls-timeout
	maxRetransmit       = 16 * time.Second
	handWindow          = 60 * time.Second // hand-window
	tlsMTU              = 1250             // TLS_MTU_DEFAULT, incl. IP+UDP
	ipv6UDPHeaders      = 48
	tlsChannelBufSize   = 2048 // one control message must fit one record of this size
	sessionIDLen        = 8
	replayIDLen         = 8 // long-form packet-id: counter(4) + time(4)
	msgIDLen            = 4
	replayWindow        = 64               // replay-window default
	replayBacktrackTime = 15 * time.Second // replay-window … 15
)

// What one session may make the server hold. OpenVPN's reliability layer
// has fixed buffers and stops acknowledging when they are full
// (reliable.c reliable_get_buf, reliable_can_get); crypto/tls reads a byte
// stream, so the stream behind the receive window gets a bound of its own.
const (
	// maxControlPayload bounds one P_CONTROL_V1 payload: a 2.6 peer sends
	// at most tls-mtu (1250 by default) per packet.
	maxControlPayload = tlsChannelBufSize
	// streamBufferLimit is the unread bytes a key's stream may hold; past
	// it new messages are neither taken nor acknowledged, so the client
	// retransmits them once the reader catches up.
	streamBufferLimit = 32 << 10
	// handshakeByteLimit is what a key may send before it is up (TLS,
	// key method 2, and everything after a refusal): a TLS handshake with
	// a long chain and key method 2 with its 4 KiB strings are well under
	// it.
	handshakeByteLimit = 64 << 10
	// sendQueueLimit is the messages a key may leave unacknowledged
	// (queued, not only in flight): a client that never acknowledges
	// cannot make the server queue its writes without bound.
	sendQueueLimit = 64
)

// tls-crypt v1 (tls_crypt.h).
const (
	tlsCryptTagLen    = 32
	tlsCryptHeaderLen = 1 + sessionIDLen + replayIDLen + tlsCryptTagLen // 49
)

// Key method 2 and key derivation (ssl.c key_method_2_write,
// generate_key_expansion; ssl_backend.h EXPORT_KEY_DATA_LABEL).
const (
	keyMethodV2       = 2
	km2PreMasterLen   = 48
	km2RandomLen      = 32
	km2MaxOptionsLen  = 512
	km2MaxStringLen   = 4096 // USER_PASS_LEN in Debian's PKCS#11 build
	ekmLabelDataKeys  = "EXPORTER-OpenVPN-datakeys"
	ekmLen            = 256
	prfMasterLabel    = "OpenVPN master secret"
	prfExpansionLabel = "OpenVPN key expansion"
	prfMasterLen      = 48
)

// IV_PROTO bits (ssl.h IV_PROTO_*).
const (
	ivProtoDataV2      = 1 << 1
	ivProtoRequestPush = 1 << 2
	ivProtoTLSKeyExp   = 1 << 3
	ivProtoCCExit      = 1 << 7
)

// Control text messages (push.c, forward.c send_control_channel_string).
const (
	msgPushRequest = "PUSH_REQUEST"
	msgPushReply   = "PUSH_REPLY"
	msgAuthFailed  = "AUTH_FAILED"
	msgRestart     = "RESTART"
	msgExit        = "EXIT"
	pushBundleSize = 1024 // PUSH_BUNDLE_SIZE
)

// serverOptionsString is the OCC string a 2.6.14 server sends (options.c
// options_string).
const serverOptionsString = "V4,dev-type tun,link-mtu 1541,tun-mtu 1500,proto UDPv4,auth SHA1,keysize 128,key-method 2,tls-server"

// Stateless handshake cookie (ssl_pkt.c calculate_session_id_hmac): time
// quantum (hand-window+1)/2.
const cookieQuantum = 30 * time.Second

// Per-source admission defaults (Config.MaxHalfOpenPerSource,
// HandshakeTimeout).
const (
	defaultHalfOpenPerSource = 16
	defaultHandshakeTimeout  = 10 * time.Second
)

// Peer ids are 24 bits; 0xFFFFFF means "undefined".
const maxPeerID = 0xFFFFFE

// Renegotiation (ssl.c tls_process; options.c defaults).
const (
	renegSecDefault = 3600 * time.Second
	tranWindow      = 3600 * time.Second
)
