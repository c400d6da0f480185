package afxdp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/nlsync"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/fwd"
	"golang.org/x/sys/unix"
)

// udpFrame writes a minimal Ethernet/IPv4/UDP frame (checksums left zero:
// the sink counts frames, it does not parse them).
func udpFrame(b []byte, dst, src net.HardwareAddr) int {
	copy(b[0:], dst)
	copy(b[6:], src)
	b[12], b[13] = 0x08, 0x00
	ip := b[14:]
	copy(ip, []byte{0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 8, 1, 198, 18, 8, 2})
	udp := ip[20:]
	copy(udp, []byte{0x30, 0x39, 0, 9, 0, 26, 0, 0})
	return 60
}

func sendFrames(p *Port, n int, dst net.HardwareAddr) int {
	b := fwd.NewBatch(64)
	got := p.Alloc(0, b, n)
	for i := range b.Pkts {
		pk := &b.Pkts[i]
		pk.Len = uint16(udpFrame(pk.Buf[pk.Off:], dst, p.Info().MAC))
	}
	p.Tx(0, b)
	return got
}

// attachSink counts and drops udpFrame's frames (IPv4 to 198.18.8.2) at
// ifname. Only those: what the kernel sends on its own when a link comes
// up (IPv6 MLD reports, router solicitations) passes uncounted — counting
// every frame made TestTxLinkDownCountsAndRecovers see 33 of its 32 now
// and then.
func attachSink(t testing.TB, ns *netns.NS, ifname string) *DropCounter {
	t.Helper()
	var c *DropCounter
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		if c, err = NewDropCounterFor(netip.MustParsePrefix("198.18.8.2/32")); err != nil {
			return err
		}
		_, err = c.Attach(ifi.Index, ModeNative)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitCount(c *DropCounter, want uint64) uint64 {
	var got uint64
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got, _, _ = c.Count(); got >= want {
			break
		}
	}
	return got
}

func macOf(t testing.TB, ns *netns.NS, ifname string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return mac
}

// The link goes down under a transmitting port (sendto answers ENETDOWN):
// TX must not panic, must count the loss, and must send again once the
// link is back — without reopening the port.
func TestTxLinkDownCountsAndRecovers(t *testing.T) {
	tp := newTopo(t, 1)
	p := openIn(t, tp.app, "h8a1", Options{Pool: 1})
	sink := attachSink(t, tp.a, "h8a0")
	dst := macOf(t, tp.a, "h8a0")

	if n := sendFrames(p, 32, dst); n != 32 {
		t.Fatalf("alloc gave %d frames", n)
	}
	if got := waitCount(sink, 32); got != 32 {
		t.Fatalf("link up: sink counted %d, want 32", got)
	}
	nstest.Run(t, tp.app, "ip", "link", "set", "h8a1", "down")
	for range 4 {
		sendFrames(p, 32, dst)
	}
	st := p.Stats()
	if st.KickErrors == 0 || st.Drops[fwd.DropLinkDown] == 0 {
		t.Fatalf("link down: kick errors %d, link_down drops %d; want both > 0", st.KickErrors, st.Drops[fwd.DropLinkDown])
	}
	nstest.Run(t, tp.app, "ip", "link", "set", "h8a1", "up")
	before, _, _ := sink.Count()
	var got uint64
	for i := 0; i < 50 && got < before+32; i++ { // the first batches after up may still meet a carrier-less device
		sendFrames(p, 32, dst)
		got = waitCount(sink, before+32)
	}
	if got < before+32 {
		t.Fatalf("after link up the sink counted %d more frames, want ≥ 32", got-before)
	}
	t.Logf("link_down drops %d, kick errors %d", p.Stats().Drops[fwd.DropLinkDown], p.Stats().KickErrors)
}

// Closing a port attached in generic (SKB) mode returns promptly and leaves
// no XDP program behind (a netlink detach with flags 0 looks for a native
// program only and never finds it); the same for native.
func TestDetachLeavesNoProgram(t *testing.T) {
	for _, mode := range []AttachMode{ModeGeneric, ModeNative} {
		t.Run(mode.String(), func(t *testing.T) {
			tp := newTopo(t, 1)
			p := openIn(t, tp.app, "h8a1", Options{Pool: 1, Attach: mode})
			if m := p.Modes()[0].Attach; m != mode {
				t.Fatalf("attached %v, want %v", m, mode)
			}
			if out := nstest.Run(t, tp.app, "ip", "link", "show", "h8a1"); !strings.Contains(out, "prog/xdp") {
				t.Fatalf("no XDP program visible after Open:\n%s", out)
			}
			done := make(chan struct{})
			go func() { p.Close(); close(done) }()
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				t.Fatal("Close did not return within 3 s")
			}
			if out := nstest.Run(t, tp.app, "ip", "link", "show", "h8a1"); strings.Contains(out, "prog/xdp") {
				t.Fatalf("XDP program left after Close:\n%s", out)
			}
		})
	}
}

