package afxdp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"
)

// NeighMirror copies the neighbours ovfwd learns into the kernel's
// neighbour table. ovfwd answers and consumes ARP/ND on its ports (the
// steering program redirects them), so without the mirror the kernel's
// own traffic — SSH replies, the VPN control channel — could not resolve
// its next hop. Entries are NUD_PERMANENT: the kernel must not probe them
// (its probes' replies would go to ovfwd) and Delete removes them when
// ovfwd's entry expires.
//
// Make it in the namespace of the ports (its netlink socket stays there).
// It is control plane: any goroutine, serialised by a mutex.
type NeighMirror struct {
	mu  sync.Mutex
	fd  int
	seq uint32
	buf []byte
}

// NewNeighMirror opens a NETLINK_ROUTE socket in the calling thread's namespace.
func NewNeighMirror() (*NeighMirror, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("afxdp: netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("afxdp: netlink bind: %w", err)
	}
	tv := unix.Timeval{Sec: 2}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return &NeighMirror{fd: fd, buf: make([]byte, 4096)}, nil
}

// Set adds or replaces ip → mac on ifindex (netlink RTM_NEWNEIGH, like
// `ip neigh replace … nud permanent`).
func (m *NeighMirror) Set(ifindex int, ip netip.Addr, mac net.HardwareAddr) error {
	return m.do(unix.RTM_NEWNEIGH, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, ip, mac)
}

// Delete removes ip from ifindex's neighbours; a missing entry is not an error.
func (m *NeighMirror) Delete(ifindex int, ip netip.Addr) error {
	err := m.do(unix.RTM_DELNEIGH, 0, ifindex, ip, nil)
	if err == unix.ENOENT {
		return nil
	}
	return err
}

// Close closes the netlink socket.
func (m *NeighMirror) Close() error { return unix.Close(m.fd) }

func (m *NeighMirror) do(typ uint16, flags uint16, ifindex int, ip netip.Addr, mac net.HardwareAddr) error {
	ip = ip.Unmap()
	if !ip.IsValid() {
		return fmt.Errorf("afxdp: neighbour: invalid address")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	family := uint8(unix.AF_INET)
	if ip.Is6() {
		family = unix.AF_INET6
	}
	msg := make([]byte, unix.NLMSG_HDRLEN, 64)
	// struct ndmsg
	nd := make([]byte, 12)
	nd[0] = family
	binary.NativeEndian.PutUint32(nd[4:], uint32(ifindex))
	binary.NativeEndian.PutUint16(nd[8:], unix.NUD_PERMANENT)
	msg = append(msg, nd...)
	msg = appendAttr(msg, unix.NDA_DST, ip.AsSlice())
	if mac != nil {
		msg = appendAttr(msg, unix.NDA_LLADDR, mac)
	}
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	binary.NativeEndian.PutUint32(msg[8:], m.seq)
	if err := unix.Sendto(m.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("afxdp: netlink send: %w", err)
	}
	for range 8 { // skip anything that is not our ack, boundedly
		n, _, err := unix.Recvfrom(m.fd, m.buf, 0)
		if err != nil {
			return fmt.Errorf("afxdp: netlink receive: %w", err)
		}
		if n < unix.NLMSG_HDRLEN+4 {
			continue
		}
		if binary.NativeEndian.Uint16(m.buf[4:]) != unix.NLMSG_ERROR || binary.NativeEndian.Uint32(m.buf[8:]) != m.seq {
			continue
		}
		if code := int32(binary.NativeEndian.Uint32(m.buf[unix.NLMSG_HDRLEN:])); code != 0 {
			return unix.Errno(-code)
		}
		return nil
	}
	return fmt.Errorf("afxdp: netlink: no ack")
}

func appendAttr(b []byte, typ uint16, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	var h [4]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(l))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(b, h[:]...)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
