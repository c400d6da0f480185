package control

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"time"

	"github.com/ovfwd/ovfwd/vpn/statickey"
)

// tls-crypt-v2 (tls_crypt.c, doc/tls-crypt-v2.txt): every client has its
// own tls-crypt key Kc, and carries it wrapped for the server as
//
//	WKc = T ‖ AES-256-CTR(Ke, IV = T[:16], Kc ‖ metadata) ‖ len16
//	T   = HMAC-SHA256(Ka, len16 ‖ Kc ‖ metadata), len16 = len(WKc)
//
// with Ke and Ka from the server key. The client appends WKc to its
// P_CONTROL_HARD_RESET_CLIENT_V3 and (asked by the server's reset,
// early negotiation) to its first P_CONTROL_WKC_V1; the packet itself is
// tls-crypt with Kc, server direction as in v1.
const (
	tlsCryptV2ServerPEM  = "OpenVPN tls-crypt-v2 server key"
	tlsCryptV2ClientPEM  = "OpenVPN tls-crypt-v2 client key"
	tlsCryptV2ServerLen  = 128  // struct key: cipher 64 ‖ hmac 64
	tlsCryptV2MaxWKcLen  = 1024 // TLS_CRYPT_V2_MAX_WKC_LEN
	tlsCryptV2MinWKcLen  = tlsCryptTagLen + statickey.Len + 2
	tlsCryptV2MetaUser   = 0x00 // TLS_CRYPT_METADATA_TYPE_USER
	tlsCryptV2MetaTime   = 0x01 // TLS_CRYPT_METADATA_TYPE_TIMESTAMP: 8-byte unix time
	earlyNegMask         = 0xff000000
	earlyNegStart        = 0x0f000000 // a 2.6 client's first replay packet-id
	tlvEarlyNegFlags     = 0x0001     // TLV_TYPE_EARLY_NEG_FLAGS
	earlyNegFlagResendWK = 0x0001     // EARLY_NEG_FLAG_RESEND_WKC
)

// TLSCryptV2ServerKey is the server's key-wrapping key.
type TLSCryptV2ServerKey [tlsCryptV2ServerLen]byte

// ParseTLSCryptV2ServerKey reads a PEM server key as written by `openvpn
// --genkey tls-crypt-v2-server` (or GenerateTLSCryptV2ServerKey).
func ParseTLSCryptV2ServerKey(text []byte) (TLSCryptV2ServerKey, error) {
	var k TLSCryptV2ServerKey
	b, _ := pem.Decode(text)
	if b == nil || b.Type != tlsCryptV2ServerPEM {
		return k, errors.New("not an OpenVPN tls-crypt-v2 server key (PEM " + tlsCryptV2ServerPEM + ")")
	}
	if len(b.Bytes) != tlsCryptV2ServerLen {
		return k, errors.New("tls-crypt-v2 server key has the wrong length")
	}
	copy(k[:], b.Bytes)
	return k, nil
}

// MarshalText is the PEM form openvpn reads.
func (k *TLSCryptV2ServerKey) MarshalText() ([]byte, error) {
	return pem.EncodeToMemory(&pem.Block{Type: tlsCryptV2ServerPEM, Bytes: k[:]}), nil
}

// GenerateTLSCryptV2ServerKey makes a random server key.
func GenerateTLSCryptV2ServerKey() (TLSCryptV2ServerKey, error) {
	var k TLSCryptV2ServerKey
	_, err := rand.Read(k[:])
	return k, err
}

func (k *TLSCryptV2ServerKey) ciphers() (cipher.Block, []byte) {
	b, err := aes.NewCipher(k[:32])
	if err != nil {
		panic(err) // 32-byte keys always make a cipher
	}
	return b, k[64:96]
}

// NewTLSCryptV2ClientKey makes a client key for k: a random Kc, wrapped
// with a timestamp as metadata (as openvpn --genkey tls-crypt-v2-client
// does without metadata), PEM-encoded for a profile's <tls-crypt-v2>.
func (k *TLSCryptV2ServerKey) NewTLSCryptV2ClientKey(now time.Time) ([]byte, error) {
	var kc statickey.Key
	if _, err := rand.Read(kc[:]); err != nil {
		return nil, err
	}
	meta := binary.BigEndian.AppendUint64([]byte{tlsCryptV2MetaTime}, uint64(now.Unix()))
	wkc := k.wrapClientKey(&kc, meta)
	return pem.EncodeToMemory(&pem.Block{Type: tlsCryptV2ClientPEM, Bytes: append(kc[:], wkc...)}), nil
}

