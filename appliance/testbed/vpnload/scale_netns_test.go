package vpnload

import (
	"context"
	"encoding/binary"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn/control"
)

// echoAll pings the sink through every client at once and returns how
// many got a reply.
func echoAll(clients []*control.Client, seq uint16) int {
	var ok atomic.Int64
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if echoSink(c, seq, 6*time.Second) {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(ok.Load())
}

// TestPeers200 establishes 200 tunnels through the ovfwd daemon at once;
// every one of them must carry an ICMP echo to the sink host and back.
func TestPeers200(t *testing.T) {
	l := newLab(t, 200, Options{})
	srv := l.startOvfwd()
	clients := l.dial(l.cfgs)
	if n := peers(t, srv); n != 200 {
		t.Fatalf("ovfwd reports %d peers, want 200", n)
	}
	seen := map[netip.Addr]bool{}
	for _, c := range clients {
		a := c.Pushed().IPv4.Addr()
		if seen[a] {
			t.Fatalf("address %v pushed twice", a)
		}
		seen[a] = true
	}
	if n := echoAll(clients, 1); n != len(clients) {
		t.Fatalf("%d of %d tunnels carried an echo", n, len(clients))
	}
}

// TestHandshakeFlood floods the server's VPN port from spoofed sources
// with replayed valid tls-crypt hard resets and with invalid ones while
// established tunnels keep pinging the sink; they must keep getting
// replies, and a new client must still be able to connect.
func TestHandshakeFlood(t *testing.T) {
	l := newLab(t, 21, Options{})
	srv := l.startOvfwd()
	clients := l.dial(l.cfgs[:20])
	valid := captureHardReset(t, l)
	invalid := append([]byte(nil), valid...)
	invalid[len(invalid)-1] ^= 0xff // breaks the tls-crypt tag

	stop := make(chan struct{})
	var sent atomic.Uint64
	var floodWG sync.WaitGroup
	floodWG.Add(1)
	go func() {
		defer floodWG.Done()
		sent.Store(flood(t, l, [][]byte{valid, invalid}, 400_000, 15*time.Second, stop))
	}()
	// During the flood: every tunnel must keep passing echoes.
	time.Sleep(500 * time.Millisecond)
	var replies, tries int
	for round := range 3 {
		replies += echoAll(clients, uint16(100+round))
		tries += len(clients)
	}
	// A newcomer completes its handshake while the flood goes on.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var late *control.Client
	err := l.topo.cli.Do(func() (err error) { late, err = control.Dial(ctx, l.cfgs[20]); return err })
	cancel()
	close(stop)
	floodWG.Wait()
	t.Logf("flood: %d spoofed packets; echoes %d/%d; status %s", sent.Load(), replies, tries, ovfwdCounters(srv.status))
	if sent.Load() < 10_000 {
		t.Fatalf("only %d flood packets sent; nothing was tested", sent.Load())
	}
	if replies != tries {
		t.Errorf("%d of %d echoes through established tunnels answered during the flood", replies, tries)
	}
	want := 20
	if err != nil {
		t.Errorf("new client during the flood: %v", err)
	} else {
		defer late.Close()
		want++
	}
	// No spoofed source got a session, let alone a peer.
	if n := peers(t, srv); n != want {
		t.Errorf("ovfwd has %d peers after the flood, want the %d real ones", n, want)
	}
}

// captureHardReset has a client send its first packet (a tls-crypt
// wrapped P_CONTROL_HARD_RESET_CLIENT_V2) to a socket of ours.
func captureHardReset(t *testing.T, l *lab) []byte {
	var pc net.PacketConn
	if err := l.topo.cli.Do(func() (err error) { pc, err = net.ListenPacket("udp4", clientIP+":0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	cfg := l.cfgs[0]
	cfg.Remote = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	go func() { _ = l.topo.cli.Do(func() error { _, err := control.Dial(ctx, cfg); return err }) }()
	buf := make([]byte, 2048)
	_ = pc.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	if buf[0]>>3 != 7 {
		t.Fatalf("first client packet has opcode %d, want HARD_RESET_CLIENT_V2", buf[0]>>3)
	}
	return append([]byte(nil), buf[:n]...)
}

// flood sends the payloads in turn as UDP to the server's VPN port from
// random spoofed sources in 198.19.0.0/16 (a raw socket in the client
// namespace), until count packets, d, or stop.
func flood(t *testing.T, l *lab, payloads [][]byte, count int, d time.Duration, stop <-chan struct{}) uint64 {
	var sent uint64
	err := l.topo.cli.Do(func() error {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		dst := netip.MustParseAddr(serverIP0).As4()
		sa := &syscall.SockaddrInet4{Addr: dst}
		deadline := time.Now().Add(d)
		rng := rand.New(rand.NewPCG(1, 2))
		pkt := make([]byte, 2048)
		for i := 0; i < count; i++ {
			if i%256 == 0 {
				select {
				case <-stop:
					return nil
				default:
				}
				if time.Now().After(deadline) {
					return nil
				}
			}
			pl := payloads[i%len(payloads)]
			n := 28 + len(pl)
			p := pkt[:n]
			clear(p[:28])
			p[0], p[8], p[9] = 0x45, 64, 17
			binary.BigEndian.PutUint16(p[2:], uint16(n))
			p[12], p[13], p[14], p[15] = 198, 19, byte(rng.IntN(256)), byte(1+rng.IntN(254))
			copy(p[16:], dst[:])
			binary.BigEndian.PutUint16(p[10:], ^netns.Checksum(p[:20]))
			binary.BigEndian.PutUint16(p[20:], uint16(1024+rng.IntN(60000)))
			binary.BigEndian.PutUint16(p[22:], vpnPort)
			binary.BigEndian.PutUint16(p[24:], uint16(8+len(pl)))
			copy(p[28:], pl)
			if err := syscall.Sendto(fd, p, 0, sa); err == nil {
				sent++
			} else if err != syscall.ENOBUFS {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("flood: %v", err)
	}
	return sent
}

// TestVanishedClientsReaped drops half the clients without EXIT: the
// server must reap exactly those by ping-restart while the others keep
// their tunnels.
func TestVanishedClientsReaped(t *testing.T) {
	l := newLab(t, 10, Options{Keepalive: time.Second, KeepaliveTimeout: 2 * time.Second})
	srv := l.startOvfwd()
	clients := l.dial(l.cfgs)
	for _, c := range clients[:5] {
		c.Drop()
	}
	// The server reaps after twice the pushed ping-restart (4 s).
	deadline := time.Now().Add(15 * time.Second)
	for peers(t, srv) > 5 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if n := peers(t, srv); n != 5 {
		t.Fatalf("%d peers 15 s after 5 of 10 clients vanished, want 5", n)
	}
	if n := echoAll(clients[5:], 3); n != 5 {
		t.Errorf("%d of the 5 remaining tunnels carried an echo", n)
	}
	for _, c := range clients[5:] {
		if c.Stats().Connects != 1 {
			t.Errorf("a remaining client reconnected: %+v", c.Stats())
		}
	}
}

// TestServerRestartReconnect restarts the ovfwd daemon, gracefully
// (SIGTERM: it sends RESTART) and by crashing it (SIGKILL: clients only
// notice by ping-restart): every client must reconnect by itself and pass
// traffic again.
func TestServerRestartReconnect(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := "graceful"
		if crash {
			name = "crash"
		}
		t.Run(name, func(t *testing.T) {
			l := newLab(t, 20, Options{Keepalive: time.Second, KeepaliveTimeout: 3 * time.Second})
			srv := l.startOvfwd()
			clients := l.dial(l.cfgs)
			if crash {
				_ = syscall.Kill(srv.pid(), syscall.SIGKILL)
				<-srv.exited
			} else {
				srv.stop()
			}
			srv2 := l.startOvfwd()
			start := time.Now()
			deadline := start.Add(30 * time.Second)
			reconnected := func() int {
				n := 0
				for _, c := range clients {
					if c.Stats().Connects >= 2 && c.Connected() {
						n++
					}
				}
				return n
			}
			for reconnected() < len(clients) && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
			if n := reconnected(); n != len(clients) {
				t.Fatalf("%d of %d clients reconnected after the restart", n, len(clients))
			}
			t.Logf("all reconnected %v after the new server started; last error %q", time.Since(start).Round(time.Millisecond), clients[0].Stats().LastError)
			if n := peers(t, srv2); n != len(clients) {
				t.Errorf("restarted ovfwd has %d peers, want %d", n, len(clients))
			}
			if n := echoAll(clients, 5); n != len(clients) {
				t.Errorf("%d of %d tunnels carried an echo after the restart", n, len(clients))
			}
		})
	}
}
