package control

// SkipPacketIDs moves the client's transmit packet id to id (tests of the
// wrap-triggered renegotiation).
func (c *Client) SkipPacketIDs(id uint32) {
	if d := c.data.Load(); d != nil {
		d.tx.sent.Store(id)
	}
}
