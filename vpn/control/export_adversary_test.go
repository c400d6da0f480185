package control

// Hooks for the adversarial tests: a client made to misbehave, and a look
// at what the server holds for it.

// MaxSessionBuffer is the most one key of a session may hold unread: its
// stream bound, the message that crosses it and a full receive window.
const MaxSessionBuffer = streamBufferLimit + (reliableRecvWindow+1)*maxControlPayload

// StartClient starts a client without waiting for it to connect; the
// first connection's result arrives on the channel.
func StartClient(cfg ClientConfig) (*Client, <-chan error, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, c.start(), nil
}

// TLSComplete reports whether the client's newest key is through its TLS
// handshake (key method 2 may still be pending).
func (c *Client) TLSComplete() bool {
	s := c.session()
	if s == nil {
		return false
	}
	s.mu.Lock()
	k := s.primary
	s.mu.Unlock()
	return k != nil && k.tls.ConnectionState().HandshakeComplete
}

// WriteControlRaw writes b on the newest key's TLS stream whether or not
// key method 2 is through.
func (c *Client) WriteControlRaw(b []byte) error {
	s := c.session()
	if s == nil {
		return ErrNotConnected
	}
	s.mu.Lock()
	k := s.primary
	s.mu.Unlock()
	_, err := k.tls.Write(b)
	return err
}

// MaxBuffered is the most stream bytes one key of any session holds
// unread (its stream and receive window).
func (s *Server) MaxBuffered() int {
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	most := 0
	for _, sess := range all {
		sess.mu.Lock()
		for _, ks := range [2]*keyState{sess.primary, sess.lame} {
			if ks == nil {
				continue
			}
			n := ks.conn.buffered()
			for _, b := range ks.rel.recvBuf {
				n += len(b)
			}
			most = max(most, n)
		}
		sess.mu.Unlock()
	}
	return most
}