// helperEnv makes the test binary, started again in the appliance
// namespace, open a port, move a frame and exit at once without closing
// anything: a crashed or restarted ovfwd (see TestMain).
const helperEnv = "OVFWD_AFXDP_HELPER_IF"

func TestMain(m *testing.M) {
	if ifname := os.Getenv(helperEnv); ifname != "" {
		p, err := Open(ifname, Options{Pool: 1})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		sendFrames(p, 1, net.HardwareAddr{2, 0, 0, 0, 0, 1})
		os.Exit(0) // no Close: like a crash, the kernel cleans up
	}
	os.Exit(m.Run())
}

// Right after a previous process bound the queue and died, bind can meet
// EBUSY for about 2 s; Open retries with backoff and succeeds.
func TestBindRetryAfterRestart(t *testing.T) {
	tp := newTopo(t, 1)
	var sawBusy bool
	var elapsed time.Duration
	for attempt := 0; attempt < 3 && !sawBusy; attempt++ {
		if out, err := tp.app.Run("env", helperEnv+"=h8a1", os.Args[0]); err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		// First a single bind attempt, to see whether the hazard is there.
		err := tp.app.Do(func() error {
			ifi, err := net.InterfaceByName("h8a1")
			if err != nil {
				return err
			}
			qu, err := tryOpenSocket(ifi.Index, 0, defaultRings, unix.XDP_COPY)
			if err == nil {
				qu.close()
			}
			return err
		})
		sawBusy = errors.Is(err, unix.EBUSY)
		if err != nil && !sawBusy {
			t.Fatalf("bind after restart: %v", err)
		}
		// Then Open, which must succeed either way.
		start := time.Now()
		p := openIn(t, tp.app, "h8a1", Options{Pool: 1})
		elapsed = time.Since(start)
		p.Close()
	}
	t.Logf("EBUSY seen on an immediate rebind: %v; Open with retry took %v", sawBusy, elapsed)
}

// Steering: the kernel keeps traffic to its own address (ping, the VPN
// control channel); ovfwd gets VPN data (P_DATA_V2) and transit; the
// neighbour mirror lets the kernel answer without ARP of its own.
func TestSteeringAndNeighMirror(t *testing.T) {
	tp := newTopo(t, 1)
	const local = "198.18.8.3"
	nstest.Run(t, tp.app, "ip", "addr", "add", local+"/24", "dev", "h8a1")
	pa := openIn(t, tp.app, "h8a1", Options{Pool: 1, VPNPort: 1194})
	pb := openIn(t, tp.app, "h8b1", Options{Pool: 2, Index: 1})
	h := startHub(t, tp.app, pa, pb)

	// ovfwd consumes ARP, so the kernel learns host A only from the mirror.
	macA := macOf(t, tp.a, "h8a0")
	var mirror *nlsync.NeighMirror
	if err := tp.app.Do(func() (err error) { mirror, err = nlsync.NewNeighMirror(); return }); err != nil {
		t.Fatal(err)
	}
	defer mirror.Close()
	if err := mirror.Set(pa.Ifindex(), netip.MustParseAddr(hostA), macA, true); err != nil {
		t.Fatal(err)
	}
	if out := nstest.Run(t, tp.app, "ip", "neigh", "show", "dev", "h8a1"); !strings.Contains(out, hostA) || !strings.Contains(out, "PERMANENT") {
		t.Fatalf("mirrored neighbour missing:\n%s", out)
	}
	nstest.Run(t, tp.a, "ip", "neigh", "replace", local, "lladdr", pa.Info().MAC.String(), "dev", "h8a0")

	if out, err := tp.a.Run("ping", "-c", "2", "-i", "0.2", "-W", "2", local); err != nil {
		t.Fatalf("ping to the appliance's own address: %v\n%s", err, out)
	}

	// A UDP listener on the VPN port in the appliance namespace.
	var conn *net.UDPConn
	if err := tp.app.Do(func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(local), Port: 1194})
		return
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hubBefore := h.copied.Load()
	const control, data = 5, 7
	err := tp.a.Do(func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(local), Port: 1194})
		if err != nil {
			return err
		}
		defer c.Close()
		for range control {
			c.Write([]byte{7 << 3, 1, 2, 3}) // P_CONTROL_HARD_RESET_CLIENT_V2
		}
		for range data {
			c.Write([]byte{9 << 3, 0, 0, 1, 0xaa}) // P_DATA_V2
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	buf := make([]byte, 64)
	conn.SetReadDeadline(time.Now().Add(time.Second))
	for {
		n, _, err := conn.ReadFromUDP(buf)
		if err != nil {
			break
		}
		if n > 0 && buf[0]>>3 != 7 {
			t.Errorf("kernel got opcode %d, want only control packets", buf[0]>>3)
		}
		got++
	}
	if got != control {
		t.Errorf("kernel received %d control packets, want %d", got, control)
	}
	if d := h.copied.Load() - hubBefore; d < data {
		t.Errorf("ovfwd received %d frames after the UDP burst, want ≥ %d P_DATA_V2", d, data)
	}

	if err := mirror.Delete(pa.Ifindex(), netip.MustParseAddr(hostA)); err != nil {
		t.Fatal(err)
	}
	if out := nstest.Run(t, tp.app, "ip", "neigh", "show", "dev", "h8a1"); strings.Contains(out, hostA) {
		t.Fatalf("neighbour still there after Delete:\n%s", out)
	}
}

