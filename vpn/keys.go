// Package vpn implements the OpenVPN 2.6 wire protocol for ovfwd: the data
// channel (P_DATA_V2 AEAD, replay window, keepalive, peer table) here, the
// control channel in vpn/control.
//
// # Threading contract
//
// Tunnel.Decap(q, …) and Tunnel.Encap(q, …) run on worker q of the fwd
// engine, each q from one goroutine only; they allocate nothing per packet
// (a float's new endpoint is the one exception), take no lock and never
// block. DataKey is immutable and safe for concurrent use. Every other
// Tunnel method belongs to the control plane: it may be called from any
// goroutine, and it changes what the workers see only by publishing new
// immutable peer tables, endpoints and key sets through atomic pointers.
// Workers hand control packets and events back through bounded per-queue
// rings and count what they drop.
package vpn

// Cipher is a data-channel AEAD.
type Cipher uint8

const (
	CipherNone Cipher = iota
	AES128GCM
	AES256GCM
	ChaCha20Poly1305
)

// KeyMaterial is what the control channel hands the data channel for one key
// slot of one peer (openvpn ssl.c generate_key_expansion, init_key_contexts;
// crypto.c openvpn_encrypt_aead). Keys are KeyLen() bytes of
// the arrays; the implicit IVs are the 8 bytes that follow the packet id in
// the 12-byte nonce.
type KeyMaterial struct {
	Cipher  Cipher
	KeyID   uint8 // 0..7, from the opcode byte
	SendKey [32]byte
	RecvKey [32]byte
	SendIV  [8]byte
	RecvIV  [8]byte
}

// KeyLen is the key length of c in bytes.
func (c Cipher) KeyLen() int {
	switch c {
	case AES128GCM:
		return 16
	case AES256GCM, ChaCha20Poly1305:
		return 32
	}
	return 0
}

// String is the cipher's OpenVPN name.
func (c Cipher) String() string {
	switch c {
	case AES128GCM:
		return "AES-128-GCM"
	case AES256GCM:
		return "AES-256-GCM"
	case ChaCha20Poly1305:
		return "CHACHA20-POLY1305"
	}
	return "none"
}
