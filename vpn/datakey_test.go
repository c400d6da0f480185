package vpn

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"testing"
)

// testKeys returns the key material of one side and its mirror image (what
// the other side installs), with distinct bytes everywhere so a swapped key or
// IV cannot go unnoticed.
func testKeys(c Cipher, kid uint8) (server, client *KeyMaterial) {
	server = &KeyMaterial{Cipher: c, KeyID: kid}
	for i := range server.SendKey {
		server.SendKey[i] = byte(i + 1)
		server.RecvKey[i] = byte(0x80 + i)
	}
	for i := range server.SendIV {
		server.SendIV[i] = byte(0x40 + i)
		server.RecvIV[i] = byte(0xC0 + i)
	}
	client = &KeyMaterial{Cipher: c, KeyID: kid,
		SendKey: server.RecvKey, RecvKey: server.SendKey, SendIV: server.RecvIV, RecvIV: server.SendIV}
	return server, client
}

func mustKey(t testing.TB, km *KeyMaterial) *DataKey {
	t.Helper()
	k, err := NewDataKey(km)
	if err != nil {
		t.Fatalf("NewDataKey(%v): %v", km.Cipher, err)
	}
	return k
}

// sealInPlace puts plain at offset DataHeaderLen of a buffer with tailroom and seals it there.
func sealInPlace(k *DataKey, peerID, pid uint32, plain []byte) []byte {
	buf := make([]byte, DataHeaderLen+len(plain), DataHeaderLen+len(plain)+64)
	copy(buf[DataHeaderLen:], plain)
	return k.Seal(buf, peerID, pid, buf[DataHeaderLen:])
}

// TestSealMatchesOpenVPNLayout builds a P_DATA_V2 packet by hand from the
// spec (crypto.c openvpn_encrypt_aead) with crypto/cipher and compares it byte for byte
// with Seal: header 0x48|kid, 24-bit peer-id, packet-id; nonce = packet-id ‖
// implicit IV; AD = the first 8 bytes; tag before ciphertext.
func TestSealMatchesOpenVPNLayout(t *testing.T) {
	km, _ := testKeys(AES256GCM, 2)
	k := mustKey(t, km)
	plain := []byte("\x45\x00\x00\x1c inner IPv4 packet bytes ....")
	const peerID, pid = 0x0a0b0c, 0x01020304

	block, err := aes.NewCipher(km.SendKey[:32])
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	header := []byte{0x48 | 2, 0x0a, 0x0b, 0x0c, 0x01, 0x02, 0x03, 0x04}
	nonce := append([]byte{0x01, 0x02, 0x03, 0x04}, km.SendIV[:]...)
	sealed := gcm.Seal(nil, nonce, plain, header)
	ct, tag := sealed[:len(plain)], sealed[len(plain):]
	want := append(append(append([]byte{}, header...), tag...), ct...)

	got := sealInPlace(k, peerID, pid, plain)
	if !bytes.Equal(got, want) {
		t.Fatalf("Seal:\n got %x\nwant %x", got, want)
	}
	// Not in place: plain elsewhere, dst with room.
	got2 := k.Seal(make([]byte, 0, 256), peerID, pid, plain)
	if !bytes.Equal(got2, want) {
		t.Fatalf("Seal (separate dst):\n got %x\nwant %x", got2, want)
	}
	// No tailroom: Seal must still be right (it allocates).
	got3 := k.Seal(make([]byte, DataHeaderLen+len(plain)), peerID, pid, plain)
	if !bytes.Equal(got3, want) {
		t.Fatalf("Seal (no tailroom):\n got %x\nwant %x", got3, want)
	}
}

// TestOpenHandBuiltPacket decrypts a packet laid out by hand, as a client would send it.
func TestOpenHandBuiltPacket(t *testing.T) {
	server, client := testKeys(AES128GCM, 0)
	k := mustKey(t, server)
	block, _ := aes.NewCipher(client.SendKey[:16])
	gcm, _ := cipher.NewGCM(block)
	header := []byte{0x48, 0, 0, 7, 0, 0, 0, 1}
	nonce := append([]byte{0, 0, 0, 1}, client.SendIV[:]...)
	sealed := gcm.Seal(nil, nonce, PingMagic[:], header)
	wire := append(append(append([]byte{}, header...), sealed[16:]...), sealed[:16]...)
	for _, tailroom := range []int{0, 16, 100} {
		pkt := make([]byte, len(wire), len(wire)+tailroom)
		copy(pkt, wire)
		plain, pid, err := k.Open(pkt)
		if err != nil || pid != 1 || !bytes.Equal(plain, PingMagic[:]) {
			t.Fatalf("tailroom %d: Open = %x, %d, %v; want ping magic, 1, nil", tailroom, plain, pid, err)
		}
	}
}

