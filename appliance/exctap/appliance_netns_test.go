package exctap_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/exctap"
	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5/model/fullsim"
)

// The lab: host A ⇄ veth ⇄ [appliance namespace: model port 0 | engine |
// model port 1, plus exception TAPs ovx-0 and ovx-1 carrying the ports'
// addresses] ⇄ veth ⇄ host B. The veth ends in the appliance namespace
// have no address: the kernel there sees the wire only through the TAPs.
var (
	portAddrs = [2][]netip.Prefix{
		{netip.MustParsePrefix("198.18.40.254/24"), netip.MustParsePrefix("2001:db8:40::fe/64")},
		{netip.MustParsePrefix("198.18.41.254/24"), netip.MustParsePrefix("2001:db8:41::fe/64")},
	}
	hostAddrs = [2][]netip.Prefix{
		{netip.MustParsePrefix("198.18.40.1/24"), netip.MustParsePrefix("2001:db8:40::1/64")},
		{netip.MustParsePrefix("198.18.41.1/24"), netip.MustParsePrefix("2001:db8:41::1/64")},
	}
)

func portMAC(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x00, 0x5e, 0x53, 0x00, byte(i + 1)}
}

type xlab struct {
	A, M, B *netns.NS
	engine  *fwd.Engine
	taps    exctap.Ports
	run     *runner.Runner
}

// startLab builds the topology and runs the engine on two mlx5-sim ports
// with a TAP per port; everything is torn down when the test ends.
func startLab(t *testing.T) *xlab {
	t.Helper()
	l := &xlab{A: nstest.New(t, "xtapa"), M: nstest.New(t, "xtapm"), B: nstest.New(t, "xtapb")}
	wires := []string{"xa1", "xb1"}
	nstest.Link(t, l.A, "xa0", l.M, wires[0])
	nstest.Link(t, l.B, "xb0", l.M, wires[1])
	for _, ifn := range wires {
		// The wires stand for NICs the kernel never sees. It does see these
		// veths, so keep it off them: no IPv6, and no ARP answers for the
		// addresses the TAPs give it (arp_ignore 8), which it would
		// otherwise give with the veth's MAC.
		nstest.Run(t, l.M, "sysctl", "-q", "-w", "net.ipv6.conf."+ifn+".disable_ipv6=1")
		nstest.Run(t, l.M, "sysctl", "-q", "-w", "net.ipv4.conf."+ifn+".arp_ignore=8")
		nstest.Run(t, l.M, "ethtool", "-K", ifn, "rxvlan", "off")
	}
	for i, h := range []struct {
		ns  *netns.NS
		ifn string
	}{{l.A, "xa0"}, {l.B, "xb0"}} {
		// Checksum offload stays on (the engine finishes what the hosts
		// leave unfinished); segmentation off as in simlab: this veth is
		// the far end of the model's cable (fullsim.Wire), which carries
		// frames of the link's MTU, not 64 KiB GSO super-packets.
		nstest.Run(t, h.ns, "ethtool", "-K", h.ifn, "tso", "off", "gso", "off")
		for _, a := range hostAddrs[i] {
			nstest.Run(t, h.ns, "ip", "addr", "add", a.String(), "dev", h.ifn, "nodad")
		}
		nstest.Run(t, h.ns, "ip", "-4", "route", "add", "default", "via", portAddrs[i][0].Addr().String())
		nstest.Run(t, h.ns, "ip", "-6", "route", "add", "default", "via", portAddrs[i][1].Addr().String())
	}

	var ports []fwd.Port
	for i, ifn := range wires {
		p, dev, err := fullsim.NewPort(fmt.Sprintf("sim%d", i), portMAC(i), 1500, 1)
		if err != nil {
			t.Fatal(err)
		}
		var w *fullsim.Wire
		if err := l.M.Do(func() (err error) { w, err = fullsim.AttachWire(dev, ifn); return }); err != nil {
			p.Close()
			t.Fatal(err)
		}
		// Cleanups run last-in first-out: workers stop before the wire
		// closes, the wire before the port.
		t.Cleanup(func() {
			if err := p.Close(); err != nil {
				t.Errorf("port %d: %v", i, err)
			}
		})
		t.Cleanup(func() { w.Close() })
		ports = append(ports, p)
	}
	e, err := fwd.New(fwd.Config{Mode: fwd.ModeRouter}, ports)
	if err != nil {
		t.Fatal(err)
	}
	l.engine = e
	for i := range ports {
		for _, a := range portAddrs[i] {
			if err := e.AddAddress(i, a); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.SetHostCopies(i, true); err != nil {
			t.Fatal(err)
		}
		var tap *exctap.TAP
		if err := l.M.Do(func() (err error) { tap, err = exctap.New(exctap.Name(i), portMAC(i), 1500); return }); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tap.Close() })
		for _, a := range portAddrs[i] {
			nstest.Run(t, l.M, "ip", "addr", "add", a.String(), "dev", tap.Name(), "nodad")
		}
		tap.Start(e, i)
		l.taps = append(l.taps, tap)
	}

	// The daemon's loop; punts drained often: the ring is 64 frames per worker.
	run, err := runner.Start(e, ports, runner.Options{Interval: time.Millisecond, Punt: l.taps.Deliver})
	if err != nil {
		t.Fatal(err)
	}
	l.run = run
	t.Cleanup(func() { run.Stop(0) })
	return l
}

