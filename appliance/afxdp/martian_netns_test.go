package afxdp_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"golang.org/x/sys/unix"
)

// twoRoutedPorts are the router's ports p0 (host A's side) and p1 (host
// B's) of the daemon tests in this package.
const twoRoutedPorts = `[[port]]
name = "p0"
driver = "afxdp-copy"
ifname = "p0"
addresses = ["198.18.64.254/24", "2001:db8:64::fe/64"]

[[port]]
name = "p1"
driver = "afxdp-copy"
ifname = "p1"
addresses = ["198.18.65.254/24", "2001:db8:65::fe/64"]
`

const martianConfig = `
[appliance]
mode = "router"
fast_path = "%s"

` + twoRoutedPorts + `
[[route]]
prefix = "0.0.0.0/0"
via = "198.18.65.1"

[[route]]
prefix = "::/0"
via = "2001:db8:65::1"

[metrics]
listen = "127.0.0.1:9469"

[status]
socket = "{sock}"
`

// netnsMartians are a LAN host's frames to the router's MAC in every
// martian class of fwd's martian.go, which the default routes would
// otherwise send to B.
var netnsMartians = [][2]string{
	{"198.18.64.1", "255.255.255.255"}, {"198.18.64.1", "224.0.0.251"}, {"198.18.64.1", "239.1.2.3"},
	{"198.18.64.1", "127.0.0.1"}, {"198.18.64.1", "0.1.2.3"}, {"127.0.0.1", "198.18.99.1"},
	{"0.0.0.0", "198.18.99.1"}, {"224.0.0.5", "198.18.99.1"}, {"255.255.255.255", "198.18.99.1"},
	{"198.18.64.254", "198.18.99.1"}, {"198.18.65.254", "198.18.99.1"},
	{"fe80::a", "2001:db8:99::1"}, {"2001:db8:64::1", "fe80::b"}, {"2001:db8:64::1", "ff0e::1"},
	{"2001:db8:64::1", "::1"}, {"::1", "2001:db8:99::1"}, {"::", "2001:db8:99::1"},
	{"2001:db8:64::1", "::"}, {"ff02::1", "2001:db8:99::1"},
}

// TestMartiansNotForwardedNetns runs ovfwd as its unit does, with the fast
// path forced on and off: frames of every martian class, unicast to the
// router's MAC, never reach the host behind the default routes, and the
// martian counter (status and metrics; with the fast path, its
// punt_martian too) counts each; ordinary frames on the same path arrive
// (with the fast path, forwarded by it).
func TestMartiansNotForwardedNetns(t *testing.T) {
	for _, fp := range []string{"xdp", "off"} {
		t.Run("fast_path="+fp, func(t *testing.T) { testMartiansNetns(t, fp) })
	}
}

