package control

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
)

// memDP is a minimal DataPlane for in-package tests (controltest cannot be
// imported here without a cycle).
type memDP struct {
	mu      sync.Mutex
	peers   map[uint32]Peer
	keys    map[uint32]map[uint8]vpn.KeyMaterial
	primary map[uint32]uint8
	removed int
}

func newMemDP() *memDP {
	return &memDP{peers: map[uint32]Peer{}, keys: map[uint32]map[uint8]vpn.KeyMaterial{}, primary: map[uint32]uint8{}}
}

func (d *memDP) AddPeer(p Peer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.peers[p.PeerID] = p
	d.keys[p.PeerID] = map[uint8]vpn.KeyMaterial{}
	return nil
}

func (d *memDP) InstallKey(id uint32, slot vpn.Slot, km *vpn.KeyMaterial) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keys[id] == nil {
		return errors.New("no peer")
	}
	d.keys[id][km.KeyID] = *km
	if slot == vpn.Primary {
		d.primary[id] = km.KeyID
	}
	return nil
}

func (d *memDP) SetPrimary(id uint32, kid uint8) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.primary[id] = kid
	return nil
}

func (d *memDP) DropKey(id uint32, kid uint8) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.keys[id], kid)
	return nil
}

func (d *memDP) RemovePeer(id uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.peers, id)
	delete(d.keys, id)
	d.removed++
	return nil
}

func (d *memDP) LastActivity(uint32) (rx, tx time.Time) { return }

func (d *memDP) key(id uint32, kid uint8) (vpn.KeyMaterial, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	km, ok := d.keys[id][kid]
	return km, ok
}

func (d *memDP) primaryOf(id uint32) uint8 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.primary[id]
}

type rig struct {
	mu       sync.Mutex // guards cli, which a test may replace
	srv      *Server
	dp       *memDP
	cli      *testClient
	up, down *lossyLink
	stop     chan struct{}
}

