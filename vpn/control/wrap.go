package control

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	"github.com/ovfwd/ovfwd/vpn/statickey"
)

// WrapMode selects the control-channel wrapping (ssl_pkt.c
// tls_wrap_control).
type WrapMode uint8

const (
	WrapTLSCrypt WrapMode = iota // tls-crypt v1, the default
	WrapTLSAuth                  // tls-auth (HMAC only)
	WrapNone                     // tests only
)

// Digest is the tls-auth HMAC digest (--auth).
type Digest uint8

const (
	DigestSHA1 Digest = iota // the openvpn default
	DigestSHA256
	DigestSHA512
)

func (d Digest) new() (func() hash.Hash, int) {
	switch d {
	case DigestSHA256:
		return sha256.New, sha256.Size
	case DigestSHA512:
		return sha512.New, sha512.Size
	}
	return sha1.New, sha1.Size
}

// KeyDirection is tls-auth's key-direction: KeyDirNone uses key[0] both
// ways; KeyDir0 sends with key[0] and receives with key[1]; KeyDir1 the
// reverse. The server conventionally uses 0, the client 1.
type KeyDirection int8

const (
	KeyDirNone KeyDirection = -1
	KeyDir0    KeyDirection = 0
	KeyDir1    KeyDirection = 1
)

var errAuth = errors.New("wrap authentication failed")

// wrapper wraps and unwraps control packets for one direction pair. It is
// immutable after construction and shared by all sessions.
type wrapper struct {
	mode     WrapMode
	newHash  func() hash.Hash
	hashLen  int
	sendHMAC []byte
	recvHMAC []byte
	sendCTR  cipher.Block // tls-crypt only
	recvCTR  cipher.Block
}

// newWrapper builds the wrapping for one role. For tls-crypt the server
// sends with key[0] and receives with key[1] (tls_crypt.c
// tls_crypt_init_key).
func newWrapper(mode WrapMode, key *statickey.Key, digest Digest, dir KeyDirection, server bool) (*wrapper, error) {
	w := &wrapper{mode: mode}
	switch mode {
	case WrapNone:
		return w, nil
	case WrapTLSCrypt:
		send, recv := 0, 1
		if !server {
			send, recv = 1, 0
		}
		var err error
		if w.sendCTR, err = aes.NewCipher(key.Cipher(send)[:32]); err != nil {
			return nil, err
		}
		if w.recvCTR, err = aes.NewCipher(key.Cipher(recv)[:32]); err != nil {
			return nil, err
		}
		w.newHash, w.hashLen = sha256.New, sha256.Size
		w.sendHMAC = key.HMAC(send)[:32]
		w.recvHMAC = key.HMAC(recv)[:32]
		return w, nil
	case WrapTLSAuth:
		send, recv := 0, 0
		switch dir {
		case KeyDir0:
			send, recv = 0, 1
		case KeyDir1:
			send, recv = 1, 0
		}
		w.newHash, w.hashLen = digest.new()
		w.sendHMAC = key.HMAC(send)[:w.hashLen]
		w.recvHMAC = key.HMAC(recv)[:w.hashLen]
		return w, nil
	}
	return nil, fmt.Errorf("unknown wrap mode %d", mode)
}

// overhead is the number of bytes the wrapping adds between the session
// id and the body.
func (w *wrapper) overhead() int {
	switch w.mode {
	case WrapTLSCrypt:
		return replayIDLen + tlsCryptTagLen
	case WrapTLSAuth:
		return w.hashLen + replayIDLen
	}
	return 0
}

// wrap appends the wire form of one control packet to dst.
func (w *wrapper) wrap(dst []byte, opKey byte, sid *[sessionIDLen]byte, replayID uint64, body []byte) []byte {
	var rid [replayIDLen]byte
	binary.BigEndian.PutUint64(rid[:], replayID)
	switch w.mode {
	case WrapNone:
		dst = append(dst, opKey)
		dst = append(dst, sid[:]...)
		return append(dst, body...)
	case WrapTLSAuth:
		// HMAC over pid ‖ time ‖ op ‖ sid ‖ body (ssl_pkt.c swap_hmac).
		m := hmac.New(w.newHash, w.sendHMAC)
		m.Write(rid[:])
		m.Write([]byte{opKey})
		m.Write(sid[:])
		m.Write(body)
		dst = append(dst, opKey)
		dst = append(dst, sid[:]...)
		dst = m.Sum(dst)
		dst = append(dst, rid[:]...)
		return append(dst, body...)
	}
	// tls-crypt: tag = HMAC-SHA256(op ‖ sid ‖ pid ‖ time ‖ plaintext),
	// ciphertext = AES-256-CTR(IV = tag[:16]) (tls_crypt.c tls_crypt_wrap).
	start := len(dst)
	dst = append(dst, opKey)
	dst = append(dst, sid[:]...)
	dst = append(dst, rid[:]...)
	m := hmac.New(w.newHash, w.sendHMAC)
	m.Write(dst[start:])
	m.Write(body)
	dst = m.Sum(dst)
	tag := dst[len(dst)-tlsCryptTagLen:]
	ct := len(dst)
	dst = append(dst, body...)
	cipher.NewCTR(w.sendCTR, tag[:16]).XORKeyStream(dst[ct:], dst[ct:])
	return dst
}

// unwrap verifies pkt and returns its replay id and body. For tls-crypt the
// body is decrypted into a fresh buffer; otherwise it aliases pkt.
func (w *wrapper) unwrap(pkt []byte) (replayID uint64, body []byte, err error) {
	h := 1 + sessionIDLen
	switch w.mode {
	case WrapNone:
		if len(pkt) < h {
			return 0, nil, errShort
		}
		return 0, pkt[h:], nil
	case WrapTLSAuth:
		if len(pkt) < h+w.hashLen+replayIDLen {
			return 0, nil, errShort
		}
		got := pkt[h : h+w.hashLen]
		rid := pkt[h+w.hashLen : h+w.hashLen+replayIDLen]
		body = pkt[h+w.hashLen+replayIDLen:]
		m := hmac.New(w.newHash, w.recvHMAC)
		m.Write(rid)
		m.Write(pkt[:h])
		m.Write(body)
		if !hmac.Equal(m.Sum(nil), got) {
			return 0, nil, errAuth
		}
		return binary.BigEndian.Uint64(rid), body, nil
	}
	if len(pkt) < tlsCryptHeaderLen {
		return 0, nil, errShort
	}
	tag := pkt[h+replayIDLen : tlsCryptHeaderLen]
	body = make([]byte, len(pkt)-tlsCryptHeaderLen)
	cipher.NewCTR(w.recvCTR, tag[:16]).XORKeyStream(body, pkt[tlsCryptHeaderLen:])
	m := hmac.New(w.newHash, w.recvHMAC)
	m.Write(pkt[:h+replayIDLen])
	m.Write(body)
	if !hmac.Equal(m.Sum(nil), tag) {
		return 0, nil, errAuth
	}
	return binary.BigEndian.Uint64(pkt[h:]), body, nil
}
