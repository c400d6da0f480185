// Package statickey is OpenVPN's static key file ("OpenVPN Static key V1",
// what `openvpn --genkey secret` writes): the key of tls-crypt and
// tls-auth. The control channel uses it and vpn/pki writes it; it imports
// nothing of ovfwd, so neither of those has to import the other.
package statickey

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// The file format (openvpn crypto.c, read_key_file and write_key_file;
// crypto.h, struct key2 of two struct key, each MAX_CIPHER_KEY_LENGTH
// then MAX_HMAC_KEY_LENGTH bytes).
const (
	Begin = "-----BEGIN OpenVPN Static key V1-----"
	End   = "-----END OpenVPN Static key V1-----"
	Len   = 256
	// partLen is MAX_CIPHER_KEY_LENGTH and MAX_HMAC_KEY_LENGTH.
	partLen = 64
)

// Key is a static key file's 256 bytes: key[0] ‖ key[1], each a 64-byte
// cipher part ‖ a 64-byte HMAC part.
type Key [Len]byte

// Parse reads the text format written by `openvpn --genkey`.
func Parse(text []byte) (Key, error) {
	var k Key
	s := string(text)
	i := strings.Index(s, Begin)
	if i < 0 {
		return k, errors.New("static key: no BEGIN OpenVPN Static key V1 marker")
	}
	s = s[i+len(Begin):]
	j := strings.Index(s, End)
	if j < 0 {
		return k, errors.New("static key: no END OpenVPN Static key V1 marker")
	}
	var hexDigits strings.Builder
	for _, line := range strings.Split(s[:j], "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		hexDigits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	raw, err := hex.DecodeString(hexDigits.String())
	if err != nil {
		return k, fmt.Errorf("static key: %v", err)
	}
	if len(raw) != Len {
		return k, fmt.Errorf("static key: %d bytes, want %d", len(raw), Len)
	}
	copy(k[:], raw)
	return k, nil
}

// MarshalText writes k in the "OpenVPN Static key V1" text format.
func (k Key) MarshalText() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("#\n# 2048 bit OpenVPN static key\n#\n")
	b.WriteString(Begin + "\n")
	for i := 0; i < Len; i += 16 {
		b.WriteString(hex.EncodeToString(k[i : i+16]))
		b.WriteByte('\n')
	}
	b.WriteString(End + "\n")
	return b.Bytes(), nil
}

// Cipher is the cipher part of key i (0 or 1).
func (k *Key) Cipher(i int) []byte { return k[2*partLen*i : 2*partLen*i+partLen] }

// HMAC is the HMAC part of key i (0 or 1).
func (k *Key) HMAC(i int) []byte { return k[2*partLen*i+partLen : 2*partLen*(i+1)] }
