//go:build linux

package control

import (
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsgState is the sendmmsg(2) vector of a Batcher.
//
// Invariant for the unsafe pointers below: hdrs[i] points at iovs[i],
// and iovs[i] at pkts[i]'s backing array; both are set immediately before
// the system call from slices the caller keeps alive across it, and the
// kernel only reads them during the call. Nothing is retained afterwards.
type mmsgState struct {
	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
}

func (m *mmsgState) init(max int) {
	m.hdrs = make([]unix.Mmsghdr, max)
	m.iovs = make([]unix.Iovec, max)
}

func (m *mmsgState) send(conn *net.UDPConn, pkts [][]byte) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	for i, p := range pkts {
		m.iovs[i].Base = &p[0]
		m.iovs[i].SetLen(len(p))
		m.hdrs[i] = unix.Mmsghdr{}
		m.hdrs[i].Hdr.Iov = &m.iovs[i]
		m.hdrs[i].Hdr.SetIovlen(1)
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var serr error
	werr := rc.Write(func(fd uintptr) bool {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(len(pkts)), 0, 0, 0)
		if e == unix.EAGAIN {
			return false // wait for the socket to be writable
		}
		if e != 0 {
			serr = e
			return true
		}
		n = int(r)
		return true
	})
	if werr != nil {
		return n, werr
	}
	return n, serr
}