func testMartiansNetns(t *testing.T, fastPath string) {
	nstest.RequireRoot(t)
	bin := nstest.BuildOvfwd(t)
	a, app, b := nstest.New(t, "mra"), nstest.New(t, "mrr"), nstest.New(t, "mrb")
	nstest.Link(t, a, "a0", app, "p0")
	nstest.Link(t, app, "p1", b, "b0")
	nstest.Run(t, a, "ip", "addr", "add", "198.18.64.1/24", "dev", "a0")
	nstest.Run(t, a, "ip", "addr", "add", "2001:db8:64::1/64", "dev", "a0", "nodad")
	nstest.Run(t, b, "ip", "addr", "add", "198.18.65.1/24", "dev", "b0")
	nstest.Run(t, b, "ip", "addr", "add", "2001:db8:65::1/64", "dev", "b0", "nodad")
	// A frame redirected into a veth reaches its peer only when the peer
	// runs NAPI (drivers/net/veth.c veth_xdp_xmit).
	nstest.Run(t, b, "ethtool", "-K", "b0", "gro", "on")

	snap := startOvfwd(t, app, bin, fmt.Sprintf(martianConfig, fastPath))
	if s := snap(30*time.Second, func(s *status.Snapshot) bool { return len(s.Ports) == 2 }); len(s.Ports) != 2 {
		t.Fatalf("ovfwd has %d ports", len(s.Ports))
	}
	routerMAC, hostMAC := ifaceMAC(t, app, "p0"), ifaceMAC(t, a, "a0")
	tx := openPacket(t, a, "a0")
	arrived := countMarked(t, b, "b0")

	// Ordinary frames on the martians' path first, until they arrive: the
	// gateway is resolved (and, with the fast path, in its tables).
	for _, c := range [][2]string{{"198.18.64.1", "198.18.99.1"}, {"2001:db8:64::1", "2001:db8:99::1"}} {
		f := udpFrame(routerMAC, hostMAC, c[0], c[1], []byte(markControl))
		start := arrived[1].Load()
		for deadline := time.Now().Add(10 * time.Second); arrived[1].Load() == start; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s -> %s: no ordinary frame reached B in 10 s", c[0], c[1])
			}
			tx.send(f)
		}
	}
	time.Sleep(300 * time.Millisecond) // the fast path's tables follow within a tick
	base := snap(0, func(*status.Snapshot) bool { return true })

	const each = 20
	sent := 0
	for _, m := range netnsMartians {
		f := udpFrame(routerMAC, hostMAC, m[0], m[1], []byte(markMartian))
		for range each {
			tx.send(f)
			sent++
		}
		// Paced: a veth takes at most 256 redirected frames at once
		// (drivers/net/veth.c VETH_RING_SIZE), which a fast path that
		// forwarded martians would overflow, hiding them.
		time.Sleep(2 * time.Millisecond)
	}
	// Then ordinary frames again, which must arrive (with the fast path,
	// forwarded by it): the path was open while the martians were sent.
	before := arrived[1].Load()
	for range each {
		tx.send(udpFrame(routerMAC, hostMAC, "198.18.64.1", "198.18.99.1", []byte(markControl)))
		tx.send(udpFrame(routerMAC, hostMAC, "2001:db8:64::1", "2001:db8:99::1", []byte(markControl)))
	}
	s := snap(5*time.Second, func(s *status.Snapshot) bool {
		return s.Drops["martian"]-base.Drops["martian"] >= uint64(sent) && arrived[1].Load() >= before+2*each
	})
	time.Sleep(200 * time.Millisecond) // anything still in flight to B
	if n := arrived[1].Load() - before; n < 2*each {
		t.Errorf("%d of the %d ordinary frames sent after the martians reached B", n, 2*each)
	}
	if n := arrived[0].Load(); n != 0 {
		t.Errorf("%d martian frames reached B", n)
	}
	martians := s.Drops["martian"] - base.Drops["martian"]
	fastMartians := s.Ports[0].Backend["fast_punt_martian"] - base.Ports[0].Backend["fast_punt_martian"]
	fastForwarded := s.Ports[0].Backend["fast_forwarded"] - base.Ports[0].Backend["fast_forwarded"]
	t.Logf("fast_path %s: %d martian frames sent (%d classes): martian drops %d, fast_punt_martian %d; %d ordinary frames arrived, fast_forwarded %d",
		fastPath, sent, len(netnsMartians), martians, fastMartians, arrived[1].Load()-before, fastForwarded)
	if martians < uint64(sent) {
		t.Errorf("martian drops moved by %d, want %d", martians, sent)
	}
	if fastPath == "xdp" {
		if fastMartians < uint64(sent) {
			t.Errorf("fast_punt_martian moved by %d, want %d", fastMartians, sent)
		}
		if fastForwarded < 2*each {
			t.Errorf("the fast path forwarded %d of the %d ordinary frames: it was not on", fastForwarded, 2*each)
		}
	}
	// The metrics say the same as the status.
	// bash's /dev/tcp, not curl: the test also runs in the vmtest guests,
	// whose images have no curl.
	out := nstest.Run(t, app, "bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/9469 && printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3 && cat <&3`)
	m := regexp.MustCompile(`drops_total\{reason="martian"\} (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no martian drops in the metrics")
	}
	if v, _ := strconv.ParseUint(m[1], 10, 64); v < martians+base.Drops["martian"] {
		t.Errorf("metrics: %d martian drops, status %d", v, martians+base.Drops["martian"])
	}
}

const (
	markMartian = "ovfwd-martian-probe"
	markControl = "ovfwd-control-probe"
)

// countMarked counts the frames received on ifn in ns that carry
// markMartian ([0]) and markControl ([1]) until the test ends.
func countMarked(t *testing.T, ns *netns.NS, ifn string) *[2]atomic.Uint64 {
	t.Helper()
	var fd int
	must(t, ns.Do(func() error {
		i, err := net.InterfaceByName(ifn)
		if err != nil {
			return err
		}
		proto := unix.ETH_P_ALL<<8&0xff00 | unix.ETH_P_ALL>>8 // network order
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: i.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	}))
	n := &[2]atomic.Uint64{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			select {
			case <-stop:
				return
			default:
			}
			k, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue // the timeout, to look at stop
			}
			switch {
			case bytes.Contains(buf[:k], []byte(markMartian)):
				n[0].Add(1)
			case bytes.Contains(buf[:k], []byte(markControl)):
				n[1].Add(1)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done; unix.Close(fd) })
	return n
}

// udpFrame is an Ethernet frame dst <- src carrying a UDP datagram from
// addresses s to d with payload, checksums valid.
func udpFrame(dst, src net.HardwareAddr, s, d string, payload []byte) []byte {
	sa, da := netip.MustParseAddr(s), netip.MustParseAddr(d)
	udp := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], 4000)
	binary.BigEndian.PutUint16(udp[2:], 5000)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], payload)
	pseudo := append(append(sa.AsSlice(), da.AsSlice()...), 0, 17, byte(len(udp)>>8), byte(len(udp)))
	c := ^onesSum(append(pseudo, udp...))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	var ip []byte
	etype := uint16(0x0800)
	if sa.Is4() {
		ip = make([]byte, 20, 20+len(udp))
		ip[0], ip[8], ip[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
		copy(ip[12:], sa.AsSlice())
		copy(ip[16:], da.AsSlice())
		binary.BigEndian.PutUint16(ip[10:], ^onesSum(ip))
	} else {
		etype = 0x86dd
		ip = make([]byte, 40, 40+len(udp))
		ip[0], ip[6], ip[7] = 0x60, 17, 64
		binary.BigEndian.PutUint16(ip[4:], uint16(len(udp)))
		copy(ip[8:], sa.AsSlice())
		copy(ip[24:], da.AsSlice())
	}
	f := append(append([]byte{}, dst...), src...)
	f = binary.BigEndian.AppendUint16(f, etype)
	return append(append(f, ip...), udp...)
}

func onesSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
