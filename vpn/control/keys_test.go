package control

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/ovfwd/ovfwd/vpn"
)

// Vectors produced by OpenSSL's TLS1-PRF (digest MD5-SHA1), an
// independent implementation:
//
//	openssl kdf -keylen 48 -kdfopt digest:MD5-SHA1 -kdfopt secret:abc -kdfopt seed:def TLS1-PRF
func TestPRFMatchesOpenSSL(t *testing.T) {
	got := prf([]byte("abc"), []byte("def"), 48)
	want, _ := hex.DecodeString("f715d56f902f0aaaebc488fda126cb9ae21959f1dbed373df05a7df8df0a009d05813555312c2c860fcb5b6b7a6723b1")
	if !bytes.Equal(got, want) {
		t.Fatalf("prf = %x\nwant  %x", got, want)
	}
}

// The two-step legacy derivation (ssl.c openvpn_PRF) with fixed inputs,
// checked against two chained `openssl kdf … TLS1-PRF` runs: master from
// pre_master 01×48 and seed "OpenVPN master secret" ‖ 02×32 ‖ 03×32; key2
// from master and "OpenVPN key expansion" ‖ 04×32 ‖ 05×32 ‖ 06×8 ‖ 07×8.
func TestLegacyKey2MatchesOpenSSL(t *testing.T) {
	var c, s keyMethod2
	fill := func(b []byte, v byte) {
		for i := range b {
			b[i] = v
		}
	}
	fill(c.preMaster[:], 1)
	fill(c.random1[:], 2)
	fill(s.random1[:], 3)
	fill(c.random2[:], 4)
	fill(s.random2[:], 5)
	var csid, ssid [sessionIDLen]byte
	fill(csid[:], 6)
	fill(ssid[:], 7)
	got := legacyKey2(&c, &s, csid, ssid)
	want, _ := hex.DecodeString("4472914d1ad0a48efaa188a2d96028c43c99800f5a3eb00f4a7d16c82c9ab98ead853f5a22bdbe7cbfd7a82d0ce7dd2cd89da4dc26edc5342b7eeedabdae891852b50c35998d5eaf6210284157477132d4dc4d456860f5520a11af959c8a1e8b954821b9fca04b6446e5d34428fb5ceb95742cb223fa9e9b7e322de8d8fbcc4a773d5706f4fd4c25598b2b24ba99499a2ecef1f875263f76c63deb18b0d16d18fb85b112b772012b9ee3cf6d661da49f6e840a6e227cedbbf5fb793f1b4de122f532ce2d8ebf6b1ab9fb0fc16a57ca68723f87d7bc1be03c578c27d15146943149b54a5adeaf4423d0c37538d5cc20cc2f452d6345e8168e44ea21a7d3a54490")
	if !bytes.Equal(got, want) {
		t.Fatalf("key2 = %x\nwant   %x", got, want)
	}
}

// splitKey2 places key[0] (client→server) and key[1] (server→client)
// where ssl.c init_key_contexts puts them, and the two roles mirror each
// other.
func TestSplitKey2(t *testing.T) {
	key2 := make([]byte, 256)
	for i := range key2 {
		key2[i] = byte(i)
	}
	for _, c := range []vpn.Cipher{vpn.AES128GCM, vpn.AES256GCM, vpn.ChaCha20Poly1305} {
		srv := splitKey2(key2, c, 3, true)
		cli := splitKey2(key2, c, 3, false)
		n := c.KeyLen()
		if !bytes.Equal(srv.RecvKey[:n], key2[0:n]) || !bytes.Equal(srv.RecvIV[:], key2[64:72]) {
			t.Errorf("%v: server decrypt key/IV not from key[0]", c)
		}
		if !bytes.Equal(srv.SendKey[:n], key2[128:128+n]) || !bytes.Equal(srv.SendIV[:], key2[192:200]) {
			t.Errorf("%v: server encrypt key/IV not from key[1]", c)
		}
		if srv.SendKey != cli.RecvKey || srv.RecvKey != cli.SendKey || srv.SendIV != cli.RecvIV || srv.RecvIV != cli.SendIV {
			t.Errorf("%v: client and server keys do not mirror", c)
		}
		for _, b := range srv.SendKey[n:] {
			if b != 0 {
				t.Errorf("%v: bytes beyond the key length are set", c)
				break
			}
		}
		if srv.KeyID != 3 || srv.Cipher != c {
			t.Errorf("key id/cipher not carried")
		}
	}
}
