package vpn

// Wire constants of the OpenVPN 2.6 data channel, named as in the OpenVPN
// sources (src/openvpn/ssl_pkt.h opcodes; crypto.c openvpn_encrypt_aead).
// All multi-byte fields are big-endian.

// Opcodes: the high 5 bits of a packet's first byte; the low 3 bits are the key_id.
const (
	OpcodeShift = 3
	KeyIDMask   = 0x07

	PControlHardResetClientV1 = 1
	PControlHardResetServerV1 = 2
	PControlSoftResetV1       = 3
	PControlV1                = 4
	PAckV1                    = 5
	PDataV1                   = 6
	PControlHardResetClientV2 = 7
	PControlHardResetServerV2 = 8
	PDataV2                   = 9
	PControlHardResetClientV3 = 10
	PControlWKCV1             = 11
)

// P_DATA_V2 layout (§8.1): op|kid (1), peer-id (3), packet-id (4), tag (16), ciphertext.
const (
	opPeerLen   = 4 // op|kid and the 24-bit peer-id
	packetIDOff = 4 // the explicit part of the nonce
	adLen       = 8 // AEAD additional data: op|kid, peer-id, packet-id
	tagOff      = 8
	TagLen      = 16
	nonceLen    = 12 // packet-id ‖ 8-byte implicit IV

	// DataHeaderLen is the P_DATA_V2 overhead in front of the ciphertext.
	DataHeaderLen = 4 + 4 + 16
)

// PeerIDUndefined is the peer-id that means "none assigned" (MAX_PEER_ID).
const PeerIDUndefined = 0xFFFFFF

// MaxPeerID is the largest peer-id that fits the 24-bit field and is not
// PeerIDUndefined.
const MaxPeerID = PeerIDUndefined - 1

// PacketIDWrapTrigger is where OpenVPN 2.6 starts a renegotiation so a key's
// packet-id never wraps (PACKET_ID_WRAP_TRIGGER, packet_id.h).
const PacketIDWrapTrigger = 0xFF000000

// maxPacketID is the last packet-id a key may send; 0 is never valid.
const maxPacketID = 1<<32 - 1

// PingMagic is the payload of a keepalive ping (ping.c ping_string).
var PingMagic = [16]byte{0x2a, 0x18, 0x7b, 0xf3, 0x64, 0x1e, 0xb4, 0xcb, 0x07, 0xed, 0x2d, 0x0a, 0x98, 0x1f, 0xc7, 0x48}

// OCCMagic starts an OCC message on the data channel (occ.c occ_magic);
// one opcode byte follows it.
var OCCMagic = [16]byte{0x28, 0x7f, 0x34, 0x6b, 0xd4, 0xef, 0x7a, 0x81, 0x2d, 0x56, 0xb8, 0xd3, 0xaf, 0xc5, 0x45, 0x9c}

// OCCExit is the OCC opcode a client sends with explicit-exit-notify.
const OCCExit = 6

// Compression stub framing bytes (comp.h), see Comp.
const (
	noCompressByte          = 0xFA // comp-lzo no: prefixed to every payload
	noCompressByteSwap      = 0xFB // compress (stub): replaces the first byte, which moves to the end
	compAlgV2Indicator      = 0x50 // compress stub-v2: escape for payloads that start with 0x50
	compAlgV2Uncompressed   = 0    // COMP_ALGV2_UNCOMPRESSED_BYTE, what decoders check
	compAlgV2UncompressedID = 10   // COMP_ALGV2_UNCOMPRESSED, what 2.6's escape writes
)
