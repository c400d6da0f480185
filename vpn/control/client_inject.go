package control

import "errors"

// V2Injector builds control packets under one client's own tls-crypt-v2
// key (Kc and its wrapped copy WKc) for any session id the caller names:
// what a client holding a valid key, and seeing another client's cleartext
// headers, can put on the wire as that client (openvpn's
// P_CONTROL_WKC_V1, ssl_pkt.c / tls_crypt.c tls_crypt_v2_wrap_client_key).
// The server must take such a packet only for a session that began with
// that key.
type V2Injector struct {
	w   *wrapper
	wkc []byte
	rid uint64
}

// NewV2Injector takes a tls-crypt-v2 client key file's text.
func NewV2Injector(clientKey []byte) (*V2Injector, error) {
	kc, wkc, err := ParseTLSCryptV2ClientKey(clientKey)
	if err != nil {
		return nil, err
	}
	w, err := newWrapper(WrapTLSCrypt, &kc, 0, 0, false)
	if err != nil {
		return nil, err
	}
	return &V2Injector{w: w, wkc: wkc}, nil
}

// Control is a P_CONTROL_WKC_V1 on key 0 from session sid carrying
// message msgID (no acks) with payload; replay ids grow from now (unix
// seconds) so the packet is fresh to the receiver's replay window.
func (v *V2Injector) Control(sid [8]byte, now uint32, msgID uint32, payload []byte) ([]byte, error) {
	if len(payload) > maxControlPayload {
		return nil, errors.New("control: payload too large")
	}
	v.rid++
	p := packet{op: opControlV1, msgID: msgID, payload: payload}
	out := v.w.wrap(nil, opControlWKCV1<<opShift, &sid, replayID(uint32(v.rid), now), p.appendBody(nil))
	return append(out, v.wkc...), nil
}
