package control

import (
	"errors"
	"net"
	"sync"
	"time"
)

// streamConn is the net.Conn crypto/tls runs over: Read returns the
// in-order payload bytes of received P_CONTROL_V1 packets of one key,
// Write hands TLS bytes to the reliability layer (ssl.c
// write_outgoing_tls_ciphertext). TLS
// records cross packet boundaries freely; the control channel is a byte
// stream.
type streamConn struct {
	mu     sync.Mutex
	cond   *sync.Cond
	in     []byte
	closed bool
	write  func([]byte) error
	local  net.Addr
	remote net.Addr
}

var errConnClosed = errors.New("control channel closed")

func newStreamConn(write func([]byte) error, local, remote net.Addr) *streamConn {
	c := &streamConn{write: write, local: local, remote: remote}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// deliver appends received bytes; it never blocks.
func (c *streamConn) deliver(b []byte) {
	c.mu.Lock()
	if !c.closed {
		c.in = append(c.in, b...)
		c.cond.Broadcast()
	}
	c.mu.Unlock()
}

// buffered is how many received bytes wait for Read.
func (c *streamConn) buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.in)
}

func (c *streamConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.in) == 0 && !c.closed {
		c.cond.Wait()
	}
	if len(c.in) == 0 {
		return 0, errConnClosed
	}
	n := copy(b, c.in)
	c.in = c.in[n:]
	if len(c.in) == 0 {
		c.in = nil
	}
	return n, nil
}

func (c *streamConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return 0, errConnClosed
	}
	if err := c.write(append([]byte(nil), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (c *streamConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	return nil
}

func (c *streamConn) LocalAddr() net.Addr  { return c.local }
func (c *streamConn) RemoteAddr() net.Addr { return c.remote }

// Deadlines are not used: the session's hand-window timer closes the conn
// instead.
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }
