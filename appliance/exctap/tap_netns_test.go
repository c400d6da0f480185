package exctap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/exctap"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

var (
	tapMAC  = net.HardwareAddr{0x02, 0x00, 0x5e, 0x52, 0x00, 0x01}
	peerMAC = net.HardwareAddr{0x02, 0x00, 0x5e, 0x52, 0x00, 0x02}
	tapIP   = netip.MustParseAddr("198.18.42.1")
	peerIP  = netip.MustParseAddr("198.18.42.2")
)

// recorder is an Injector that keeps copies of what it is given.
type recorder struct {
	frames chan []byte
	refuse bool
}

func (r *recorder) Inject(port int, frame []byte) error {
	if port != 7 {
		return errors.New("wrong port")
	}
	if r.refuse {
		return errors.New("full")
	}
	select {
	case r.frames <- bytes.Clone(frame):
	default:
	}
	return nil
}

// next returns the first recorded frame ok accepts, within 3 s.
func (r *recorder) next(t *testing.T, what string, ok func([]byte) bool) []byte {
	t.Helper()
	deadline := time.After(3 * time.Second)
	for {
		select {
		case f := <-r.frames:
			if ok(f) {
				return f
			}
		case <-deadline:
			t.Fatalf("no %s from the host", what)
		}
	}
}

func newTAP(t *testing.T, ns *netns.NS) *exctap.TAP {
	t.Helper()
	var tap *exctap.TAP
	if err := ns.Do(func() (err error) { tap, err = exctap.New("ovx-7", tapMAC, 1500); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tap.Close() })
	nstest.Run(t, ns, "ip", "addr", "add", tapIP.String()+"/24", "dev", "ovx-7")
	return tap
}

// TestTAPCarriesFramesBothWays: the host's datagram to a neighbour comes
// out as an ARP request through the Injector; an ARP reply delivered to
// the TAP resolves it (the datagram follows, to the neighbour's MAC); a
// datagram delivered to the TAP reaches a socket of the host.
func TestTAPCarriesFramesBothWays(t *testing.T) {
	ns := nstest.New(t, "xtapu")
	tap := newTAP(t, ns)
	if tap.Name() != "ovx-7" {
		t.Fatalf("name %q", tap.Name())
	}
	out := nstest.Run(t, ns, "ip", "-o", "link", "show", "ovx-7")
	if !bytes.Contains([]byte(out), []byte(tapMAC.String())) || !bytes.Contains([]byte(out), []byte("mtu 1500")) {
		t.Fatalf("device: %s", out)
	}
	rec := &recorder{frames: make(chan []byte, 64)}
	tap.Start(rec, 7)

	var sock *net.UDPConn
	if err := ns.Do(func() (err error) {
		sock, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tapIP, 4000)))
		return
	}); err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if _, err := sock.WriteToUDPAddrPort([]byte("to-peer"), netip.AddrPortFrom(peerIP, 4001)); err != nil {
		t.Fatal(err)
	}
	req := rec.next(t, "ARP request for the peer", func(f []byte) bool {
		return len(f) >= 42 && binary.BigEndian.Uint16(f[12:]) == 0x0806 && binary.BigEndian.Uint16(f[20:]) == 1 &&
			netip.AddrFrom4([4]byte(f[38:42])) == peerIP && bytes.Equal(f[6:12], tapMAC)
	})
	_ = req
	if !tap.Deliver(arpReply(peerMAC, peerIP, tapMAC, tapIP)) {
		t.Fatal("Deliver refused the ARP reply")
	}
	rec.next(t, "UDP datagram to the peer's MAC", func(f []byte) bool {
		return len(f) > 42 && bytes.Equal(f[0:6], peerMAC) && binary.BigEndian.Uint16(f[12:]) == 0x0800 &&
			f[23] == 17 && bytes.HasSuffix(f, []byte("to-peer"))
	})

	if !tap.Deliver(udp4Frame(peerMAC, tapMAC, peerIP, tapIP, 4001, 4000, []byte("to-host"))) {
		t.Fatal("Deliver refused the datagram")
	}
	sock.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 100)
	n, from, err := sock.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "to-host" || from != netip.AddrPortFrom(peerIP, 4001) {
		t.Fatalf("host got %q from %v: %v", buf[:n], from, err)
	}
	// The writer counts a frame after its write returns, which can be
	// after the host socket already read it: wait for the count.
	s := tap.Stats()
	for end := time.Now().Add(2 * time.Second); s.ToHost < 2 && time.Now().Before(end); s = tap.Stats() {
		time.Sleep(5 * time.Millisecond)
	}
	if s.ToHost != 2 || s.FromHost < 2 || s.ToHostQueueFull != 0 {
		t.Fatalf("stats %+v", s)
	}
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	if tap.Deliver(req) {
		t.Fatal("Deliver after Close accepted a frame")
	}
	if _, err := ns.Run("ip", "link", "show", "ovx-7"); err == nil {
		t.Fatal("the device outlived Close")
	}
}

// TestTAPQueuesAreBounded: frames for the host beyond QueueLen (nobody
// writing them yet) and frames the Injector refuses are dropped and
// counted, never queued without limit.
func TestTAPQueuesAreBounded(t *testing.T) {
	ns := nstest.New(t, "xtapq")
	tap := newTAP(t, ns)
	f := udp4Frame(peerMAC, tapMAC, peerIP, tapIP, 1, 9, nil)
	ok := 0
	for range exctap.QueueLen + 10 {
		if tap.Deliver(f) {
			ok++
		}
	}
	if big := make([]byte, 14+4+1500+1); tap.Deliver(big) {
		t.Fatal("a frame over the MTU was queued")
	}
	if s := tap.Stats(); ok != exctap.QueueLen || s.ToHostQueueFull != 11 {
		t.Fatalf("queued %d, stats %+v", ok, s)
	}
	rec := &recorder{frames: make(chan []byte, 64), refuse: true}
	tap.Start(rec, 7)
	// The host's own chatter (an ARP request for the peer) is refused.
	var sock *net.UDPConn
	if err := ns.Do(func() (err error) { sock, err = net.ListenUDP("udp4", nil); return }); err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	sock.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(peerIP, 9))
	for i := 0; tap.Stats().FromHostRefused == 0; i++ {
		if i == 300 {
			t.Fatalf("refusal never counted: %+v", tap.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := tap.Stats(); s.FromHost != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func arpReply(sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	f := append(append(append([]byte{}, tha...), sha...), 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 2)
	s, d := spa.As4(), tpa.As4()
	f = append(append(f, sha...), s[:]...)
	f = append(append(f, tha...), d[:]...)
	return append(f, make([]byte, 18)...) // pad to 60 bytes
}

func udp4Frame(src, dst net.HardwareAddr, sip, dip netip.Addr, sport, dport uint16, payload []byte) []byte {
	ul := 8 + len(payload)
	f := append(append(append([]byte{}, dst...), src...), 0x08, 0x00)
	ip := make([]byte, 20)
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(20+ul))
	s, d := sip.As4(), dip.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum(0, ip)))
	u := make([]byte, 8, ul)
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(ul))
	u = append(u, payload...)
	ps := sum(sum(uint32(17)+uint32(ul), s[:]), d[:])
	c := ^fold(sum(ps, u))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return append(append(f, ip...), u...)
}

func sum(s uint32, b []byte) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
