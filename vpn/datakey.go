package vpn

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
)

// Errors returned by DataKey.Open. They are values, so a failed packet
// allocates nothing; the Tunnel maps each to a drop reason.
var (
	ErrShort    = errors.New("vpn: data packet too short")
	ErrOpcode   = errors.New("vpn: not a P_DATA_V2 packet")
	ErrKeyID    = errors.New("vpn: key_id does not match the key")
	ErrAuth     = errors.New("vpn: data packet failed authentication")
	ErrCipher   = errors.New("vpn: unsupported data-channel cipher")
	ErrPacketID = errors.New("vpn: packet-id 0 is never valid")
)

// DataKey is one direction-pair of data-channel keys for one key slot: an
// AEAD for each direction, created once, and the two implicit IVs. A DataKey
// is immutable after NewDataKey, so any number of workers may use it at once.
type DataKey struct {
	keyID  uint8
	cipher Cipher
	send   cipher.AEAD
	recv   cipher.AEAD
	sendIV [8]byte
	recvIV [8]byte
}

// NewDataKey builds the AEADs for km.
func NewDataKey(km *KeyMaterial) (*DataKey, error) {
	if km.KeyID > KeyIDMask {
		return nil, ErrKeyID
	}
	n := km.Cipher.KeyLen()
	if n == 0 {
		return nil, ErrCipher
	}
	send, err := newAEAD(km.Cipher, km.SendKey[:n])
	if err != nil {
		return nil, err
	}
	recv, err := newAEAD(km.Cipher, km.RecvKey[:n])
	if err != nil {
		return nil, err
	}
	return &DataKey{keyID: km.KeyID, cipher: km.Cipher, send: send, recv: recv, sendIV: km.SendIV, recvIV: km.RecvIV}, nil
}

func newAEAD(c Cipher, key []byte) (cipher.AEAD, error) {
	switch c {
	case AES128GCM, AES256GCM:
		b, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		return cipher.NewGCM(b)
	case ChaCha20Poly1305:
		return newChaCha20Poly1305(key)
	}
	return nil, ErrCipher
}

// KeyID is the key_id (0..7) this key is used under.
func (k *DataKey) KeyID() uint8 { return k.keyID }

// Cipher is the key's AEAD.
func (k *DataKey) Cipher() Cipher { return k.cipher }

// Open authenticates and decrypts a P_DATA_V2 packet in place. pkt starts at
// the opcode byte (the UDP payload). It returns the plaintext (a subslice of
// pkt), the packet id, and an error naming the reason on failure. It does no
// replay check: the caller checks the id after Open succeeds.
//
// Go's AEADs want ciphertext‖tag while the wire has tag‖ciphertext. When pkt
// has 16 bytes of spare capacity past its end (every fwd buffer has tailroom)
// Open copies the tag there and decrypts without allocating or moving the
// payload; otherwise it shifts the ciphertext down over the tag and allocates
// the nonce, which is correct but slower. Either way pkt's bytes are
// overwritten, also when authentication fails.
func (k *DataKey) Open(pkt []byte) (plain []byte, packetID uint32, err error) {
	if len(pkt) < DataHeaderLen {
		return nil, 0, ErrShort
	}
	if pkt[0]>>OpcodeShift != PDataV2 {
		return nil, 0, ErrOpcode
	}
	if pkt[0]&KeyIDMask != k.keyID {
		return nil, 0, ErrKeyID
	}
	return k.open(pkt)
}

// open is Open for a pkt whose length, opcode and key_id the caller checked.
func (k *DataKey) open(pkt []byte) (plain []byte, packetID uint32, err error) {
	packetID = binary.BigEndian.Uint32(pkt[packetIDOff:])
	if packetID == 0 {
		return nil, 0, ErrPacketID
	}
	n := len(pkt)
	if cap(pkt)-n < TagLen {
		plain, err = k.openShifted(pkt)
		return plain, packetID, err
	}
	// The tag moves past the end, which frees pkt[8:24]: the nonce
	// (packet-id ‖ implicit IV) is then built in place at pkt[4:16], right
	// after the AD, so no nonce array escapes to the heap.
	// Fixed-size moves: with the length check in the caller, copy would
	// not know its lengths and call memmove.
	full := pkt[:n+TagLen]
	*(*[TagLen]byte)(full[n:]) = [TagLen]byte(pkt[tagOff:DataHeaderLen])
	*(*[8]byte)(pkt[adLen:]) = k.recvIV
	ct := full[DataHeaderLen:]
	plain, err = k.recv.Open(ct[:0], pkt[packetIDOff:packetIDOff+nonceLen], ct, pkt[:adLen])
	if err != nil {
		return nil, packetID, ErrAuth
	}
	return plain, packetID, nil
}

// openShifted is Open for a pkt with no spare capacity: the ciphertext moves
// down to offset 8 and the tag follows it, so ct‖tag ends where pkt ends.
//
//go:noinline
func (k *DataKey) openShifted(pkt []byte) ([]byte, error) {
	var nonce [nonceLen]byte
	copy(nonce[:4], pkt[packetIDOff:])
	copy(nonce[4:], k.recvIV[:])
	var tag [TagLen]byte
	copy(tag[:], pkt[tagOff:DataHeaderLen])
	n := len(pkt)
	copy(pkt[adLen:], pkt[DataHeaderLen:])
	copy(pkt[n-TagLen:], tag[:])
	ct := pkt[adLen:]
	plain, err := k.recv.Open(ct[:0], nonce[:], ct, pkt[:adLen])
	if err != nil {
		return nil, ErrAuth
	}
	return plain, nil
}

// Seal writes a P_DATA_V2 packet (opcode/key_id, peer-id, packet id, tag,
// ciphertext) for plain into dst and returns it. dst may alias plain's
// backing array with plain starting at offset DataHeaderLen (encryption in
// place); otherwise plain must not overlap dst.
//
// Seal needs 16 bytes of scratch past the end of the packet, because Go's
// AEADs append the tag and the wire wants it in front: when cap(dst) is at
// least DataHeaderLen+len(plain)+TagLen it allocates nothing, otherwise it
// allocates a new buffer (and the result does not alias dst).
func (k *DataKey) Seal(dst []byte, peerID uint32, packetID uint32, plain []byte) []byte {
	n := DataHeaderLen + len(plain)
	if cap(dst) < n+TagLen {
		buf := make([]byte, n, n+TagLen)
		copy(buf[DataHeaderLen:], plain)
		plain = buf[DataHeaderLen:]
		dst = buf
	}
	pkt := dst[:n+TagLen]
	binary.BigEndian.PutUint32(pkt, uint32(PDataV2<<OpcodeShift|k.keyID)<<24|peerID&PeerIDUndefined)
	binary.BigEndian.PutUint32(pkt[packetIDOff:], packetID)
	// The nonce is built in the tag's place (pkt[4:16]); the tag overwrites
	// it once the AEAD is done with it.
	*(*[8]byte)(pkt[adLen:]) = k.sendIV
	out := pkt[DataHeaderLen:]
	k.send.Seal(out[:0], pkt[packetIDOff:packetIDOff+nonceLen], plain, pkt[:adLen])
	// Fixed-size: copy would not know the source's length and call memmove.
	*(*[TagLen]byte)(pkt[tagOff:DataHeaderLen]) = [TagLen]byte(pkt[n:])
	return pkt[:n]
}
