package mgmt

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// outboxLimit bounds a connection's unsent notifications: past it, log,
// state and bytecount lines are dropped (and counted) rather than wait for
// a client that does not read.
const outboxLimit = 256 << 10

// writeTimeout is how long one write to a client may block before the
// connection is closed as dead.
const writeTimeout = 30 * time.Second

// outbox is one connection's output, written by its own goroutine, so
// whoever produces a line (the daemon's logging, the bytecount timer, the
// command reader) never waits on the client's socket.
type outbox struct {
	c       net.Conn
	dropped *atomic.Uint64 // the server's count of dropped notifications

	mu     sync.Mutex
	buf    []byte
	lost   uint64 // this connection's dropped notifications
	closed bool
	ready  chan struct{} // something to write
	room   chan struct{} // the writer took the buffer
	done   chan struct{} // the writer has stopped
}

func newOutbox(c net.Conn, dropped *atomic.Uint64) *outbox {
	o := &outbox{c: c, dropped: dropped, ready: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{})}
	go o.run()
	return o
}

// notify queues an asynchronous line, or drops it when the client is
// outboxLimit behind.
func (o *outbox) notify(b []byte) {
	o.mu.Lock()
	if o.closed || len(o.buf)+len(b) > outboxLimit {
		o.lost++
		o.mu.Unlock()
		o.dropped.Add(1)
		return
	}
	o.buf = append(o.buf, b...)
	o.mu.Unlock()
	o.signal(o.ready)
}

// reply queues a command's answer whole; replyRoom keeps the reader from
// queueing more than one answer past outboxLimit.
func (o *outbox) reply(b []byte) {
	o.mu.Lock()
	if !o.closed {
		o.buf = append(o.buf, b...)
	}
	o.mu.Unlock()
	o.signal(o.ready)
}

// replyRoom waits until the outbox is under its limit before the next
// command is read; false once the connection is closed.
func (o *outbox) replyRoom() bool {
	for {
		o.mu.Lock()
		n, closed := len(o.buf), o.closed
		o.mu.Unlock()
		if closed {
			return false
		}
		if n < outboxLimit {
			return true
		}
		select {
		case <-o.room:
		case <-o.done:
			return false
		}
	}
}

func (o *outbox) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run writes what is queued until the outbox is closed and empty or a
// write fails; a failed or stuck write closes the connection.
func (o *outbox) run() {
	defer close(o.done)
	var out []byte
	for {
		o.mu.Lock()
		out, o.buf = o.buf, out[:0]
		closed := o.closed
		o.mu.Unlock()
		o.signal(o.room)
		if len(out) == 0 {
			if closed {
				return
			}
			<-o.ready
			continue
		}
		_ = o.c.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := o.c.Write(out); err != nil {
			o.mu.Lock()
			o.closed = true
			o.buf = nil
			o.mu.Unlock()
			o.c.Close()
			return
		}
	}
}

// close lets the writer finish what is queued (within writeTimeout) and
// stop; it returns how many notifications the connection lost.
func (o *outbox) close() uint64 {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.signal(o.ready)
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lost
}
