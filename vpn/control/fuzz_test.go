package control

import (
	"encoding/hex"
	"net/netip"
	"testing"
	"time"
)

// FuzzControlPacket feeds arbitrary datagrams to the server's packet
// parser: every wrapping's unwrap, the body parser, and HandlePacket with
// no wrapping (so bodies reach the session code). Nothing may panic, and
// a parsed body must re-encode to the bytes it came from.
func FuzzControlPacket(f *testing.F) {
	seeds := []string{
		// client hard reset, no wrapping: op 7, sid, 0 acks, msg-id 0
		"38" + "0102030405060708" + "00" + "00000000",
		// P_ACK_V1 acking 1 and 0 for peer sid
		"28" + "0102030405060708" + "02" + "00000001" + "00000000" + "a1a2a3a4a5a6a7a8",
		// P_CONTROL_V1 with one ack and a TLS record start
		"20" + "0102030405060708" + "01" + "00000000" + "a1a2a3a4a5a6a7a8" + "00000001" + "160301",
		// too many acks
		"28" + "0102030405060708" + "09",
		// data packet, soft reset key 1, key-method 1 reset
		"48000000" + "00000001", "19" + "0102030405060708" + "00" + "00000000", "08",
	}
	for _, s := range seeds {
		b, _ := hex.DecodeString(s)
		f.Add(b)
	}
	k := testStaticKey()
	tc, _ := newWrapper(WrapTLSCrypt, k, 0, KeyDirNone, false)
	sid := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	f.Add(tc.wrap(nil, 0x38, &sid, 1<<32|1, []byte{0, 0, 0, 0, 0}))

	p := newTestPKI(f)
	srvNone, err := NewServer(Config{Certificate: p.server, ClientCAs: p.pool, Wrap: WrapNone, Send: func(netip.AddrPort, []byte) error { return nil }}, newMemDP())
	if err != nil {
		f.Fatal(err)
	}
	defer srvNone.Close()
	wraps := []*wrapper{}
	for _, m := range []WrapMode{WrapTLSCrypt, WrapTLSAuth, WrapNone} {
		w, _ := newWrapper(m, k, DigestSHA1, KeyDir0, true)
		wraps = append(wraps, w)
	}
	src := netip.MustParseAddrPort("198.18.0.9:1194")
	f.Fuzz(func(t *testing.T, pkt []byte) {
		for _, w := range wraps {
			_, body, err := w.unwrap(pkt)
			if err != nil {
				continue
			}
			var cp packet
			cp.op = pkt[0] >> opShift
			if cp.parseBody(body) != nil {
				continue
			}
			if len(pkt) > 0 && cp.op != opAckV1 || cp.nAcks > 0 {
				re := cp.appendBody(nil)
				if cp.op != opAckV1 && string(re) != string(body) {
					t.Fatalf("re-encode %x != %x", re, body)
				}
			}
		}
		srvNone.HandlePacket(src, pkt)
	})
	_ = time.Second
}

// FuzzKeyMethod2 checks the key method 2 parser in both directions.
func FuzzKeyMethod2(f *testing.F) {
	m := keyMethod2{options: "V4,dev-type tun", peerInfo: "IV_PROTO=990\n"}
	f.Add(m.marshal(true), true)
	f.Add(m.marshal(false), false)
	f.Add([]byte{0, 0, 0, 0, 2}, false)
	f.Fuzz(func(t *testing.T, b []byte, fromClient bool) {
		var m keyMethod2
		if m.unmarshal(b, fromClient) != nil {
			return
		}
		var again keyMethod2
		if err := again.unmarshal(m.marshal(fromClient), fromClient); err != nil || again != m {
			t.Fatalf("re-encoded message does not round-trip: %v", err)
		}
		_ = parsePeerInfo(m.peerInfo)
	})
}
