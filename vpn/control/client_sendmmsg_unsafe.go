//go:build linux

package control

import (
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mmsg is a reusable sendmmsg(2) vector: the Batcher sends through it, and
// load generators with a socket of their own (a packet socket) may too.
//
// Invariant for the unsafe pointers below: hdrs[i] points at iovs[i], and
// iovs[i] at pkts[i]'s backing array; SendFD sets them immediately before
// the system call from slices the caller keeps alive across it, and the
// kernel only reads them during the call. Nothing is retained afterwards.
type Mmsg struct {
	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
}

// NewMmsg makes a vector for up to max datagrams per call.
func NewMmsg(max int) *Mmsg {
	return &Mmsg{hdrs: make([]unix.Mmsghdr, max), iovs: make([]unix.Iovec, max)}
}

// SendFD sends pkts (at most max, none empty) on fd with one sendmmsg and
// returns how many the kernel took; the kernel stops at the first datagram
// it refuses, whose error is returned when it was the first.
func (m *Mmsg) SendFD(fd uintptr, pkts [][]byte) (int, unix.Errno) {
	if len(pkts) == 0 {
		return 0, 0
	}
	for i, p := range pkts {
		m.iovs[i].Base = &p[0]
		m.iovs[i].SetLen(len(p))
		m.hdrs[i] = unix.Mmsghdr{}
		m.hdrs[i].Hdr.Iov = &m.iovs[i]
		m.hdrs[i].Hdr.SetIovlen(1)
	}
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(len(pkts)), 0, 0, 0)
	return int(r), e
}

// mmsgState is the Batcher's sendmmsg on its client's UDP socket.
type mmsgState struct{ m *Mmsg }

func (s *mmsgState) init(max int) { s.m = NewMmsg(max) }

func (s *mmsgState) send(conn *net.UDPConn, pkts [][]byte) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var serr error
	werr := rc.Write(func(fd uintptr) bool {
		r, e := s.m.SendFD(fd, pkts)
		if e == unix.EAGAIN {
			return false // wait for the socket to be writable
		}
		if e != 0 {
			serr = e
			return true
		}
		n = r
		return true
	})
	if werr != nil {
		return n, werr
	}
	return n, serr
}
