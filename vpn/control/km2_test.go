package control

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func TestKeyMethod2RoundTrip(t *testing.T) {
	for _, fromClient := range []bool{true, false} {
		m := keyMethod2{options: serverOptionsString, username: "u", password: "p", peerInfo: "IV_VER=2.6.14\nIV_PROTO=990\n"}
		if !fromClient {
			m.username, m.password, m.peerInfo = "", "", ""
		}
		for i := range m.random1 {
			m.random1[i], m.random2[i] = byte(i), byte(100+i)
		}
		if fromClient {
			for i := range m.preMaster {
				m.preMaster[i] = byte(200 + i)
			}
		}
		b := m.marshal(fromClient)
		var got keyMethod2
		if err := got.unmarshal(b, fromClient); err != nil {
			t.Fatalf("fromClient=%v: %v", fromClient, err)
		}
		if got != m {
			t.Errorf("fromClient=%v: round trip\n got %+v\nwant %+v", fromClient, got, m)
		}
		// The other direction's layout must not parse the same bytes
		// into the same message (the pre-master shifts every field).
		var other keyMethod2
		if err := other.unmarshal(b, !fromClient); err == nil && other == m {
			t.Errorf("fromClient=%v: message parses identically in the other direction", fromClient)
		}
	}
}

// The server message a 2.6 server writes (ssl.c key_method_2_write): literal 0,
// method 2, two randoms, the options string with its NUL, then three
// empty strings.
func TestKeyMethod2ServerLayout(t *testing.T) {
	m := keyMethod2{options: "V4"}
	got := m.marshal(false)
	want, _ := hex.DecodeString("00000000" + "02" + zeros(64) + "0003" + "563400" + "0000" + "0000" + "0000")
	if !bytes.Equal(got, want) {
		t.Fatalf("server KM2\n got %x\nwant %x", got, want)
	}
}

func zeros(n int) string { return hex.EncodeToString(make([]byte, n)) }

// A client message as laid out byte by byte by ssl.c key_method_2_write,
// with trailing fields left out (the peer may omit them).
func TestKeyMethod2ParseClient(t *testing.T) {
	b, _ := hex.DecodeString("00000000" + "02" + zeros(48) + zeros(64) + "0005" + "56342c7800" + "0000" + "0000" + "0017" + hex.EncodeToString([]byte("IV_PROTO=990\nIV_NCP=2\n")) + "00")
	var m keyMethod2
	if err := m.unmarshal(b, true); err != nil {
		t.Fatal(err)
	}
	if m.options != "V4,x" || m.peerInfo != "IV_PROTO=990\nIV_NCP=2\n" {
		t.Fatalf("parsed %+v", m)
	}
	pi := parsePeerInfo(m.peerInfo)
	if pi.Proto != 990 || len(pi.Ciphers) != 2 || pi.Ciphers[0] != "AES-256-GCM" {
		t.Fatalf("peer info %+v", pi)
	}
	var short keyMethod2
	if err := short.unmarshal(b[:5+48+64+7], true); err != nil || short.options != "V4,x" {
		t.Errorf("message with only the options string: %v", err)
	}
	// The options string is required (key_method_2_read).
	for _, bad := range [][]byte{b[:4], b[:60], b[:5+48+64], append([]byte{0, 0, 0, 1}, b[4:]...), append(append([]byte{}, b[:5+48+64]...), 0x00, 0x09, 'x')} {
		var m keyMethod2
		if err := m.unmarshal(bad, true); err == nil {
			t.Errorf("accepted malformed %x", bad)
		}
	}
}

func TestParsePeerInfo(t *testing.T) {
	pi := parsePeerInfo("IV_VER=2.6.14\nIV_PLAT=linux\nIV_MTU=1600\nIV_NCP=2\nIV_CIPHERS=AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305\nIV_PROTO=990\nIV_COMP_STUBv2=1\ngarbage\n")
	if pi.Version != "2.6.14" || pi.Platform != "linux" || pi.MTU != 1600 || pi.Proto != 990 || !pi.CompStubV2 {
		t.Fatalf("%+v", pi)
	}
	if len(pi.Ciphers) != 3 || pi.Ciphers[2] != "CHACHA20-POLY1305" {
		t.Fatalf("ciphers %v", pi.Ciphers)
	}
	if pi.Proto&ivProtoTLSKeyExp == 0 || pi.Proto&ivProtoRequestPush == 0 || pi.Proto&ivProtoCCExit == 0 {
		t.Fatal("IV_PROTO 990 must carry EKM, request-push and cc-exit")
	}
}
