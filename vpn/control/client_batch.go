package control

import (
	"errors"

	"github.com/ovfwd/ovfwd/vpn"
)

// Batcher seals and sends many inner packets with one system call
// (sendmmsg on Linux), for load generators. A Batcher belongs to one
// goroutine; its buffers are reused by every Send.
type Batcher struct {
	c    *Client
	bufs [][]byte
	out  [][]byte
	mm   mmsgState
}

// NewBatcher makes a Batcher for up to max packets of up to mtu bytes per
// Send.
func (c *Client) NewBatcher(max, mtu int) *Batcher {
	b := &Batcher{c: c, bufs: make([][]byte, max), out: make([][]byte, 0, max)}
	for i := range b.bufs {
		b.bufs[i] = make([]byte, 0, vpn.DataHeaderLen+mtu+vpn.TagLen)
	}
	b.mm.init(max)
	return b
}

// Send seals pkts (at most max of them) and sends them; it returns how
// many the kernel accepted.
func (b *Batcher) Send(pkts [][]byte) (int, error) {
	if len(pkts) > len(b.bufs) {
		return 0, errors.New("control: batch larger than the Batcher")
	}
	d := b.c.data.Load()
	if d == nil {
		return 0, ErrNotConnected
	}
	k := d.tx
	last := k.sent.Add(uint32(len(pkts)))
	first := last - uint32(len(pkts)) + 1
	if last < first || first == 0 {
		return 0, errors.New("control: data packet id exhausted")
	}
	b.out = b.out[:0]
	for i, p := range pkts {
		b.out = append(b.out, k.dk.Seal(b.bufs[i][:0], d.peerID, first+uint32(i), p))
	}
	n, err := b.mm.send(b.c.conn, b.out)
	b.c.txPackets.Add(uint64(n))
	if n > 0 {
		b.c.lastSend.Store(b.c.since())
	}
	return n, err
}
