package nlsync

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// ndmsg builds an RTM_NEWNEIGH body: ndmsg, NDA_DST, and NDA_PROTOCOL
// when proto is not 0.
func ndmsg(ifindex int, flags byte, ip netip.Addr, proto byte) []byte {
	b := make([]byte, 12)
	b[0] = unix.AF_INET
	binary.NativeEndian.PutUint32(b[4:], uint32(ifindex))
	b[10] = flags
	b = appendAttr(b, unix.NDA_DST, ip.AsSlice())
	if proto != 0 {
		b = appendAttr(b, ndaProtocol, []byte{proto})
	}
	return b
}

func TestParseMirrored(t *testing.T) {
	ip := netip.MustParseAddr("198.18.9.1")
	for _, c := range []struct {
		name  string
		b     []byte
		typ   uint16
		ours  bool
		index int
	}{
		{"ours", ndmsg(7, MirrorFlag, ip, MirrorProtocol), unix.RTM_NEWNEIGH, true, 7},
		{"no flag (an operator rewrote it)", ndmsg(7, 0, ip, MirrorProtocol), unix.RTM_NEWNEIGH, false, 0},
		{"another learner's protocol", ndmsg(7, MirrorFlag, ip, 3), unix.RTM_NEWNEIGH, false, 0},
		{"no protocol", ndmsg(7, MirrorFlag, ip, 0), unix.RTM_NEWNEIGH, false, 0},
		{"a deletion", ndmsg(7, MirrorFlag, ip, MirrorProtocol), unix.RTM_DELNEIGH, false, 0},
		{"short", []byte{2, 0, 0}, unix.RTM_NEWNEIGH, false, 0},
	} {
		ifindex, got, ok := Mirrored(c.typ, c.b)
		if ok != c.ours || ok && (ifindex != c.index || got != ip) {
			t.Errorf("%s: %d %v %v", c.name, ifindex, got, ok)
		}
	}
}

// FuzzParseMirrored: any bytes from the kernel's neighbour dump parse
// without a panic, and what is taken as ours has an address.
func FuzzParseMirrored(f *testing.F) {
	ip := netip.MustParseAddr("2001:db8:9::1")
	f.Add(ndmsg(3, MirrorFlag, ip, MirrorProtocol))
	f.Add(ndmsg(3, 0, ip, 0))
	f.Add([]byte{10, 0, 0, 0, 3, 0, 0, 0, 128, 0, 16, 0, 255, 255, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if ifindex, ip, ok := Mirrored(unix.RTM_NEWNEIGH, b); ok && !ip.IsValid() {
			t.Fatalf("taken as ours without an address: %d %v", ifindex, ip)
		}
	})
}