// A queue still held by another socket (here: alive for 1 s more, then
// closed, its pool released by the kernel's deferred work) answers bind
// with EBUSY; Open keeps retrying within bindRetry and gets it.
func TestBindRetryWhileHeld(t *testing.T) {
	tp := newTopo(t, 1)
	ifindex, holder := holdQueue(t, tp)
	err := tp.app.Do(func() error {
		qu, err := tryOpenSocket(ifindex, 0, defaultRings, unix.XDP_COPY)
		if err == nil {
			qu.close()
		}
		return err
	})
	if !errors.Is(err, unix.EBUSY) {
		holder.close()
		t.Fatalf("second bind while held: %v, want EBUSY", err)
	}
	release := time.AfterFunc(time.Second, holder.close)
	defer release.Stop()
	start := time.Now()
	p := openIn(t, tp.app, "h8a1", Options{Pool: 1, NoZeroCopy: true})
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Fatalf("Open succeeded after %v, before the holder let go", el)
	} else {
		t.Logf("Open succeeded %v after the first EBUSY", el)
	}
	if len(p.Modes()) != 1 {
		t.Fatalf("modes: %v", p.Modes())
	}
}

// After Close the steering program is gone from the kernel, not just
// detached from the device.
func TestCloseUnloadsProgram(t *testing.T) {
	tp := newTopo(t, 1)
	p := openIn(t, tp.app, "h8a1", Options{Pool: 1})
	id, err := p.ProgramID()
	if err != nil || id == 0 {
		t.Fatalf("program id %d: %v", id, err)
	}
	if !ProgramExists(id) {
		t.Fatalf("program %d not found while attached", id)
	}
	p.Close()
	deadline := time.Now().Add(3 * time.Second)
	for ProgramExists(id) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if ProgramExists(id) {
		t.Fatalf("program %d still loaded 3 s after Close", id)
	}
}

// Stats reads the kernel's XDP_STATISTICS, which need no RX ring: a queue
// nobody drains overflows, and the kernel's drop counters show it.
func TestStatsReadsKernelCounters(t *testing.T) {
	tp := newTopo(t, 1)
	p := openIn(t, tp.app, "h8a1", Options{Pool: 1})
	sender := openIn(t, tp.a, "h8a0", Options{Pool: 1})
	dst := p.Info().MAC
	total := 0
	for range 200 { // 6400 frames into 2048 fill slots and a 2048-slot RX ring, never drained
		total += sendFrames(sender, 32, dst)
	}
	var st Stats
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if st = p.Stats(); st.KernelRxRingFull+st.KernelRxDropped+st.KernelFillEmpty > 0 {
			break
		}
	}
	if st.KernelRxRingFull+st.KernelRxDropped+st.KernelFillEmpty == 0 {
		t.Fatalf("sent %d frames into an undrained queue; kernel counters still zero: %+v", total, st)
	}
	t.Logf("sent %d: rx_ring_full %d rx_dropped %d fill_empty %d", total, st.KernelRxRingFull, st.KernelRxDropped, st.KernelFillEmpty)
}
