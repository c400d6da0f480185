package exctap_test

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

// TestExceptionTAPReassembles: on ports the kernel never sees, datagrams
// to the appliance that arrive fragmented (a VPN client's full-size
// P_DATA_V2 at tun-mtu 1500, here a 4,000-byte UDP echo) reach the host
// stack through the TAP, which reassembles them for its socket, and the
// fragmented answer goes back out; the engine counts the fragments it
// handed up. Before, the first fragment was dropped as malformed and no
// datagram was ever reassembled.
func TestExceptionTAPReassembles(t *testing.T) {
	l := startLab(t)
	defer l.logCounters(t)
	for i, to := range []netip.Addr{portAddrs[0][0].Addr(), portAddrs[0][1].Addr()} {
		ap := netip.AddrPortFrom(to, 7008)
		udpEcho(t, l.M, ap)
		var c *net.UDPConn
		if err := l.A.Do(func() (err error) { c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(ap)); return }); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		msg := bytes.Repeat([]byte(fmt.Sprintf("fragment %d ", i)), 400)[:4000]
		buf := make([]byte, 65536)
		got := false
		for try := 0; try < 10 && !got; try++ {
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			n, err := c.Read(buf)
			got = err == nil && bytes.Equal(buf[:n], msg)
		}
		if !got {
			t.Fatalf("no intact echo of a 4,000-byte datagram from %v", ap)
		}
	}
	st := l.engine.Stats()
	if st.HostFragments < 2*3 || st.Drops[fwd.DropMalformed] != 0 {
		t.Fatalf("host fragments %d, malformed %d: want ≥ 6 and 0", st.HostFragments, st.Drops[fwd.DropMalformed])
	}
}
