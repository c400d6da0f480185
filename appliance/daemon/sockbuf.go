package daemon

import (
	"errors"
	"net"

	"golang.org/x/sys/unix"
)

// controlSocketBuffer is the VPN control socket's receive and send buffer.
// The kernel default (about 208 KiB) overflowed at 300 simultaneous
// handshakes (UdpRcvbufErrors): each client's hard reset, TLS records and
// retransmissions arrive in bursts the single reader cannot drain at once.
const controlSocketBuffer = 4 << 20

// setSocketBuffers sets conn's receive and send buffers to size bytes,
// past net.core.{r,w}mem_max when the process has CAP_NET_ADMIN
// (SO_RCVBUFFORCE), else as far as those limits allow. It returns the
// sizes in effect, in the units they were asked in (Linux reports twice
// the requested value, the rest being its bookkeeping; socket(7)).
func setSocketBuffers(conn net.PacketConn, size int) (rcv, snd int, err error) {
	uc, ok := conn.(*net.UDPConn)
	if !ok {
		return 0, 0, errors.New("not a UDP socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var errs []error
	cerr := raw.Control(func(fd uintptr) {
		for _, o := range [...]struct{ force, plain int }{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o.force, size) != nil {
				// No CAP_NET_ADMIN: the plain option, capped at *mem_max.
				if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o.plain, size); e != nil {
					errs = append(errs, e)
				}
			}
		}
		r, e1 := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		s, e2 := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		rcv, snd = r/2, s/2
		errs = append(errs, e1, e2)
	})
	return rcv, snd, errors.Join(cerr, errors.Join(errs...))
}