func (l *xlab) logCounters(t *testing.T) {
	punts := l.run.Punts()
	st := l.engine.Stats()
	t.Logf("engine: punts %d, inject %+v, ports %+v", punts, l.engine.InjectStats(), st.Ports)
	for r, n := range st.Drops {
		if n > 0 {
			t.Logf("engine drop %s: %d", fwd.DropReason(r), n)
		}
	}
	for _, tap := range l.taps {
		t.Logf("%s: %+v", tap.Name(), tap.Stats())
	}
}

// udpEcho answers datagrams (of up to 64 KiB) on addr in ns until the
// test ends.
func udpEcho(t *testing.T, ns *netns.NS, addr netip.AddrPort) {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() (err error) { c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr)); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
}

// udpAsk sends a datagram from ns to addr and waits for the echo, retrying
// a few times (the first may wait on neighbour resolution).
func udpAsk(ns *netns.NS, addr netip.AddrPort, msg string) error {
	var c *net.UDPConn
	if err := ns.Do(func() (err error) { c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr)); return }); err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 2048)
	for range 10 {
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := c.Read(buf)
		if err == nil && string(buf[:n]) == msg {
			return nil
		}
	}
	return fmt.Errorf("no echo of %q from %v", msg, addr)
}

// TestExceptionTAPHostReachable: through the NIC the engine owns, host A
// reaches services of the appliance's own kernel — TCP (checksummed
// transfer) and UDP echo on the ports' addresses, IPv4 and IPv6, the near
// port's and the far port's — while routed traffic A⇄B keeps flowing
// through the engine.
func TestExceptionTAPHostReachable(t *testing.T) {
	l := startLab(t)
	ctx := context.Background()
	defer l.logCounters(t)

	// Routed traffic keeps running in the background the whole time.
	const routedBytes = 4 << 20
	routed := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 3 && err == nil; i++ {
			var res lab.TCPResult
			res, err = lab.TCPTransfer(ctx, l.A, l.B, hostAddrs[1][0].Addr(), routedBytes, 30*time.Second)
			if err == nil && !res.OK(routedBytes) {
				err = fmt.Errorf("routed transfer %d: %d bytes, checksums differ", i, res.Bytes)
			}
		}
		routed <- err
	}()

	// The engine's own echo responder.
	for _, a := range []netip.Prefix{portAddrs[0][0], portAddrs[0][1]} {
		if out, err := l.A.Run("ping", "-c", "2", "-i", "0.2", "-W", "2", a.Addr().String()); err != nil {
			t.Fatalf("ping %v: %v\n%s", a.Addr(), err, out)
		}
	}

	// Kernel-only services in the appliance namespace, on the ports' addresses.
	const kernelBytes = 1 << 20
	for _, to := range []netip.Addr{portAddrs[0][0].Addr(), portAddrs[0][1].Addr(), portAddrs[1][0].Addr()} {
		res, err := lab.TCPTransfer(ctx, l.A, l.M, to, kernelBytes, 20*time.Second)
		if err != nil || !res.OK(kernelBytes) {
			t.Fatalf("TCP to the appliance's kernel at %v: %d bytes: %v", to, res.Bytes, err)
		}
	}
	for _, to := range []netip.Addr{portAddrs[0][0].Addr(), portAddrs[0][1].Addr()} {
		ap := netip.AddrPortFrom(to, 7007)
		udpEcho(t, l.M, ap)
		if err := udpAsk(l.A, ap, "hello "+to.String()); err != nil {
			t.Fatal(err)
		}
	}
	// From B too, through the other port's TAP.
	if err := udpAsk(l.B, netip.AddrPortFrom(portAddrs[0][0].Addr(), 7007), "from b"); err != nil {
		t.Fatal(err)
	}

	if err := <-routed; err != nil {
		t.Fatalf("routed A→B: %v", err)
	}
	if out, err := l.A.Run("ping", "-c", "2", "-i", "0.2", "-W", "2", hostAddrs[1][1].Addr().String()); err != nil {
		t.Fatalf("routed ping6 A→B: %v\n%s", err, out)
	}

	st := l.engine.Stats()
	inj := l.engine.InjectStats()
	s0 := l.taps[0].Stats()
	// Three 1 MiB transfers into the host: at least that many full frames
	// went up through TAP 0, and its ACKs down through Inject.
	if s0.ToHost < 3*kernelBytes/1500 || s0.FromHost < 100 || inj.Sent < s0.FromHost {
		t.Fatalf("the host's traffic did not go through TAP 0: %+v, inject %+v", s0, inj)
	}
	// The routed megabytes did not go through the host.
	if st.Ports[1].TxBytes < 3*routedBytes || s0.ToHost > 10000 {
		t.Fatalf("routed traffic: port 1 tx %d bytes, TAP 0 to host %d frames", st.Ports[1].TxBytes, s0.ToHost)
	}
}