func newRig(t *testing.T, mode WrapMode, seed int64, loss, dup, reorder float64, tweak func(*Config)) *rig {
	p := newTestPKI(t)
	key := testStaticKey()
	r := &rig{dp: newMemDP(), stop: make(chan struct{})}
	cfg := Config{
		Certificate: p.server, ClientCAs: p.pool,
		Wrap: mode, WrapKey: *key, AuthDigest: DigestSHA256, KeyDirection: KeyDir0,
		Pool4: netip.MustParsePrefix("198.18.8.0/24"), Pool6: netip.MustParsePrefix("2001:db8:8::/64"),
		Send: func(dst netip.AddrPort, pkt []byte) error {
			if dst != clientAddr && dst.Addr() != netip.MustParseAddr("198.18.0.66") {
				t.Errorf("server sent to %v", dst)
			}
			r.down.send(pkt)
			return nil
		},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := NewServer(cfg, r.dp)
	if err != nil {
		t.Fatal(err)
	}
	srv.rto = 100 * time.Millisecond
	r.srv = srv
	r.cli = newTestClient(t, mode, key, p)
	r.up = newLossyLink(seed, loss, dup, reorder, func(b []byte) { srv.HandlePacket(clientAddr, b) })
	r.down = newLossyLink(seed+1, loss, dup, reorder, func(b []byte) { r.client().handle(b) })
	r.cli.send = r.up.send
	go r.cli.tick(r.stop)
	t.Cleanup(func() {
		close(r.stop)
		srv.Close()
		r.up.close()
		r.down.close()
	})
	return r
}

func (r *rig) client() *testClient {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cli
}

// connect runs the first key to PUSH_REPLY and checks the keys against
// what the server installed.
func (r *rig) connect(t *testing.T, ctx context.Context) (string, *clientKey) {
	c := r.client()
	c.mu.Lock()
	k := c.newKey(0, opControlHardResetClient2)
	c.flush(time.Now())
	c.mu.Unlock()
	if err := c.negotiate(ctx, k, vpn.CipherNone); err != nil {
		t.Fatalf("negotiate: %v", err)
	}
	push, err := k.readText("PUSH_REPLY")
	if err != nil {
		t.Fatalf("push reply: %v", err)
	}
	return push, k
}

func checkKeys(t *testing.T, dp *memDP, peer uint32, k *clientKey, cipher vpn.Cipher) {
	t.Helper()
	var srvKM vpn.KeyMaterial
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ok bool
		if srvKM, ok = dp.key(peer, k.id); ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if srvKM.Cipher != cipher {
		t.Fatalf("server key %d cipher %v, want %v", k.id, srvKM.Cipher, cipher)
	}
	cli := k.km
	if srvKM.RecvKey != cli.SendKey || srvKM.SendKey != cli.RecvKey || srvKM.RecvIV != cli.SendIV || srvKM.SendIV != cli.RecvIV {
		t.Fatalf("key %d: server and client data keys differ", k.id)
	}
	// And they really work together: client seals, server opens.
	cdk, err1 := vpn.NewDataKey(&cli)
	sdk, err2 := vpn.NewDataKey(&srvKM)
	if err1 != nil || err2 != nil {
		t.Fatalf("NewDataKey: %v %v", err1, err2)
	}
	pkt := cdk.Seal(nil, peer, 1, vpn.PingMagic[:])
	plain, _, err := sdk.Open(pkt)
	if err != nil || string(plain) != string(vpn.PingMagic[:]) {
		t.Fatalf("server cannot open the client's packet: %v", err)
	}
}

// The whole control channel (reset, TLS 1.3 with client certificates, key
// method 2, EKM, push, client-initiated renegotiation) over links that
// drop, duplicate and reorder packets.
func TestHandshakeOverLossyLink(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode WrapMode
		seed int64
	}{
		{"tls-crypt", WrapTLSCrypt, 1},
		{"tls-crypt-2", WrapTLSCrypt, 7},
		{"tls-auth", WrapTLSAuth, 3},
		{"none", WrapNone, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.mode, tc.seed, 0.2, 0.1, 0.2, nil)
			// Each negotiation gets what the server gives it, hand-window:
			// over 20 % loss each way a message can need several
			// retransmissions, whose backoff doubles up to 16 s.
			ctx, cancel := context.WithTimeout(context.Background(), handWindow)
			defer cancel()
			push, k0 := r.connect(t, ctx)
			for _, want := range []string{",ifconfig 198.18.8.2 255.255.255.0,", ",ifconfig-ipv6 2001:db8:8::1000/64 2001:db8:8::1,", ",peer-id 0,", ",cipher AES-256-GCM,", "protocol-flags cc-exit tls-ekm"} {
				if !strings.Contains(push, want) {
					t.Errorf("push %q lacks %q", push, want)
				}
			}
			k0.km = splitKey2Like(k0, vpn.AES256GCM)
			checkKeys(t, r.dp, 0, k0, vpn.AES256GCM)

			// Client-initiated renegotiation to key_id 1.
			ctx, cancel = context.WithTimeout(context.Background(), handWindow)
			defer cancel()
			r.cli.mu.Lock()
			k1 := r.cli.newKey(1, opControlSoftResetV1)
			r.cli.flush(time.Now())
			r.cli.mu.Unlock()
			if err := r.cli.negotiate(ctx, k1, vpn.AES256GCM); err != nil {
				t.Fatalf("renegotiate: %v", err)
			}
			checkKeys(t, r.dp, 0, k1, vpn.AES256GCM)
			// Promotion waits for the client's ack of our last message,
			// which the lossy link may delay through several backoffs.
			deadline := time.Now().Add(handWindow)
			for r.dp.primaryOf(0) != 1 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if got := r.dp.primaryOf(0); got != 1 {
				t.Errorf("transmit key is %d after renegotiation, want 1", got)
				r.srv.mu.Lock()
				for _, sess := range r.srv.sessions {
					sess.mu.Lock()
					for _, m := range sess.primary.rel.out {
						t.Logf("server key %d unacked msg %d op %d sent %v len %d", sess.primary.id, m.id, m.op, m.sent, len(m.payload))
					}
					t.Logf("server key %d: established %v promoted %v recvNext %d sendNext %d", sess.primary.id, sess.primary.established, sess.primary.promoted, sess.primary.rel.recvNext, sess.primary.rel.sendNext)
					sess.mu.Unlock()
				}
				r.srv.mu.Unlock()
				r.cli.mu.Lock()
				t.Logf("client key 1 recvNext %d, unacked %d", r.cli.keys[1].rel.recvNext, len(r.cli.keys[1].rel.out))
				r.cli.mu.Unlock()
			}
			if _, ok := r.dp.key(0, 0); !ok {
				t.Errorf("old key dropped at once; it must stay as the lame duck")
			}
			sent, dropped := 0, 0
			for _, l := range []*lossyLink{r.up, r.down} {
				l.mu.Lock()
				sent, dropped = sent+l.sent, dropped+l.dropped
				l.mu.Unlock()
			}
			if dropped == 0 {
				t.Errorf("the links dropped nothing (%d sent): loss was not exercised", sent)
			}
			t.Logf("both directions: %d sent, %d dropped; server drops %v", sent, dropped, r.srv.Drops())
		})
	}
}

// The client's ack of the server's reset is lost. The server keeps no
// state until a packet acks its reset (the stateless three-way
// handshake), so the client's next packets must ack it again, as a stock
// 2.6 client's and clientSession's do, or the handshake never completes.
func TestHandshakeLostResetAck(t *testing.T) {
	r := newRig(t, WrapTLSCrypt, 41, 0, 0, 0, nil)
	r.up.mu.Lock()
	r.up.dropSeq = map[int]bool{2: true} // 1: the client's reset, 2: its ack of the server's
	r.up.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, k := r.connect(t, ctx)
	k.km = splitKey2Like(k, vpn.AES256GCM)
	checkKeys(t, r.dp, 0, k, vpn.AES256GCM)
	r.up.mu.Lock()
	defer r.up.mu.Unlock()
	if r.up.dropped != 1 {
		t.Errorf("the link dropped %d packets, want the one ack", r.up.dropped)
	}
}

