package control

import "time"

// SkipPacketIDs moves the client's transmit packet id to id (tests of the
// wrap-triggered renegotiation).
func (c *Client) SkipPacketIDs(id uint32) {
	if d := c.data.Load(); d != nil {
		d.tx.sent.Store(id)
	}
}

// SetHandshakeSilence shortens the stalled-handshake restart for a test and
// returns the function that restores it.
func SetHandshakeSilence(d time.Duration) (restore func()) {
	old := handshakeSilence
	handshakeSilence = d
	return func() { handshakeSilence = old }
}
