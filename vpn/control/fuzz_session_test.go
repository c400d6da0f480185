package control

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"
)

// FuzzServerSession drives a server session from a completed handshake
// onwards: each input is a list of things ovfwd's own client, connected
// for real over loopback, then does — send a control message, write raw
// bytes into its TLS stream, start a renegotiation, or send a control
// packet whose header fields (opcode, key id, acks, msg-id) and payload
// come from the input, wrapped with the session's tls-crypt key, session
// ids and replay counter so it passes the gates and reaches the session
// code (receive window, stream buffer, key states, text handling). The
// server must not panic and must stay within its per-session bounds.
//
// An input is a sequence of [kind][length][length bytes].
func FuzzServerSession(f *testing.F) {
	op := func(kind byte, data ...byte) []byte { return append([]byte{kind, byte(len(data))}, data...) }
	cat := func(ops ...[]byte) []byte {
		var b []byte
		for _, o := range ops {
			b = append(b, o...)
		}
		return b
	}
	f.Add(cat(op(0, []byte(msgPushRequest)...)))
	f.Add(cat(op(0, []byte("JUNK")...), op(3, 'A', 0, 'B', 0), op(0, []byte(msgExit)...)))
	f.Add(cat(op(2), op(0, []byte(msgPushRequest)...)))
	// An ack of msg-ids 1 and 0 for the right peer, a control message at
	// msg-id 7 (out of order), a soft reset of key 1, an oversize payload.
	f.Add(cat(op(1, opAckV1<<opShift, 0x82, 0, 0, 0, 1, 0, 0, 0, 0),
		op(1, opControlV1<<opShift, 0, 0, 0, 0, 7, 0x17, 3, 3, 0, 1, 0),
		op(1, opControlSoftResetV1<<opShift|1, 0, 0, 0, 0, 0),
		op(1, opControlV1<<opShift, 0x80, 0, 0, 0, 9, 0xff)))

	p := newTestPKI(f)
	key := testStaticKey()
	f.Fuzz(func(t *testing.T, in []byte) {
		srv, err := NewServer(Config{Certificate: p.server, ClientCAs: p.pool, Wrap: WrapTLSCrypt, WrapKey: *key,
			Pool4: netip.MustParsePrefix("198.18.9.0/24"), RenegSec: -1}, newMemDP())
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan struct{})
		go func() { _ = srv.Serve(conn); close(served) }()
		defer func() {
			// Tear the sessions down first: Close would wait for the
			// dropped client to acknowledge RESTART.
			srv.mu.Lock()
			var all []*session
			for _, sess := range srv.sessions {
				all = append(all, sess)
			}
			srv.mu.Unlock()
			for _, sess := range all {
				srv.teardown(sess)
			}
			srv.Close()
			<-served
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := Dial(ctx, ClientConfig{Remote: conn.LocalAddr().(*net.UDPAddr).AddrPort(), Certificate: p.client, RootCAs: p.pool,
			Wrap: WrapTLSCrypt, WrapKey: *key, NoReconnect: true})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer c.Drop()
		src := c.LocalAddr()
		for len(in) >= 2 {
			kind, n := in[0], int(in[1])
			in = in[2:]
			data := in[:min(n, len(in))]
			in = in[len(data):]
			switch kind % 4 {
			case 0:
				_ = c.SendControl(string(data))
			case 1:
				if pkt := c.craftControl(data); pkt != nil {
					srv.HandlePacket(src, pkt)
				}
			case 2:
				c.Renegotiate()
			case 3:
				_ = c.WriteControlRaw(data)
			}
		}
		time.Sleep(20 * time.Millisecond) // let the key goroutines read what arrived
		if b := srv.MaxBuffered(); b > MaxSessionBuffer {
			t.Fatalf("a session buffers %d bytes, bound %d", b, MaxSessionBuffer)
		}
	})
}

// craftControl builds a control packet of the client's session from d:
// d[0] is opcode<<3|key id, d[1] the ack count (top bit: acks name the
// server's session id, else garbage), then the acks, a msg-id and the
// payload. It is wrapped with the session's key, session id and next
// replay id.
func (c *Client) craftControl(d []byte) []byte {
	if len(d) < 2 {
		return nil
	}
	s := c.session()
	if s == nil {
		return nil
	}
	p := packet{op: d[0] >> opShift, keyID: d[0] & keyIDMask}
	if !isControlOpcode(p.op) || p.op == opControlHardResetClient2 {
		p.op = opControlV1
	}
	rightPeer := d[1]&0x80 != 0
	p.nAcks = min(int(d[1]&0x7f), maxAcksParsed)
	d = d[2:]
	for i := 0; i < p.nAcks; i++ {
		if len(d) >= 4 {
			p.acks[i] = binary.BigEndian.Uint32(d)
			d = d[4:]
		}
	}
	if p.op != opAckV1 && len(d) >= 4 {
		p.msgID = binary.BigEndian.Uint32(d)
		d = d[4:]
	}
	if p.op == opControlV1 {
		p.payload = d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rightPeer {
		p.peerSID = s.peerSID
	} else {
		p.peerSID = [sessionIDLen]byte{0xde, 0xad}
	}
	body := p.appendBody(nil)
	return s.wrap.wrap(nil, p.op<<opShift|p.keyID, &s.sid, s.replayOut.nextID(time.Now()), body)
}
