package control

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"hash"

	"github.com/ovfwd/ovfwd/vpn"
)

// splitKey2 turns the 256 bytes of EKM or PRF output into one direction
// pair of data keys (ssl.c init_key_contexts, crypto.c
// key_ctx_update_implicit_iv): key[0] (bytes 0..127) protects
// client→server, key[1] (128..255) server→client; each is cipher(64) ‖
// hmac(64), and the implicit IV is the first 8 bytes of the hmac part.
func splitKey2(key2 []byte, c vpn.Cipher, keyID uint8, server bool) vpn.KeyMaterial {
	km := vpn.KeyMaterial{Cipher: c, KeyID: keyID}
	klen := c.KeyLen()
	c2s, s2c := key2[0:128], key2[128:256]
	send, recv := s2c, c2s
	if !server {
		send, recv = c2s, s2c
	}
	copy(km.SendKey[:klen], send[:klen])
	copy(km.RecvKey[:klen], recv[:klen])
	copy(km.SendIV[:], send[64:72])
	copy(km.RecvIV[:], recv[64:72])
	return km
}

// prf is the TLS 1.0 PRF (RFC 2246 §5): P_MD5(S1) XOR P_SHA1(S2) over the
// two halves of the secret, label folded into the seed.
func prf(secret, seed []byte, n int) []byte {
	half := (len(secret) + 1) / 2
	s1, s2 := secret[:half], secret[len(secret)-half:]
	out := pHash(md5.New, s1, seed, n)
	x := pHash(sha1.New, s2, seed, n)
	for i := range out {
		out[i] ^= x[i]
	}
	return out
}

func pHash(h func() hash.Hash, secret, seed []byte, n int) []byte {
	out := make([]byte, 0, n+64)
	mac := hmac.New(h, secret)
	mac.Write(seed)
	a := mac.Sum(nil)
	for len(out) < n {
		mac.Reset()
		mac.Write(a)
		mac.Write(seed)
		out = mac.Sum(out)
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(nil)
	}
	return out[:n]
}

// legacyKey2 derives the 256-byte key block the pre-EKM way (ssl.c
// generate_key_expansion_openvpn_prf, openvpn_PRF): master = PRF(pre_master, "OpenVPN master secret" ‖ c.random1 ‖
// s.random1), key2 = PRF(master, "OpenVPN key expansion" ‖ c.random2 ‖
// s.random2 ‖ client sid ‖ server sid).
func legacyKey2(client, server *keyMethod2, clientSID, serverSID [sessionIDLen]byte) []byte {
	seed := append([]byte(prfMasterLabel), client.random1[:]...)
	seed = append(seed, server.random1[:]...)
	master := prf(client.preMaster[:], seed, prfMasterLen)
	seed = append([]byte(prfExpansionLabel), client.random2[:]...)
	seed = append(seed, server.random2[:]...)
	seed = append(seed, clientSID[:]...)
	seed = append(seed, serverSID[:]...)
	return prf(master, seed, ekmLen)
}
