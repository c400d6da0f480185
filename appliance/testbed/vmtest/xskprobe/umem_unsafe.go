package main

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// unsafePointer is the UMEM's address for XDP_UMEM_REG; the mapping lives
// until bindZeroCopy returns, past the socket that registered it.
func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

func setUmemReg(fd int, r *unix.XDPUmemReg) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
		uintptr(unsafe.Pointer(r)), unsafe.Sizeof(*r), 0)
	if e != 0 {
		return e
	}
	return nil
}