func TestRoundTripAllCiphers(t *testing.T) {
	for _, c := range []Cipher{AES128GCM, AES256GCM, ChaCha20Poly1305} {
		t.Run(c.String(), func(t *testing.T) {
			server, client := testKeys(c, 5)
			s, err := NewDataKey(server)
			if err != nil {
				t.Fatal(err)
			}
			cl := mustKey(t, client)
			for _, size := range []int{0, 1, 15, 16, 17, 64, 1400, 1500} {
				plain := make([]byte, size)
				for i := range plain {
					plain[i] = byte(i*7 + size)
				}
				pid := uint32(size + 1)
				for _, tailroom := range []bool{true, false} {
					pkt := sealInPlace(s, 0x123456, pid, plain)
					if !tailroom {
						pkt = append([]byte(nil), pkt...)[:len(pkt):len(pkt)]
					}
					if len(pkt) != DataHeaderLen+size {
						t.Fatalf("size %d: sealed length %d", size, len(pkt))
					}
					if size >= 16 && bytes.Contains(pkt, plain[:16]) {
						t.Fatalf("size %d: plaintext visible in the sealed packet", size)
					}
					got, gotPid, err := cl.Open(pkt)
					if err != nil || gotPid != pid || !bytes.Equal(got, plain) {
						t.Fatalf("size %d tailroom %v: Open = %d bytes, pid %d, %v", size, tailroom, len(got), gotPid, err)
					}
					// The server must not accept its own packets (the directions' keys differ).
					own := sealInPlace(s, 0x123456, pid, plain)
					if _, _, err := s.Open(own); !errors.Is(err, ErrAuth) {
						t.Fatalf("size %d: own packet opened with the receive key: %v", size, err)
					}
				}
			}
		})
	}
}

func TestOpenRejects(t *testing.T) {
	server, client := testKeys(AES256GCM, 3)
	s, cl := mustKey(t, server), mustKey(t, client)
	good := sealInPlace(s, 9, 77, []byte("hello, inner packet"))
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		want   error
	}{
		{"short", func(p []byte) []byte { return p[:DataHeaderLen-1] }, ErrShort},
		{"opcode", func(p []byte) []byte { p[0] = PDataV1<<3 | 3; return p }, ErrOpcode},
		{"key id", func(p []byte) []byte { p[0] = PDataV2<<3 | 4; return p }, ErrKeyID},
		{"packet id 0", func(p []byte) []byte { binary.BigEndian.PutUint32(p[4:], 0); return p }, ErrPacketID},
		{"peer id", func(p []byte) []byte { p[3] ^= 1; return p }, ErrAuth},
		{"packet id", func(p []byte) []byte { p[7] ^= 1; return p }, ErrAuth},
		{"tag", func(p []byte) []byte { p[10] ^= 0x80; return p }, ErrAuth},
		{"ciphertext", func(p []byte) []byte { p[len(p)-1] ^= 1; return p }, ErrAuth},
		{"truncated", func(p []byte) []byte { return p[:len(p)-1] }, ErrAuth},
	}
	for _, tc := range cases {
		pkt := make([]byte, len(good), len(good)+32)
		copy(pkt, good)
		if _, _, err := cl.Open(tc.mutate(pkt)); !errors.Is(err, tc.want) {
			t.Errorf("%s: Open err = %v, want %v", tc.name, err, tc.want)
		}
	}
	pkt := make([]byte, len(good), len(good)+32)
	copy(pkt, good)
	if _, _, err := cl.Open(pkt); err != nil {
		t.Fatalf("unmodified packet: %v", err)
	}
}

func TestNewDataKeyRejects(t *testing.T) {
	if _, err := NewDataKey(&KeyMaterial{Cipher: CipherNone}); !errors.Is(err, ErrCipher) {
		t.Errorf("CipherNone: %v", err)
	}
	if _, err := NewDataKey(&KeyMaterial{Cipher: AES128GCM, KeyID: 8}); !errors.Is(err, ErrKeyID) {
		t.Errorf("key id 8: %v", err)
	}
}

func TestOpenSealAllocs(t *testing.T) {
	server, client := testKeys(AES128GCM, 1)
	s, cl := mustKey(t, server), mustKey(t, client)
	buf := make([]byte, 2048)
	plain := buf[DataHeaderLen : DataHeaderLen+1400]
	pid := uint32(0)
	allocs := testing.AllocsPerRun(100, func() {
		pid++
		pkt := s.Seal(buf[:DataHeaderLen], 1, pid, plain)
		if _, _, err := cl.Open(pkt); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Seal+Open allocate %v times per packet", allocs)
	}
}
