package control

import (
	"errors"
	"net"
	"net/netip"
)

// Raw access for load generators that put the client's data packets on
// the wire themselves (a packet socket on the client's link), bypassing
// the client's UDP socket: they seal with SealNext and address the frames
// from LocalAddr to RemoteAddr, so the server cannot tell them from
// packets the socket would have sent.

// RemoteAddr is the server address the client's UDP socket is connected
// to.
func (c *Client) RemoteAddr() netip.AddrPort {
	return c.conn.RemoteAddr().(*net.UDPAddr).AddrPort()
}

// SealNext seals ip as the client's next len(dst) data packets: the
// packet ids are reserved with one atomic add on the current transmit
// key, and dst[i] is replaced by the sealed packet written from its start
// (it allocates nothing when cap(dst[i]) is at least
// vpn.DataHeaderLen+len(ip)+vpn.TagLen). Each call reads the current key,
// so after a renegotiation the next call seals with the new key. The
// packets count as sent (TxPackets, and no keepalive ping is needed
// while they flow); sending them is the caller's business.
func (c *Client) SealNext(dst [][]byte, ip []byte) error {
	if len(dst) == 0 {
		return nil
	}
	d := c.data.Load()
	if d == nil {
		return ErrNotConnected
	}
	k := d.tx
	n := uint32(len(dst))
	last := k.sent.Add(n)
	first := last - n + 1
	if last < first || first == 0 || uint64(len(dst)) > 1<<31 {
		return errors.New("control: data packet id exhausted")
	}
	for i := range dst {
		dst[i] = k.dk.Seal(dst[i][:0], d.peerID, first+uint32(i), ip)
	}
	c.txPackets.Add(uint64(n))
	c.lastSend.Store(c.since())
	return nil
}

// NoteSending tells the client that data packets sealed earlier with
// SealNext are being sent now, so it sends no keepalive ping of its own
// for another ping interval: a ping would carry a newer packet id than
// the sealed packets still to come, and a server whose replay window is
// shorter than the gap would then reject them.
func (c *Client) NoteSending() { c.lastSend.Store(c.since()) }
