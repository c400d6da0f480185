package vpn

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/fwd"
)

// TestInteropRealOpenVPN checks the data-channel format against a real
// openvpn 2.6 client and server. They run in two namespaces; a UDP relay in
// the test carries their datagrams and records them. With `verb 9` the
// client logs both data-channel keys and both implicit IVs (ENCRYPT IV /
// DECRYPT IV); with those, every recorded P_DATA_V2 packet, in both
// directions, must
//   - open with DataKey.Open (to a keepalive ping or an IP packet),
//   - seal again with DataKey.Seal, under its packet-id, to the very same bytes,
//
// and the client→server packets must go through Tunnel.Decap: pings
// consumed, the ICMP echo requests of a ping through the tunnel forwarded.
//
// The relay also replaces every server→client data packet by one made with
// Tunnel.Encap (the server's key, read from the server's log as soon as its
// first data packet is on the wire, and our own packet-ids): the real client
// must accept them, so `ping` through the tunnel only succeeds if it does.
func TestInteropRealOpenVPN(t *testing.T) {
	nstest.RequireRoot(t)
	for _, bin := range []string{"openvpn", "openssl", "ping"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
				t.Fatalf("%s not installed", bin)
			}
			t.Skipf("%s not installed", bin)
		}
	}
	dir := t.TempDir()
	makePKI(t, dir)
	for _, tc := range []struct {
		cipher Cipher
		comp   Comp
	}{
		{AES128GCM, CompNone},
		{AES256GCM, CompLZO},
		{ChaCha20Poly1305, CompNone},
	} {
		t.Run(fmt.Sprintf("%v-comp%d", tc.cipher, tc.comp), func(t *testing.T) {
			interopRun(t, dir, tc.cipher, tc.comp)
		})
	}
}