// splitKey2Like re-derives k's keys now that the cipher is known (the
// client learns it from PUSH_REPLY).
func splitKey2Like(k *clientKey, c vpn.Cipher) vpn.KeyMaterial {
	cs := k.tls.ConnectionState()
	key2, _ := cs.ExportKeyingMaterial(ekmLabelDataKeys, nil, ekmLen)
	return splitKey2(key2, c, k.id, false)
}

// A client without IV_PROTO's EKM bit gets keys from the legacy PRF, must
// ask for its push (no REQUEST_PUSH bit), and gets its preferred cipher
// only if the server lists it first among the client's.
func TestLegacyPRFClient(t *testing.T) {
	r := newRig(t, WrapTLSCrypt, 11, 0, 0, 0, nil)
	r.cli.ivProto = ivProtoDataV2
	r.cli.ciphers = "CHACHA20-POLY1305:AES-128-GCM"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r.cli.mu.Lock()
	k := r.cli.newKey(0, opControlHardResetClient2)
	r.cli.flush(time.Now())
	r.cli.mu.Unlock()
	if err := r.cli.negotiate(ctx, k, vpn.AES128GCM); err != nil {
		t.Fatal(err)
	}
	checkKeys(t, r.dp, 0, k, vpn.AES128GCM)
	if _, err := k.tls.Write(append([]byte(msgPushRequest), 0)); err != nil {
		t.Fatal(err)
	}
	push, err := k.readText("PUSH_REPLY")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(push, ",cipher AES-128-GCM") || strings.Contains(push, "tls-ekm") {
		t.Errorf("push %q", push)
	}
}

func TestAuthFailedNoCommonCipher(t *testing.T) {
	r := newRig(t, WrapTLSCrypt, 13, 0, 0, 0, nil)
	r.cli.ciphers = "BF-CBC"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r.cli.mu.Lock()
	k := r.cli.newKey(0, opControlHardResetClient2)
	r.cli.flush(time.Now())
	r.cli.mu.Unlock()
	select {
	case <-r.cli.gotReset[0]:
	case <-ctx.Done():
		t.Fatal("no reset")
	}
	if err := k.tls.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	km := keyMethod2{options: "V4", peerInfo: "IV_PROTO=990\nIV_CIPHERS=BF-CBC\n"}
	k.tls.Write(km.marshal(true))
	// The first record is the server's key method 2, as for an accepted
	// client: a 2.6 client parses it as such ("Unknown key_method/flags"
	// when AUTH_FAILED came in its place), then takes AUTH_FAILED.
	first := make([]byte, 4096)
	n, err := k.tls.Read(first)
	if err != nil {
		t.Fatal(err)
	}
	var skm keyMethod2
	if err := skm.unmarshal(first[:n], false); err != nil {
		t.Fatalf("first record after TLS is not key method 2 (%v): %q", err, first[:n])
	}
	msg, err := k.readText("AUTH_FAILED")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "cipher") {
		t.Errorf("AUTH_FAILED reason %q", msg)
	}
	if len(r.dp.peers) != 0 {
		t.Errorf("a peer was added for a failed client")
	}
}

// A client that restarts (new session id, same address) replaces its old
// session: the old peer is removed and the new one gets fresh keys.
func TestClientReconnectSameAddress(t *testing.T) {
	r := newRig(t, WrapTLSCrypt, 31, 0, 0, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, k1 := r.connect(t, ctx)
	k1.km = splitKey2Like(k1, vpn.AES256GCM)
	old := r.client()

	fresh := newTestClient(t, WrapTLSCrypt, old.wrap0key, old.pki)
	fresh.send = r.up.send
	go fresh.tick(r.stop)
	r.mu.Lock()
	r.cli = fresh
	r.mu.Unlock()
	_, k2 := r.connect(t, ctx)
	k2.km = splitKey2Like(k2, vpn.AES256GCM)

	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		r.dp.mu.Lock()
		removed, peers := r.dp.removed, len(r.dp.peers)
		r.dp.mu.Unlock()
		if removed == 1 && peers == 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.dp.mu.Lock()
	removed, peers := r.dp.removed, len(r.dp.peers)
	var id uint32
	for pid := range r.dp.peers {
		id = pid
	}
	r.dp.mu.Unlock()
	if removed != 1 || peers != 1 || r.srv.Sessions() != 1 {
		t.Fatalf("after reconnect: %d removed, %d peers, %d sessions", removed, peers, r.srv.Sessions())
	}
	checkKeys(t, r.dp, id, k2, vpn.AES256GCM)
	if k1.km.SendKey == k2.km.SendKey {
		t.Fatal("reconnect reused the old keys")
	}
}
