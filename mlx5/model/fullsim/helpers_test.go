package fullsim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

var testMAC = net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x00, 0x01}

// udpFrame builds an Ethernet/IPv4/UDP frame of exactly size bytes (≥ 46)
// to the model's MAC, with random addresses and ports and seq in the payload.
func udpFrame(r *rand.Rand, size int, seq uint32) []byte {
	f := make([]byte, size)
	copy(f[0:6], testMAC)
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 0x99})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	ip[8] = 64
	ip[9] = 17
	binary.BigEndian.PutUint32(ip[12:], 0xC6120000|r.Uint32()&0xFFFF) // 198.18/16
	binary.BigEndian.PutUint32(ip[16:], 0xC6130000|r.Uint32()&0xFFFF) // 198.19/16
	var s uint32
	for i := 0; i < 20; i += 2 {
		s += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for s > 0xFFFF {
		s = s&0xFFFF + s>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(s))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], uint16(r.Uint32()))
	binary.BigEndian.PutUint16(udp[2:], uint16(r.Uint32()))
	binary.BigEndian.PutUint16(udp[4:], uint16(size-34))
	binary.BigEndian.PutUint32(udp[8:], seq)
	for i := 12; i < len(udp); i++ {
		udp[i] = byte(r.Uint32())
	}
	return f
}

// expectedQueue is the queue RSS must pick for an IPv4/UDP frame with the
// default key over a 2-bucket RQT, computed independently of the route cache.
func expectedQueue(f []byte, queues int) int {
	var key [prm.ToeplitzKeySize + 8]byte
	copy(key[:], mlx5.DefaultRSSKey[:])
	in := append(append([]byte(nil), f[26:34]...), f[34:38]...)
	size := 1
	for size < queues {
		size <<= 1
	}
	return int(toeplitz(&key, in)%uint32(size)) % queues
}

// capture records a queue's transmitted frames.
type capture struct{ frames [][]byte }

func (c *capture) sink(f []byte) { c.frames = append(c.frames, bytes.Clone(f)) }

// drain receives everything waiting on queue q of p, returning copies, and
// leaves the packets in b (for Tx or Free).
func drain(t testing.TB, p fwd.Port, q int, b *fwd.Batch) [][]byte {
	t.Helper()
	var got [][]byte
	for i := 0; i < 64 && b.Room() > 0; i++ {
		if p.Rx(q, b) == 0 {
			break
		}
	}
	for i := range b.Pkts {
		got = append(got, bytes.Clone(b.Pkts[i].Data()))
	}
	return got
}

func checkEmpty(t testing.TB, d *Device) {
	t.Helper()
	if err := d.Leaks(); err != nil {
		t.Fatal(err)
	}
}

func seqOf(f []byte) uint32 { return binary.BigEndian.Uint32(f[42:]) }

func describe(f []byte) string {
	return fmt.Sprintf("%d bytes seq %d", len(f), seqOf(f))
}