// wrapClientKey is tls_crypt.c tls_crypt_v2_wrap_client_key.
func (k *TLSCryptV2ServerKey) wrapClientKey(kc *statickey.Key, meta []byte) []byte {
	blk, ka := k.ciphers()
	n := tlsCryptTagLen + len(kc) + len(meta) + 2
	var l [2]byte
	binary.BigEndian.PutUint16(l[:], uint16(n))
	m := hmac.New(sha256.New, ka)
	m.Write(l[:])
	m.Write(kc[:])
	m.Write(meta)
	tag := m.Sum(nil)
	out := make([]byte, 0, n)
	out = append(out, tag...)
	plain := append(append([]byte(nil), kc[:]...), meta...)
	ct := make([]byte, len(plain))
	cipher.NewCTR(blk, tag[:16]).XORKeyStream(ct, plain)
	out = append(out, ct...)
	return append(out, l[:]...)
}

var errWKc = errors.New("tls-crypt-v2: wrapped client key does not authenticate")

// unwrapClientKey is tls_crypt.c tls_crypt_v2_unwrap_client_key: it
// returns Kc and the metadata of a WKc, or errWKc. Nothing is kept.
func (k *TLSCryptV2ServerKey) unwrapClientKey(wkc []byte) (kc statickey.Key, meta []byte, err error) {
	if len(wkc) < tlsCryptV2MinWKcLen || len(wkc) > tlsCryptV2MaxWKcLen ||
		int(binary.BigEndian.Uint16(wkc[len(wkc)-2:])) != len(wkc) {
		return kc, nil, errWKc
	}
	blk, ka := k.ciphers()
	tag := wkc[:tlsCryptTagLen]
	ct := wkc[tlsCryptTagLen : len(wkc)-2]
	plain := make([]byte, len(ct))
	cipher.NewCTR(blk, tag[:16]).XORKeyStream(plain, ct)
	m := hmac.New(sha256.New, ka)
	m.Write(wkc[len(wkc)-2:])
	m.Write(plain)
	if !hmac.Equal(m.Sum(nil), tag) {
		return kc, nil, errWKc
	}
	copy(kc[:], plain)
	return kc, plain[len(kc):], nil
}

// splitWKc separates a V3 reset or WKC_V1 packet into the tls-crypt
// packet and the WKc appended to it (its length is its last two bytes).
func splitWKc(pkt []byte) (inner, wkc []byte, ok bool) {
	if len(pkt) < 1+sessionIDLen+2 {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint16(pkt[len(pkt)-2:]))
	if n < tlsCryptV2MinWKcLen || n > tlsCryptV2MaxWKcLen || len(pkt)-n < tlsCryptHeaderLen {
		return nil, nil, false
	}
	return pkt[:len(pkt)-n], pkt[len(pkt)-n:], true
}

// ParseTLSCryptV2ClientKey reads a client key (Kc ‖ WKc) as written by
// `openvpn --genkey tls-crypt-v2-client` or NewTLSCryptV2ClientKey.
func ParseTLSCryptV2ClientKey(text []byte) (kc statickey.Key, wkc []byte, err error) {
	b, _ := pem.Decode(bytes.TrimSpace(text))
	if b == nil || b.Type != tlsCryptV2ClientPEM || len(b.Bytes) < len(kc)+tlsCryptV2MinWKcLen {
		return kc, nil, errors.New("not an OpenVPN tls-crypt-v2 client key")
	}
	copy(kc[:], b.Bytes)
	return kc, b.Bytes[len(kc):], nil
}

// earlyNegTLV is the payload of a reset asking the client to resend its
// WKc in its next packet (ssl_pkt.c tls_reset_standalone).
var earlyNegTLV = []byte{0, tlvEarlyNegFlags, 0, 2, 0, earlyNegFlagResendWK}
