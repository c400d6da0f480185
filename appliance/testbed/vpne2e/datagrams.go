package vpne2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// DatagramResult is one run of Datagrams: how many of the datagrams sent
// arrived with exactly the content sent, and how many arrived different.
type DatagramResult struct {
	Count, Sent, Intact, Corrupt, Duplicate int           // Count asked for; Sent is less when a windowed run stalled
	Sending                                 time.Duration // from the first send to the last
}

// Loss is the share of the datagrams asked for that did not arrive
// intact, in percent.
func (r DatagramResult) Loss() float64 {
	if r.Count == 0 {
		return 100
	}
	return 100 * float64(r.Count-r.Intact) / float64(r.Count)
}

func (r DatagramResult) String() string {
	s := fmt.Sprintf("%d of %d intact (%.1f %% lost), %d corrupt, %d duplicate", r.Intact, r.Count, r.Loss(), r.Corrupt, r.Duplicate)
	if r.Sent < r.Count {
		s += fmt.Sprintf("; stalled after %d sent", r.Sent)
	}
	return s
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
// arrives byte for byte. It waits up to 2 s after the last send. The
// sender does not wait for the receiver: a rate above what the slowest
// hop keeps up with (a client or a worker the scheduler starves) fills
// a queue on the way and loses datagrams, which is what a rate
// measurement wants to see and a correctness test does not.
func Datagrams(src, dst *netns.NS, to netip.Addr, size, count, burst int, gap time.Duration) (DatagramResult, error) {
	if burst < 1 {
		return DatagramResult{}, errors.New("vpne2e: bad datagram run")
	}
	return datagrams(src, dst, to, size, count, burst, func(int, *atomic.Int64) bool {
		time.Sleep(gap)
		return true
	})
}

// windowWait bounds how long DatagramsWindowed waits for a window's last
// datagram before it sends the next window anyway (that datagram is then
// lost or late; either shows in the result); windowStalls such waits in a
// row in which nothing arrived end the run early (a path that is down
// would otherwise take windowWait a window).
const (
	windowWait   = time.Second
	windowStalls = 3
)

// DatagramsWindowed is Datagrams with flow control: window datagrams go
// out back to back, and the next window waits until the receiver has the
// last one (or a second passed). At most a window is in flight, so no
// queue on the path (the tun device and socket of a stock client, the
// server's rings) overflows because the scheduler held its reader back
// for a while; what is lost is lost by the path itself, as with an
// application that paces its UDP by replies. A run that stalls ends
// early; Loss counts what it did not send as lost.
func DatagramsWindowed(src, dst *netns.NS, to netip.Addr, size, count, window int) (DatagramResult, error) {
	if window < 1 {
		return DatagramResult{}, errors.New("vpne2e: bad datagram run")
	}
	stalls := 0
	return datagrams(src, dst, to, size, count, window, func(last int, arrived *atomic.Int64) bool {
		before := arrived.Load()
		deadline := time.Now().Add(windowWait)
		for arrived.Load() < int64(last) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		switch {
		case arrived.Load() >= int64(last):
			stalls = 0
		case arrived.Load() == before:
			stalls++
		}
		return stalls < windowStalls
	})
}

// datagrams runs both: after every burst datagrams it calls pause with the
// last sequence number sent and the highest one the receiver has seen (-1
// before the first), and stops sending when pause returns false.
func datagrams(src, dst *netns.NS, to netip.Addr, size, count, burst int, pause func(last int, arrived *atomic.Int64) bool) (DatagramResult, error) {
	res := DatagramResult{Count: count}
	if size < 4 || size > 65000 || count < 1 || count > 1<<20 {
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
	var highest, intact atomic.Int64
	highest.Store(-1)
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
			if int64(seq) > highest.Load() {
				highest.Store(int64(seq))
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
				intact.Add(1)
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
		if (seq+1)%burst == 0 && seq+1 < count && !pause(seq, &highest) {
			break
		}
	}
	res.Sending = time.Since(start)
	deadline := time.Now().Add(2 * time.Second)
	for intact.Load() < int64(res.Sent) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	rc.SetReadDeadline(time.Now())
	t := <-done
	res.Intact, res.Corrupt, res.Duplicate = t.intact, t.corrupt, t.dup
	return res, nil
}
