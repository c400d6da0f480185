//go:build linux

package fullsim

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsgBatch is a set of message headers for recvmmsg/sendmmsg, one
// single-iovec message each.
//
// Invariant for the unsafe uses: hdrs and iovs are heap arrays owned by
// the batch, and every iovec points into a buffer the Wire owns for its
// whole life (its receive buffers or its transmit ring), so the kernel
// only ever writes into or reads from live Go memory; the Go heap does not
// move objects, and the header array's address is converted to uintptr in
// the syscall's argument list, which keeps it alive for the call.
type mmsgBatch struct {
	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
}

func newMmsgBatch(n int) *mmsgBatch {
	b := &mmsgBatch{hdrs: make([]unix.Mmsghdr, n), iovs: make([]unix.Iovec, n)}
	for i := range b.hdrs {
		b.hdrs[i].Hdr.Iov = &b.iovs[i]
		b.hdrs[i].Hdr.SetIovlen(1)
	}
	return b
}

// point makes message i carry buf.
func (b *mmsgBatch) point(i int, buf []byte) {
	b.iovs[i].Base = &buf[0]
	b.iovs[i].SetLen(len(buf))
}

// recv receives up to len(hdrs) frames without blocking; hdrs[i].Len is the
// length of frame i and Hdr.Flags carries MSG_TRUNC when it did not fit.
func (b *mmsgBatch) recv(fd uintptr) (int, unix.Errno) {
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), uintptr(len(b.hdrs)),
		unix.MSG_DONTWAIT, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

// send sends messages [from, to) without blocking and returns how many the
// kernel took.
func (b *mmsgBatch) send(fd uintptr, from, to int) (int, unix.Errno) {
	n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[from])), uintptr(to-from),
		unix.MSG_DONTWAIT, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}
