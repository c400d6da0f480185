package control

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
)

// keyMethod2 is the first plaintext message on each TLS session, sent by
// the client first and then by the server (ssl.c key_method_2_write,
// key_method_2_read). The server's
// message has no pre-master secret.
type keyMethod2 struct {
	preMaster [km2PreMasterLen]byte // client only
	random1   [km2RandomLen]byte
	random2   [km2RandomLen]byte
	options   string
	username  string
	password  string
	peerInfo  string
}

var errKM2 = errors.New("malformed key method 2 message")

// marshal encodes m as the client (fromClient) or server message.
func (m *keyMethod2) marshal(fromClient bool) []byte {
	b := make([]byte, 4, 256+len(m.options)+len(m.peerInfo))
	b = append(b, keyMethodV2)
	if fromClient {
		b = append(b, m.preMaster[:]...)
	}
	b = append(b, m.random1[:]...)
	b = append(b, m.random2[:]...)
	for _, s := range []string{m.options, m.username, m.password, m.peerInfo} {
		b = appendKM2String(b, s)
	}
	return b
}

// appendKM2String writes u16 length (including the NUL) ‖ bytes ‖ NUL, or
// a zero length for an absent string.
func appendKM2String(b []byte, s string) []byte {
	if s == "" {
		return append(b, 0, 0)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)+1))
	b = append(b, s...)
	return append(b, 0)
}

// unmarshal decodes the peer's message. Trailing fields may be missing.
func (m *keyMethod2) unmarshal(b []byte, fromClient bool) error {
	if len(b) < 5 || binary.BigEndian.Uint32(b) != 0 || b[4]&0x0f != keyMethodV2 {
		return errKM2
	}
	b = b[5:]
	need := 2 * km2RandomLen
	if fromClient {
		need += km2PreMasterLen
	}
	if len(b) < need {
		return errKM2
	}
	if fromClient {
		b = b[copy(m.preMaster[:], b):]
	}
	b = b[copy(m.random1[:], b):]
	b = b[copy(m.random2[:], b):]
	fields := []*string{&m.options, &m.username, &m.password, &m.peerInfo}
	limits := []int{km2MaxOptionsLen, km2MaxStringLen, km2MaxStringLen, km2MaxStringLen}
	for i, f := range fields {
		if len(b) == 0 && i > 0 {
			return nil // the peer left out trailing fields
		}
		s, rest, err := readKM2String(b, limits[i])
		if err != nil {
			return err
		}
		*f, b = s, rest
	}
	return nil
}

func readKM2String(b []byte, limit int) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, errKM2
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n == 0 {
		return "", b, nil
	}
	if n > limit || len(b) < n || b[n-1] != 0 {
		return "", nil, errKM2
	}
	return string(b[:n-1]), b[n:], nil
}

// PeerInfo is what a client announces about itself in key method 2
// (ssl.c push_peer_info): IV_* variables.
type PeerInfo struct {
	Version    string   // IV_VER
	Platform   string   // IV_PLAT
	Proto      uint32   // IV_PROTO bits
	Ciphers    []string // IV_CIPHERS, or the IV_NCP=2 fallback
	MTU        int      // IV_MTU, 0 if absent
	CompStubV2 bool     // IV_COMP_STUBv2=1
	Vars       map[string]string
}

func parsePeerInfo(s string) PeerInfo {
	pi := PeerInfo{Vars: map[string]string{}}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || k == "" {
			continue
		}
		pi.Vars[k] = v
	}
	pi.Version = pi.Vars["IV_VER"]
	pi.Platform = pi.Vars["IV_PLAT"]
	if p, err := strconv.ParseUint(pi.Vars["IV_PROTO"], 10, 32); err == nil {
		pi.Proto = uint32(p)
	}
	if c := pi.Vars["IV_CIPHERS"]; c != "" {
		pi.Ciphers = strings.Split(c, ":")
	} else if ncp, _ := strconv.Atoi(pi.Vars["IV_NCP"]); ncp >= 2 {
		pi.Ciphers = []string{"AES-256-GCM", "AES-128-GCM"}
	}
	pi.MTU, _ = strconv.Atoi(pi.Vars["IV_MTU"])
	pi.CompStubV2 = pi.Vars["IV_COMP_STUBv2"] == "1"
	return pi
}
