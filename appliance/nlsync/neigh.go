package nlsync

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"

	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The neighbour subscription reads its own socket rather than netlink's
// NeighSubscribe: that one allocates a 64 KiB receive buffer per message
// (nl.NetlinkSocket.Receive), and every entry the kernel mirror writes
// comes back as a message, so a neighbour storm (2,000 mirror writes a
// second) made about 100 MiB/s of garbage and grew the Go heap by 10 MiB.
// Here one buffer serves every read and an update is a value.

// neighUpdate is one RTM_NEWNEIGH or RTM_DELNEIGH (struct ndmsg and the
// attributes nlsync uses, linux/neighbour.h).
type neighUpdate struct {
	typ     uint16
	ifindex int
	state   uint16
	flags   uint8
	ip      netip.Addr
	mac     [6]byte
	macLen  int
	proto   uint8 // NDA_PROTOCOL, 0 without it
}

// neighRcvBuf is the size of the one receive buffer: the largest message
// batch a dump reply packs into one read (the kernel sizes dump skbs by
// the reader's buffer, up to 32 KiB; notifications are single messages).
const neighRcvBuf = 64 << 10

// subscribeNeigh opens a NETLINK_ROUTE socket joined to RTNLGRP_NEIGH in
// s's namespace, asks for a dump of the current table, and sends every
// update to ch until done closes or the socket fails (ENOBUFS: then ch is
// closed and follow subscribes again).
func (s *Sync) subscribeNeigh(ch chan<- neighUpdate, done <-chan struct{}, onErr func(error)) error {
	if ns := s.foreign(); ns != nil { // tests only (see Start); the thread is locked
		cur, err := vnetns.Get()
		if err != nil {
			return err
		}
		defer cur.Close()
		if err := vnetns.Set(*ns); err != nil {
			return err
		}
		defer vnetns.Set(cur) //nolint:errcheck // back to the thread's own namespace
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (unix.RTNLGRP_NEIGH - 1)}); err != nil {
		unix.Close(fd)
		return err
	}
	req := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofNdMsg)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETNEIGH)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], 1)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return err
	}
	f := os.NewFile(uintptr(fd), "netlink-neigh") // non-blocking: Close wakes the reader
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	exit := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-exit:
		}
		f.Close()
	}()
	go func() {
		defer close(ch)
		defer close(exit) // a failed socket is closed before follow opens the next
		buf := make([]byte, neighRcvBuf)
		var n int
		var rerr error
		// Read, not Recvfrom: the sender needs no check, as only the
		// kernel or a CAP_NET_ADMIN process may send to a NETLINK_ROUTE
		// socket (net/netlink/af_netlink.c, netlink_sendmsg), and the
		// address Recvfrom returns is an allocation per read.
		read := func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf)
			return rerr != unix.EAGAIN
		}
		send := func(u neighUpdate) { ch <- u }
		for {
			if err := rc.Read(read); err != nil {
				return // closed
			}
			if rerr != nil {
				onErr(rerr)
				return
			}
			if err := parseNeighMsgs(buf[:n], send); err != nil {
				onErr(err)
				return
			}
		}
	}()
	return nil
}

// parseNeighMsgs calls fn with each neighbour message in b and returns
// the first netlink error it carries. Messages of other types and
// truncated ones are skipped.
func parseNeighMsgs(b []byte, fn func(neighUpdate)) error {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return nil
		}
		typ := binary.NativeEndian.Uint16(b[4:])
		m := b[unix.NLMSG_HDRLEN:l]
		b = b[min((l+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1), len(b)):]
		switch typ {
		case unix.NLMSG_ERROR:
			if len(m) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(m)); code != 0 {
					return fmt.Errorf("netlink: %w", unix.Errno(-code))
				}
			}
		case unix.RTM_NEWNEIGH, unix.RTM_DELNEIGH:
			if u, ok := parseNeigh(typ, m); ok {
				fn(u)
			}
		}
	}
	return nil
}

// ndaProtocol is NDA_PROTOCOL (linux/neighbour.h; x/sys does not name it).
const ndaProtocol = 12

// Mirrored reports whether an RTM_NEWNEIGH message's body (ndmsg and its
// attributes) is an entry a mirror wrote (MirrorFlag and MirrorProtocol),
// and which.
func Mirrored(typ uint16, m []byte) (ifindex int, ip netip.Addr, ok bool) {
	u, ok := parseNeigh(typ, m)
	ok = ok && typ == unix.RTM_NEWNEIGH && u.flags&MirrorFlag != 0 && u.proto == MirrorProtocol && u.ip.IsValid()
	return u.ifindex, u.ip, ok
}

// parseNeigh reads struct ndmsg and its NDA_DST, NDA_LLADDR and
// NDA_PROTOCOL attributes.
func parseNeigh(typ uint16, m []byte) (neighUpdate, bool) {
	u := neighUpdate{typ: typ}
	if len(m) < unix.SizeofNdMsg {
		return u, false
	}
	u.ifindex = int(int32(binary.NativeEndian.Uint32(m[4:])))
	u.state = binary.NativeEndian.Uint16(m[8:])
	u.flags = m[10]
	for a := m[unix.SizeofNdMsg:]; len(a) >= unix.SizeofRtAttr; {
		l := int(binary.NativeEndian.Uint16(a[0:]))
		if l < unix.SizeofRtAttr || l > len(a) {
			return u, false
		}
		v := a[unix.SizeofRtAttr:l]
		switch binary.NativeEndian.Uint16(a[2:]) {
		case unix.NDA_DST:
			u.ip, _ = netip.AddrFromSlice(v)
		case unix.NDA_LLADDR:
			if len(v) <= len(u.mac) {
				u.macLen = copy(u.mac[:], v)
			}
		case ndaProtocol:
			u.proto = 0
			if len(v) == 1 {
				u.proto = v[0]
			}
		}
		a = a[min((l+unix.RTA_ALIGNTO-1)&^(unix.RTA_ALIGNTO-1), len(a)):]
	}
	return u, true
}
