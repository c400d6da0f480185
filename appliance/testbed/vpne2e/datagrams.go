package vpne2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// DatagramResult is one run of Datagrams: how many of the datagrams sent
// arrived with exactly the content sent, and how many arrived different.
type DatagramResult struct {
	Sent, Intact, Corrupt, Duplicate int
	Sending                          time.Duration // from the first send to the last
}

// Loss is the share of datagrams that did not arrive intact, in percent.
func (r DatagramResult) Loss() float64 {
	if r.Sent == 0 {
		return 100
	}
	return 100 * float64(r.Sent-r.Intact) / float64(r.Sent)
}

func (r DatagramResult) String() string {
	return fmt.Sprintf("%d of %d intact (%.1f %% lost), %d corrupt, %d duplicate", r.Intact, r.Sent, r.Loss(), r.Corrupt, r.Duplicate)
}

// datagram fills b with datagram seq's content: its sequence number, then
// bytes from a generator seeded by it, so the receiver can check every
// byte of every datagram on its own.
func datagram(b []byte, seq uint32) {
	binary.BigEndian.PutUint32(b, seq)
	r := rand.New(rand.NewPCG(uint64(seq), 0x6f7666776421))
	for i := 4; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
}

// Datagrams sends count UDP datagrams of size bytes of payload each from
// namespace src to a socket it opens in dst on address to, at most
// burst at a time with a pause of gap between bursts, and checks what
// arrives byte for byte. It waits up to 2 s after the last send.
func Datagrams(src, dst *netns.NS, to netip.Addr, size, count, burst int, gap time.Duration) (DatagramResult, error) {
	var res DatagramResult
	if size < 4 || size > 65000 || count < 1 || count > 1<<20 || burst < 1 {
		return res, errors.New("vpne2e: bad datagram run")
	}
	var rc *net.UDPConn
	if err := dst.Do(func() (err error) {
		rc, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, 0)))
		return
	}); err != nil {
		return res, err
	}
	defer rc.Close()
	_ = rc.SetReadBuffer(4 << 20)
	type tally struct{ intact, corrupt, dup int }
	done := make(chan tally, 1)
	go func() {
		var t tally
		seen := make([]bool, count)
		buf, want := make([]byte, size+1), make([]byte, size)
		for {
			n, _, err := rc.ReadFromUDP(buf)
			if err != nil {
				done <- t
				return
			}
			if n < 4 {
				t.corrupt++
				continue
			}
			seq := binary.BigEndian.Uint32(buf)
			if n != size || int(seq) >= count {
				t.corrupt++
				continue
			}
			datagram(want, seq)
			switch {
			case string(buf[:n]) != string(want):
				t.corrupt++
			case seen[seq]:
				t.dup++
			default:
				seen[seq] = true
				t.intact++
			}
		}
	}()
	var sc *net.UDPConn
	if err := src.Do(func() (err error) {
		sc, err = net.DialUDP("udp", nil, rc.LocalAddr().(*net.UDPAddr))
		return
	}); err != nil {
		return res, err
	}
	defer sc.Close()
	b := make([]byte, size)
	start := time.Now()
	for seq := 0; seq < count; seq++ {
		datagram(b, uint32(seq))
		// A failed send (ECONNREFUSED after an ICMP error, ENOBUFS) is
		// loss like any other: the datagram counts as sent.
		_, _ = sc.Write(b)
		res.Sent++
		if (seq+1)%burst == 0 {
			time.Sleep(gap)
		}
	}
	res.Sending = time.Since(start)
	time.Sleep(2 * time.Second)
	rc.SetReadDeadline(time.Now())
	t := <-done
	res.Intact, res.Corrupt, res.Duplicate = t.intact, t.corrupt, t.dup
	return res, nil
}

// HostOffloads turns checksum and segmentation offloads on the LAN host's
// and the clients' veths on or off. NewLab turns them off; on is the
// kernel's default for a veth (and a container's or VM bridge's host).
func (l *Lab) HostOffloads(on bool) error {
	v := "off"
	if on {
		v = "on"
	}
	args := []string{"ethtool", "-K", "", "tx", v, "tso", v, "gso", v}
	args[2] = "lan0"
	if _, err := l.LAN.Run(args...); err != nil {
		return err
	}
	args[2] = "c0"
	for _, c := range l.Clients {
		if _, err := c.Run(args...); err != nil {
			return err
		}
	}
	return nil
}
