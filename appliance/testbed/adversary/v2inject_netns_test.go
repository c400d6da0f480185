package adversary_test

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
	"golang.org/x/sys/unix"
)

// TestV2KeyInjection: client M holds its own valid tls-crypt-v2 key and
// sees victim V's cleartext headers. From V's address and port (spoofed
// through a raw socket in the namespace that holds V's address) it sends
// control packets wrapped under its own key carrying V's session id,
// sweeping the message ids so some land in V's receive window, with
// garbage for TLS. V's tunnel must keep passing pings and its control
// channel keep renegotiating (without the key binding the injected
// packets' newer replay ids shut V's own control packets out), and the stock
// client on the other namespace is held to the suite's usual bounds.
func TestV2KeyInjection(t *testing.T) {
	a := newLabV2(t, true)
	baseRSS, baseG := a.figures(t)
	t.Logf("before: rss %.1f MiB, %v goroutines; bounds +%d MiB, +%d goroutines", baseRSS/(1<<20), baseG, rssBound>>20, goroutineBound)
	a.run(t, attack{"v2-key-injection", "v2_key_mismatch", v2Inject}, baseRSS, baseG)
}

func v2Inject(t *testing.T, a *lab) func() {
	ns := a.l.Clients[1]
	inj, err := control.NewV2Injector(a.v2ClientKey(t, "intruder"))
	if err != nil {
		t.Fatal(err)
	}
	// V's session id and source are cleartext in its control packets.
	var sniff int
	if err := ns.Do(func() (err error) {
		// ETH_P_ALL: only such taps see what the namespace sends.
		sniff, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(htons(unix.ETH_P_ALL)))
		return err
	}); err != nil {
		t.Fatalf("packet socket: %v", err)
	}
	defer unix.Close(sniff)
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	_ = unix.SetsockoptTimeval(sniff, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	profile, err := a.l.NewProfile(1, pki.Profile{Name: "victim", TLSCryptV2: a.v2ClientKey(t, "victim"),
		Extra: []string{"auth-user-pass " + a.creds, "reneg-sec 4"}})
	if err != nil {
		t.Fatal(err)
	}
	victim, err := a.l.StartClient(1, profile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(victim.Stop)
	var src netip.AddrPort
	var sid [8]byte
	buf := make([]byte, 2048)
	seen := 0
	for end := time.Now().Add(10 * time.Second); !src.IsValid() && time.Now().Before(end); {
		n, _, err := unix.Recvfrom(sniff, buf, 0)
		if err == nil {
			seen++
		}
		if err != nil || n < 20+8+9 || buf[0]>>4 != 4 || buf[9] != unix.IPPROTO_UDP {
			continue
		}
		ihl := int(buf[0]&0xf) * 4
		udp := buf[ihl:n]
		if len(udp) < 8+9 || binary.BigEndian.Uint16(udp[2:]) != vpne2e.VPNPort {
			continue
		}
		if op := udp[8] >> 3; op == 6 || op == 9 { // P_DATA_V1/V2 carry no session id
			continue
		}
		src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(buf[12:16])), binary.BigEndian.Uint16(udp[0:]))
		copy(sid[:], udp[9:17])
	}
	if !src.IsValid() {
		t.Fatalf("no control packet from the victim seen (%d packets seen); its log:\n%s", seen, tail(victim.LogText(), 3000))
	}
	if err := victim.WaitUp(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("victim %v session id %x", src, sid)
	installs := victim.KeyInstalls()

	var raw int
	if err := ns.Do(func() (err error) {
		raw, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		return err
	}); err != nil {
		t.Fatalf("raw socket: %v", err)
	}
	dst := vpne2e.ServerAddr.As4()
	spoof := func(payload []byte) error {
		pkt := make([]byte, 28, 28+len(payload))
		pkt[0], pkt[8], pkt[9] = 0x45, 64, unix.IPPROTO_UDP
		binary.BigEndian.PutUint16(pkt[2:], uint16(28+len(payload)))
		s4 := src.Addr().As4()
		copy(pkt[12:], s4[:])
		copy(pkt[16:], dst[:])
		binary.BigEndian.PutUint16(pkt[20:], src.Port())
		binary.BigEndian.PutUint16(pkt[22:], vpne2e.VPNPort)
		binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(payload))) // checksum 0: none (RFC 768)
		pkt = append(pkt, payload...)
		return unix.Sendto(raw, pkt, 0, &unix.SockaddrInet4{Addr: dst})
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	var sent int
	wg.Add(1)
	go func() {
		defer wg.Done()
		garbage := []byte("\x17\x03\x03\x00\x10 not a TLS record")
		for round := 0; ; round++ {
			for id := uint32(0); id < 64; id++ {
				p, err := inj.Control(sid, uint32(time.Now().Unix()), id, garbage)
				if err != nil {
					t.Error(err)
					return
				}
				if spoof(p) == nil {
					sent++
				}
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var pingOut string
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		pingOut, _ = ns.Run("ping", "-c", "200", "-i", "0.05", "-W", "1", "-q", vpne2e.LANHost4.String())
	}()
	return func() {
		<-pinged
		got := 0
		if m := received.FindStringSubmatch(pingOut); m != nil {
			got, _ = strconv.Atoi(m[1])
		}
		// Its control channel must keep working too: it renegotiates
		// every 4 s through the attack.
		renegotiated := waitFor(10*time.Second, func() bool { return victim.KeyInstalls()-installs >= 2 })
		close(done)
		wg.Wait()
		unix.Close(raw)
		t.Logf("%d spoofed packets; the victim's tunnel passed %d of 200 pings and installed %d new keys, still up: %v",
			sent, got, victim.KeyInstalls()-installs, !victim.Exited())
		if !renegotiated {
			t.Errorf("the victim renegotiated %d times under injection, want 2 or more (reneg-sec 4)", victim.KeyInstalls()-installs)
		}
		if got < 198 {
			t.Errorf("the victim's tunnel lost %d of 200 pings under injection", 200-got)
		}
		if victim.Exited() {
			t.Error("the victim's openvpn exited")
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
