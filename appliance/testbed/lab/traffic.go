package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// TCPResult is one checksummed transfer.
type TCPResult struct {
	Bytes    int64
	Sent     [32]byte // SHA-256 of what the sender wrote
	Received [32]byte // SHA-256 of what the receiver read
	Elapsed  time.Duration
}

// OK reports whether everything arrived intact.
func (r TCPResult) OK(n int64) bool { return r.Bytes == n && r.Sent == r.Received }

// Transfers tallies checksummed TCP transfers; TransferLoop fills it
// under the caller's mutex, which also guards reading it.
type Transfers struct {
	OK, Bad int
	Bytes   int64
	LastErr error
}

// TransferLoop runs checksummed n-byte transfers from src to
// dsts[i%len(dsts)] in dst back to back until ctx ends, and tallies each
// into t while holding mu. A transfer cut short by ctx is not counted.
func TransferLoop(ctx context.Context, src, dst *netns.NS, dsts []netip.Addr, n int64, mu *sync.Mutex, t *Transfers) {
	for i := 0; i < 1_000_000 && ctx.Err() == nil; i++ {
		res, err := TCPTransfer(ctx, src, dst, dsts[i%len(dsts)], n, 30*time.Second)
		if ctx.Err() != nil {
			return // cut short by the end of the run: not a failure
		}
		mu.Lock()
		switch {
		case err != nil:
			t.Bad++
			t.LastErr = err
		case res.OK(n):
			t.OK++
			t.Bytes += res.Bytes
		default:
			t.Bad++
			t.LastErr = fmt.Errorf("to %s: checksum mismatch after %d bytes", dsts[i%len(dsts)], res.Bytes)
		}
		mu.Unlock()
	}
}

// Summary is t in one line, for transfers of n bytes named what.
func (t Transfers) Summary(what string, n int64) string {
	s := fmt.Sprintf("%s %d transfers of %d MiB ok, %d failed", what, t.OK, n>>20, t.Bad)
	if t.LastErr != nil {
		s += fmt.Sprintf(" (last: %v)", t.LastErr)
	}
	return s
}

// TCPTransfer sends n pseudo-random bytes over TCP from namespace src to
// dst's address to (a listener it opens in dst), and returns both sides'
// checksums. It gives up at the deadline.
func TCPTransfer(ctx context.Context, src, dst *netns.NS, to netip.Addr, n int64, timeout time.Duration) (TCPResult, error) {
	var res TCPResult
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var ln net.Listener
	if err := dst.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(to, 0).String())
		return
	}); err != nil {
		return res, err
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	type rx struct {
		n   int64
		sum [32]byte
		err error
	}
	done := make(chan rx, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- rx{err: err}
			return
		}
		defer c.Close()
		go func() { <-ctx.Done(); c.SetDeadline(time.Now()) }()
		h := sha256.New()
		m, err := io.Copy(h, c)
		var r rx
		r.n, r.err = m, err
		copy(r.sum[:], h.Sum(nil))
		done <- r
	}()
	var c net.Conn
	if err := src.Do(func() (err error) {
		d := net.Dialer{Timeout: 5 * time.Second}
		c, err = d.DialContext(ctx, "tcp", netip.AddrPortFrom(to, uint16(port)).String())
		return
	}); err != nil {
		return res, fmt.Errorf("lab: tcp dial: %w", err)
	}
	go func() { <-ctx.Done(); c.SetDeadline(time.Now()) }()
	start := time.Now()
	h := sha256.New()
	rng := rand.New(rand.NewChaCha8([32]byte{'o', 'v', 'f', 'w', 'd'}))
	buf := make([]byte, 64<<10)
	var sent int64
	var werr error
	for sent < n && werr == nil {
		chunk := buf[:min(int64(len(buf)), n-sent)]
		for i := 0; i+8 <= len(chunk); i += 8 {
			v := rng.Uint64()
			chunk[i], chunk[i+1], chunk[i+2], chunk[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			chunk[i+4], chunk[i+5], chunk[i+6], chunk[i+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
		}
		h.Write(chunk)
		var m int
		m, werr = c.Write(chunk)
		sent += int64(m)
	}
	copy(res.Sent[:], h.Sum(nil))
	c.(*net.TCPConn).CloseWrite()
	r := <-done
	c.Close()
	res.Elapsed = time.Since(start)
	res.Bytes, res.Received = r.n, r.sum
	if werr != nil {
		return res, fmt.Errorf("lab: tcp send after %d bytes: %w", sent, werr)
	}
	if r.err != nil && !errors.Is(r.err, io.EOF) {
		return res, fmt.Errorf("lab: tcp receive after %d bytes: %w", r.n, r.err)
	}
	return res, nil
}

// UDPFlow sends datagrams from src to dst at about pps until ctx ends or
// count are sent, and counts what arrives.
type UDPFlow struct {
	Sent, Received atomic.Uint64
}

// RunUDPFlow runs the flow; it returns when ctx is done or count are sent
// (and what is still in flight had 200 ms to arrive).
func (f *UDPFlow) Run(ctx context.Context, src, dst *netns.NS, to netip.Addr, pps int, count uint64) error {
	var rc *net.UDPConn
	if err := dst.Do(func() (err error) {
		rc, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, 0)))
		return
	}); err != nil {
		return err
	}
	defer rc.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := rc.ReadFromUDP(buf); err != nil {
				return
			}
			f.Received.Add(1)
		}
	}()
	var sc *net.UDPConn
	if err := src.Do(func() (err error) {
		sc, err = net.DialUDP("udp", nil, rc.LocalAddr().(*net.UDPAddr))
		return
	}); err != nil {
		return err
	}
	defer sc.Close()
	payload := bytes.Repeat([]byte{0x5a}, 64)
	const tick = 10 * time.Millisecond
	perTick := max(1, pps/int(time.Second/tick))
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for f.Sent.Load() < count {
		select {
		case <-ctx.Done():
			time.Sleep(200 * time.Millisecond)
			return nil
		case <-tk.C:
		}
		for i := 0; i < perTick && f.Sent.Load() < count; i++ {
			if _, err := sc.Write(payload); err == nil {
				f.Sent.Add(1)
			}
		}
	}
	time.Sleep(200 * time.Millisecond)
	return nil
}