func makePKI(t *testing.T, dir string) {
	t.Helper()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ec := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"}
	run(append(append([]string{"openssl", "req", "-x509"}, ec...), "-keyout", "ca.key", "-out", "ca.crt", "-days", "30", "-sha256",
		"-subj", "/CN=h6 test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")...)
	write("server.ext", "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
	write("client.ext", "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n")
	for _, who := range []string{"server", "client"} {
		run(append(append([]string{"openssl", "req"}, ec...), "-keyout", who+".key", "-out", who+".csr", "-subj", "/CN=h6-"+who)...)
		run("openssl", "x509", "-req", "-in", who+".csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
			"-out", who+".crt", "-days", "30", "-sha256", "-extfile", who+".ext")
	}
	run("openvpn", "--genkey", "secret", "tc.key")
}

// datagram is one UDP payload the relay carried.
type datagram struct {
	toServer bool
	data     []byte
}

func interopRun(t *testing.T, dir string, c Cipher, comp Comp) {
	srvNS := nstest.New(t, "h6vs")
	cliNS := nstest.New(t, "h6vc")
	nstest.Link(t, srvNS, "h6s", cliNS, "h6c")
	nstest.Run(t, srvNS, "ip", "addr", "add", "198.18.201.1/24", "dev", "h6s")
	nstest.Run(t, cliNS, "ip", "addr", "add", "198.18.201.2/24", "dev", "h6c")

	compLine := ""
	if comp == CompLZO {
		compLine = "comp-lzo no\n"
	}
	common := "dev tun\nproto udp\nca ca.crt\ntls-crypt tc.key\nverb 9\n" + compLine
	srvConf := common + "port 1195\nlocal 127.0.0.1\ntopology subnet\nserver 198.18.200.0 255.255.255.0\n" +
		"cert server.crt\nkey server.key\ndh none\nkeepalive 1 10\ndata-ciphers " + c.String() + "\n"
	cliConf := common + "client\nremote 198.18.201.1 1194\nnobind\ncert client.crt\nkey client.key\nremote-cert-tls server\n" +
		"data-ciphers " + c.String() + "\n"
	srvLog, cliLog := filepath.Join(dir, "server-"+c.String()+".log"), filepath.Join(dir, "client-"+c.String()+".log")
	for name, conf := range map[string]string{"server.conf": srvConf, "client.conf": cliConf} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The relay: client → 198.18.201.1:1194 → 127.0.0.1:1195 and back.
	var lis, up *net.UDPConn
	if err := srvNS.Do(func() error {
		var err error
		if lis, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.18.201.1:1194"))); err != nil {
			return err
		}
		up, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:1195")))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []datagram
	var clientAddr netip.AddrPort
	record := func(toServer bool, b []byte) {
		mu.Lock()
		seen = append(seen, datagram{toServer, append([]byte(nil), b...)})
		mu.Unlock()
	}
	inj := &injector{t: t, serverLog: srvLog, cipher: c, comp: comp}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, from, err := lis.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			mu.Lock()
			clientAddr = from
			mu.Unlock()
			record(true, buf[:n])
			_, _ = up.Write(buf[:n])
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := up.Read(buf)
			if err != nil {
				return
			}
			record(false, buf[:n])
			out := inj.replace(buf[:n])
			mu.Lock()
			to := clientAddr
			mu.Unlock()
			_, _ = lis.WriteToUDPAddrPort(out, to)
		}
	}()
	t.Cleanup(func() { lis.Close(); up.Close(); wg.Wait() })

	start := func(ns *netns.NS, conf, log string) {
		cmd, err := ns.Start(nil, nil, "openvpn", "--cd", dir, "--config", conf, "--log", log)
		if err != nil {
			t.Fatal(err)
		}
		_ = cmd // Delete (cleanup) stops it by PID
	}
	start(srvNS, "server.conf", srvLog)
	time.Sleep(300 * time.Millisecond)
	start(cliNS, "client.conf", cliLog)
	logText := func() string { b, _ := os.ReadFile(cliLog); return string(b) }
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logText(), "Initialization Sequence Completed") {
		if time.Now().After(deadline) {
			srv, _ := os.ReadFile(srvLog)
			t.Fatalf("client did not connect in 30 s\nclient log tail:\n%s\nserver log tail:\n%s", tail(logText(), 3000), tail(string(srv), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Inner traffic both ways, then a keepalive ping or two each way.
	nstest.Run(t, cliNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", "198.18.200.1")
	time.Sleep(2500 * time.Millisecond)

	if bad := regexp.MustCompile(`Authenticate/Decrypt packet error|AEAD Decrypt error|bad packet ID|Key \[AF_INET\][^\n]*not initialized`).FindString(logText()); bad != "" {
		t.Fatalf("the client complained about our packets: %q", bad)
	}
	injected, failed := inj.stats()
	t.Logf("server→client data packets replaced by Tunnel.Encap: %d (not replaced: %d)", injected, failed)
	if injected < 4 || failed > 1 {
		t.Fatalf("replaced %d server data packets, %d not", injected, failed)
	}

	keys := parseClientKeys(t, logText(), c)
	mu.Lock()
	got := append([]datagram(nil), seen...)
	mu.Unlock()
	checkCaptured(t, got, keys, comp)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// parseClientKeys reads the client's verb-9 log: the data-channel keys and,
// from the first ENCRYPT/DECRYPT IV lines, the implicit IVs (the last 8 of
// the 12 nonce bytes). It returns the server side's KeyMaterial.
func parseClientKeys(t *testing.T, log string, c Cipher) *KeyMaterial {
	t.Helper()
	find := func(re string) []byte {
		t.Helper()
		m := regexp.MustCompile(re + `((?: [0-9a-f]{2,8})+)`).FindStringSubmatch(log)
		if m == nil {
			t.Fatalf("no %q in the client log", re)
		}
		b, err := hex.DecodeString(strings.ReplaceAll(m[1], " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	out := find(`Outgoing Data Channel: CIPHER KEY:`)
	in := find(`Incoming Data Channel: CIPHER KEY:`)
	encIV := find(`ENCRYPT IV:`)
	decIV := find(`DECRYPT IV:`)
	if len(out) != c.KeyLen() || len(in) != c.KeyLen() || len(encIV) != 12 || len(decIV) != 12 {
		t.Fatalf("key/IV lengths %d %d %d %d", len(out), len(in), len(encIV), len(decIV))
	}
	km := &KeyMaterial{Cipher: c}
	copy(km.RecvKey[:], out) // the server receives what the client sends
	copy(km.SendKey[:], in)
	copy(km.RecvIV[:], encIV[4:])
	copy(km.SendIV[:], decIV[4:])
	return km
}

func checkCaptured(t *testing.T, got []datagram, srvKM *KeyMaterial, comp Comp) {
	t.Helper()
	srv := mustKey(t, srvKM)
	cliKM := &KeyMaterial{Cipher: srvKM.Cipher, SendKey: srvKM.RecvKey, RecvKey: srvKM.SendKey, SendIV: srvKM.RecvIV, RecvIV: srvKM.SendIV}
	cli := mustKey(t, cliKM)

	tun := NewTunnel(TunnelConfig{})
	if err := tun.AddPeer(PeerConfig{ID: 0, Remote: netip.MustParseAddrPort("198.18.201.2:50000"), Local: netip.MustParseAddrPort("198.18.201.1:1194"), Comp: comp}); err != nil {
		t.Fatal(err)
	}
	if err := tun.InstallKey(0, Primary, srvKM); err != nil {
		t.Fatal(err)
	}

	var pings, echoReq, echoRep [2]int
	data := 0
	for i, d := range got {
		if d.data[0]>>OpcodeShift != PDataV2 {
			continue
		}
		data++
		dir := 0
		k := srv // server side opens what the client sent
		if !d.toServer {
			dir, k = 1, cli
		}
		pkt := append([]byte(nil), d.data...)
		plain, pid, err := k.Open(pkt)
		if err != nil {
			t.Fatalf("datagram %d (to server %v, % x…): Open: %v", i, d.toServer, d.data[:8], err)
		}
		// Seal must reproduce openvpn's bytes exactly (GCM and ChaCha20-
		// Poly1305 are deterministic for a given key, nonce, AD, plaintext).
		sealer := cli // the client sealed it
		if !d.toServer {
			sealer = srv
		}
		peerID := binary.BigEndian.Uint32(d.data) & PeerIDUndefined
		if again := sealer.Seal(nil, peerID, pid, plain); !bytes.Equal(again, d.data) {
			t.Fatalf("datagram %d: Seal differs from openvpn\n ours %x\ntheirs %x", i, again, d.data)
		}
		bare, ok := comp.unframe(append([]byte(nil), plain...))
		if !ok {
			t.Fatalf("datagram %d: framing %x", i, plain[:1])
		}
		switch {
		case bytes.Equal(bare, PingMagic[:]):
			pings[dir]++
		case len(bare) >= 28 && bare[0] == 0x45 && bare[9] == 1 && bare[20] == 8:
			echoReq[dir]++
		case len(bare) >= 28 && bare[0] == 0x45 && bare[9] == 1 && bare[20] == 0:
			echoRep[dir]++
		}
		if !d.toServer {
			continue
		}
		// The same datagram through the data plane.
		p := decapOne(tun, 0, outerPacket(netip.MustParseAddrPort("198.18.201.2:50000"), netip.MustParseAddrPort("198.18.201.1:1194"), d.data))
		switch {
		case bytes.Equal(bare, PingMagic[:]):
			if p.Verdict != fwd.VerdictConsumed {
				t.Fatalf("datagram %d: ping verdict %d, drops %v", i, p.Verdict, tun.Stats().Drops)
			}
		case bare[0]>>4 == 4 || bare[0]>>4 == 6:
			if p.Verdict != fwd.VerdictForward || !bytes.Equal(p.Data(), bare[:p.Len]) {
				t.Fatalf("datagram %d: Decap verdict %d, drops %v", i, p.Verdict, tun.Stats().Drops)
			}
		}
	}
	t.Logf("%d data packets checked; pings c→s %d s→c %d; ICMP echo requests c→s %d, replies s→c %d",
		data, pings[0], pings[1], echoReq[0], echoRep[1])
	if pings[0] == 0 || pings[1] == 0 || echoReq[0] < 3 || echoRep[1] < 3 {
		t.Fatalf("too little traffic: pings %v, echo requests %v, replies %v", pings, echoReq, echoRep)
	}
}

// injector turns the real server's data packets into ours: it opens each
// with the server's send key and sends the plaintext again through
// Tunnel.Encap, which picks its own packet-ids.
type injector struct {
	t         *testing.T
	serverLog string
	cipher    Cipher
	comp      Comp

	mu       sync.Mutex
	tun      *Tunnel
	opener   *DataKey
	batch    *fwd.Batch
	lastPid  uint32 // highest packet-id forwarded unchanged before we were ready
	injected int
	failed   int
}

func (in *injector) stats() (int, int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.injected, in.failed
}

// ready reads the server's data-channel send key and IV from its log.
func (in *injector) ready(peerID uint32) bool {
	if in.tun != nil {
		return true
	}
	b, err := os.ReadFile(in.serverLog)
	if err != nil {
		return false
	}
	log := string(b)
	grab := func(re string) []byte {
		m := regexp.MustCompile(re + `((?: [0-9a-f]{2,8})+)`).FindStringSubmatch(log)
		if m == nil {
			return nil
		}
		v, _ := hex.DecodeString(strings.ReplaceAll(m[1], " ", ""))
		return v
	}
	key, iv := grab(`Outgoing Data Channel: CIPHER KEY:`), grab(`ENCRYPT IV:`)
	if len(key) != in.cipher.KeyLen() || len(iv) != 12 {
		return false
	}
	km := &KeyMaterial{Cipher: in.cipher}
	copy(km.SendKey[:], key)
	copy(km.SendIV[:], iv[4:])
	copy(km.RecvKey[:], key) // unused: the relay only encapsulates
	opener := mustKey(in.t, &KeyMaterial{Cipher: in.cipher, RecvKey: km.SendKey, RecvIV: km.SendIV, SendKey: km.SendKey})
	tun := NewTunnel(TunnelConfig{})
	if err := tun.AddPeer(PeerConfig{ID: peerID, Remote: netip.MustParseAddrPort("198.18.201.2:50000"),
		Local: netip.MustParseAddrPort("198.18.201.1:1194"), Comp: in.comp}); err != nil {
		in.t.Error(err)
		return false
	}
	if err := tun.InstallKey(peerID, Primary, km); err != nil {
		in.t.Error(err)
		return false
	}
	// Continue after the ids the client already saw from the real server.
	tun.peers.Load().get(peerID).keys.Load().slot[Primary].txLast.Store(uint64(in.lastPid))
	in.tun, in.opener, in.batch = tun, opener, fwd.NewBatch(1)
	return true
}

func (in *injector) replace(pkt []byte) []byte {
	if len(pkt) < DataHeaderLen || pkt[0]>>OpcodeShift != PDataV2 {
		return pkt
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	peerID := binary.BigEndian.Uint32(pkt) & PeerIDUndefined
	if !in.ready(peerID) {
		if pid := binary.BigEndian.Uint32(pkt[4:]); pid > in.lastPid {
			in.lastPid = pid
		}
		in.failed++
		return pkt
	}
	plain, _, err := in.opener.Open(append(make([]byte, 0, len(pkt)+TagLen), pkt...))
	if err != nil {
		in.failed++
		return pkt
	}
	bare, ok := in.comp.unframe(plain)
	if !ok {
		in.failed++
		return pkt
	}
	buf := make([]byte, bufSize)
	copy(buf[fwd.Headroom:], bare)
	in.batch.Reset()
	in.batch.Add(&fwd.Packet{Buf: buf, Off: fwd.Headroom, Len: uint16(len(bare)), Flags: fwd.FlagL3Only, Peer: peerID})
	in.tun.Encap(0, in.batch)
	p := &in.batch.Pkts[0]
	if p.Verdict != fwd.VerdictForward {
		in.failed++
		return pkt
	}
	in.injected++
	return append([]byte(nil), p.Data()[p.L4Off+udpHeaderLen:]...)
}
