package nlsync

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// NeighMirror copies the neighbours ovfwd learns into the kernel's
// neighbour table. ovfwd answers and consumes ARP/ND on its ports (the
// steering program redirects them), so without the mirror the kernel's
// own traffic — SSH replies, the VPN control channel — could not resolve
// its next hop. A confirmed entry (it answered ovfwd's question) is
// NUD_PERMANENT and marked as ovfwd's (MirrorFlag, MirrorProtocol): the
// kernel must not probe it (its probes' replies would go to ovfwd), and
// Delete removes it when ovfwd's entry expires. An unconfirmed one (made
// from a request or solicitation to us, anyone's claim) is NUD_STALE, as
// the kernel itself makes one from a solicitation it receives (RFC 4861
// §7.2.3; net/ipv6/ndisc.c ndisc_recv_ns): subject to the kernel's
// garbage collection and its gc_thresh bounds (NTF_EXT_LEARNED and
// permanent entries are exempt from both, net/core/neighbour.c
// neigh_alloc), and verified by the kernel's own probe before it is
// trusted for long, whose answer, going to ovfwd, confirms ovfwd's entry.
// So a flood of solicitations from random sources cannot fill the
// kernel's table with permanent entries.
//
// Make it in the namespace of the ports (its netlink socket stays there).
// It is control plane: any goroutine, serialised by a mutex.
type NeighMirror struct {
	mu     sync.Mutex
	fd     int
	seq    uint32
	buf    []byte
	req    [128]byte // one request: header, ndmsg and three attributes
	kernel unix.SockaddrNetlink
}

// NewNeighMirror opens a NETLINK_ROUTE socket in the calling thread's namespace.
func NewNeighMirror() (*NeighMirror, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("nlsync: netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nlsync: netlink bind: %w", err)
	}
	tv := unix.Timeval{Sec: 2}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return &NeighMirror{fd: fd, buf: make([]byte, 4096), kernel: unix.SockaddrNetlink{Family: unix.AF_NETLINK}}, nil
}

// Set adds or replaces ip → mac on ifindex (netlink RTM_NEWNEIGH, like
// `ip neigh replace … nud permanent extern_learn`, or `nud stale` when
// the entry is not confirmed).
func (m *NeighMirror) Set(ifindex int, ip netip.Addr, mac net.HardwareAddr, confirmed bool) error {
	state, flags := uint16(unix.NUD_STALE), uint8(0)
	if confirmed {
		state, flags = unix.NUD_PERMANENT, MirrorFlag
	}
	return m.do(unix.RTM_NEWNEIGH, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, ip, mac, state, flags)
}

// Delete removes ip from ifindex's neighbours; a missing entry is not an error.
func (m *NeighMirror) Delete(ifindex int, ip netip.Addr) error {
	err := m.do(unix.RTM_DELNEIGH, 0, ifindex, ip, nil, 0, 0)
	if err == unix.ENOENT {
		return nil
	}
	return err
}

// Close closes the netlink socket.
func (m *NeighMirror) Close() error { return unix.Close(m.fd) }

// do sends one request and waits for its ack. A neighbour storm makes
// the daemon call it at the mirror's full rate (2,000 a second), so it
// builds the request in m.req and reads the ack into m.buf: nothing is
// allocated per call (TestNeighMirrorNoGarbage).
func (m *NeighMirror) do(typ uint16, flags uint16, ifindex int, ip netip.Addr, mac net.HardwareAddr, state uint16, ndFlags uint8) error {
	ip = ip.Unmap()
	if !ip.IsValid() {
		return errInvalidNeigh
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	family := uint8(unix.AF_INET)
	if ip.Is6() {
		family = unix.AF_INET6
	}
	msg := m.req[:unix.NLMSG_HDRLEN+unix.SizeofNdMsg]
	clear(msg)
	nd := msg[unix.NLMSG_HDRLEN:] // struct ndmsg
	nd[0] = family
	binary.NativeEndian.PutUint32(nd[4:], uint32(ifindex))
	binary.NativeEndian.PutUint16(nd[8:], state)
	nd[10] = ndFlags
	if ip.Is4() {
		a := ip.As4()
		msg = appendAttr(msg, unix.NDA_DST, a[:])
	} else {
		a := ip.As16()
		msg = appendAttr(msg, unix.NDA_DST, a[:])
	}
	msg = appendAttr(msg, ndaProtocol, []byte{MirrorProtocol})
	if mac != nil {
		msg = appendAttr(msg, unix.NDA_LLADDR, mac)
	}
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	binary.NativeEndian.PutUint32(msg[8:], m.seq)
	if err := unix.Sendto(m.fd, msg, 0, &m.kernel); err != nil {
		return fmt.Errorf("nlsync: netlink send: %w", err)
	}
	for range 8 { // skip anything that is not our ack, boundedly
		// Read, not Recvfrom: only the kernel answers on this socket, and
		// Recvfrom's address is an allocation per call.
		n, err := unix.Read(m.fd, m.buf)
		if err == unix.EINTR {
			continue // see readTimeoutEINTR
		}
		if err != nil {
			return fmt.Errorf("nlsync: netlink receive: %w", err)
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
	return errNoAck
}

var (
	errInvalidNeigh = errors.New("nlsync: neighbour: invalid address")
	errNoAck        = errors.New("nlsync: netlink: no ack")
)

// readTimeoutEINTR: the socket has a receive timeout (SO_RCVTIMEO), and a
// blocking receive on such a socket is not restarted after a signal
// handler even with SA_RESTART (signal(7)); the Go runtime's preemption
// signal interrupts it with EINTR, which is not an answer: read again.

// Purge deletes every entry a mirror wrote (its flag and protocol) on the
// given interfaces — what a previous run that crashed left behind — and
// returns how many.
func (m *NeighMirror) Purge(ifindexes []int) (int, error) {
	var stale []mirroredEntry
	m.mu.Lock()
	m.seq++
	seq := m.seq
	req := make([]byte, unix.NLMSG_HDRLEN+12)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETNEIGH)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], seq)
	err := unix.Sendto(m.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	buf := make([]byte, 1<<16)
	for done, intr := err != nil, 0; !done; {
		var n int
		if n, _, err = unix.Recvfrom(m.fd, buf, 0); err == unix.EINTR && intr < 100 {
			intr++ // see readTimeoutEINTR
			continue
		}
		if err != nil {
			break
		}
		msgs, perr := syscall.ParseNetlinkMessage(buf[:n])
		if perr != nil {
			err = perr
			break
		}
		for _, msg := range msgs {
			if msg.Header.Seq != seq {
				continue
			}
			if msg.Header.Type == unix.NLMSG_DONE || msg.Header.Type == unix.NLMSG_ERROR {
				done = true
				break
			}
			if ifindex, ip, ok := Mirrored(msg.Header.Type, msg.Data); ok && slices.Contains(ifindexes, ifindex) {
				stale = append(stale, mirroredEntry{ifindex, ip})
			}
		}
	}
	m.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("nlsync: neighbour dump: %w", err)
	}
	for _, e := range stale {
		if err := m.Delete(e.ifindex, e.ip); err != nil {
			return 0, err
		}
	}
	return len(stale), nil
}

type mirroredEntry struct {
	ifindex int
	ip      netip.Addr
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
