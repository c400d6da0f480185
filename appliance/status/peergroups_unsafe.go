package status

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// peerGroups returns the supplementary groups the peer of the unix socket
// fd had when it connected (SO_PEERGROUPS, Linux 4.13; net/core/sock.c,
// sk_getsockopt). unix.GetsockoptString cannot carry them: it cuts its
// result at the first zero byte.
//
// Invariant: the kernel writes at most size bytes at &gids[0] and stores
// in size the bytes it wrote, or with ERANGE the bytes it needs; gids and
// size live across the call.
func peerGroups(fd int) ([]uint32, error) {
	gids := make([]uint32, 64)
	for range 3 { // a peer's groups are fixed, so the second size fits
		size := uint32(len(gids) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&gids[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch e {
		case 0:
			return gids[:size/4], nil
		case unix.ERANGE:
			gids = make([]uint32, size/4+1)
		default:
			return nil, e
		}
	}
	return nil, unix.ERANGE
}
