package control_test

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/control"
)

// TestClientSealNext seals a batch with SealNext and puts it on the wire
// from a socket of its own, as a packet-socket generator would: the
// server must open every packet, the ids must be consecutive and fresh
// across calls, sealing must not allocate, and NoteSending must hold the
// client's own keepalives back.
func TestClientSealNext(t *testing.T) {
	e, c := dialEcho(t, "rita")
	if got := c.RemoteAddr().String(); got != e.addr() {
		t.Errorf("RemoteAddr %s, want %s", got, e.addr())
	}
	p := c.Pushed()
	ip := icmpEcho(p.IPv4.Addr(), p.Gateway4, 0x5253, 1, []byte("raw"))
	const n = 16
	dst := make([][]byte, n)
	for i := range dst {
		dst[i] = make([]byte, 0, vpn.DataHeaderLen+len(ip)+vpn.TagLen)
	}
	if err := c.SealNext(dst, ip); err != nil {
		t.Fatal(err)
	}
	first := binary.BigEndian.Uint32(dst[0][4:])
	for i, pkt := range dst {
		if len(pkt) != vpn.DataHeaderLen+len(ip) {
			t.Fatalf("packet %d: %d bytes, want %d", i, len(pkt), vpn.DataHeaderLen+len(ip))
		}
		if pkt[0]>>3 != vpn.PDataV2 {
			t.Fatalf("packet %d: opcode %d, want P_DATA_V2", i, pkt[0]>>3)
		}
		if id := binary.BigEndian.Uint32(pkt[4:]); id != first+uint32(i) {
			t.Fatalf("packet %d: id %d, want %d", i, id, first+uint32(i))
		}
	}
	conn, err := net.Dial("udp", e.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, pkt := range dst {
		if _, err := conn.Write(pkt); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.opened.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := e.opened.Load(); got < n || e.failed.Load() != 0 {
		t.Fatalf("server opened %d of %d sealed packets, failed %d", got, n, e.failed.Load())
	}
	if err := c.SealNext(dst[:1], ip); err != nil {
		t.Fatal(err)
	}
	if id := binary.BigEndian.Uint32(dst[0][4:]); id != first+n {
		t.Errorf("next call sealed id %d, want %d", id, first+n)
	}
	one := dst[:1]
	one[0] = one[0][:0]
	if a := testing.AllocsPerRun(100, func() {
		_ = c.SealNext(one, ip)
		one[0] = one[0][:0]
	}); a != 0 {
		t.Errorf("SealNext: %v allocations per call, want 0", a)
	}
	// NoteSending holds the client's own keepalive pings (pushed every
	// second here) back; without it one arrives within a ping interval.
	// The check holds only while the calls come well within that interval:
	// a window in which the scheduler held this goroutine back for 500 ms
	// proves nothing either way and is run again (5 windows at most).
	var quiet int64
	for try := 0; ; try++ {
		quiet = e.opened.Load()
		var maxGap time.Duration
		last := time.Now()
		for range 25 {
			c.NoteSending()
			time.Sleep(100 * time.Millisecond)
			now := time.Now()
			maxGap, last = max(maxGap, now.Sub(last)), now
		}
		if maxGap < 500*time.Millisecond {
			break
		}
		if try == 4 {
			t.Fatalf("NoteSending calls were %v apart at worst in each of 5 windows: too loaded to check", maxGap)
		}
		t.Logf("NoteSending calls %v apart at worst; the window proves nothing, again", maxGap)
	}
	if got := e.opened.Load(); got != quiet {
		t.Errorf("%d keepalive pings while NoteSending was called", got-quiet)
	}
	for deadline := time.Now().Add(4 * time.Second); e.opened.Load() == quiet && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if e.opened.Load() == quiet {
		t.Error("no keepalive ping once NoteSending stopped: the check above proves nothing")
	}
	c.Close()
	if err := c.SealNext(dst, ip); !errors.Is(err, control.ErrNotConnected) {
		t.Errorf("SealNext after Close: %v, want ErrNotConnected", err)
	}
}
