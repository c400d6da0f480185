package nlsync

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// neighMsg builds the kernel's RTM_NEWNEIGH/RTM_DELNEIGH message for ip.
func neighMsg(typ uint16, ifindex int, state uint16, flags uint8, ip netip.Addr, mac []byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofNdMsg)
	b[unix.NLMSG_HDRLEN] = unix.AF_INET
	if ip.Is6() {
		b[unix.NLMSG_HDRLEN] = unix.AF_INET6
	}
	binary.NativeEndian.PutUint32(b[unix.NLMSG_HDRLEN+4:], uint32(ifindex))
	binary.NativeEndian.PutUint16(b[unix.NLMSG_HDRLEN+8:], state)
	b[unix.NLMSG_HDRLEN+10] = flags
	attr := func(typ uint16, v []byte) {
		var h [4]byte
		binary.NativeEndian.PutUint16(h[0:], uint16(4+len(v)))
		binary.NativeEndian.PutUint16(h[2:], typ)
		b = append(append(b, h[:]...), v...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	attr(unix.NDA_DST, ip.AsSlice())
	if mac != nil {
		attr(unix.NDA_LLADDR, mac)
	}
	attr(unix.NDA_CACHEINFO, make([]byte, 16))
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	return b
}

func TestParseNeighMsgs(t *testing.T) {
	mac := []byte{2, 0, 0, 0, 0, 0x77}
	v4, v6 := netip.MustParseAddr("198.18.51.77"), netip.MustParseAddr("2001:db8::77")
	var batch []byte
	batch = append(batch, neighMsg(unix.RTM_NEWNEIGH, 9, unix.NUD_PERMANENT, MirrorFlag, v4, mac)...)
	batch = append(batch, neighMsg(unix.RTM_DELNEIGH, 9, unix.NUD_FAILED, 0, v6, nil)...)
	batch = append(batch, neighMsg(unix.RTM_NEWROUTE, 9, 0, 0, v6, nil)...) // not a neighbour: skipped
	var got []neighUpdate
	if err := parseNeighMsgs(batch, func(u neighUpdate) { got = append(got, u) }); err != nil {
		t.Fatal(err)
	}
	want := []neighUpdate{
		{typ: unix.RTM_NEWNEIGH, ifindex: 9, state: unix.NUD_PERMANENT, flags: MirrorFlag, ip: v4, mac: [6]byte(mac), macLen: 6},
		{typ: unix.RTM_DELNEIGH, ifindex: 9, state: unix.NUD_FAILED, ip: v6},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("parsed %+v, want %+v", got, want)
	}
	// A netlink error ends the subscription (the reader reports it).
	nack := make([]byte, unix.NLMSG_HDRLEN+4)
	binary.NativeEndian.PutUint32(nack[0:], uint32(len(nack)))
	binary.NativeEndian.PutUint16(nack[4:], unix.NLMSG_ERROR)
	code := -int32(unix.ENOBUFS)
	binary.NativeEndian.PutUint32(nack[unix.NLMSG_HDRLEN:], uint32(code))
	if err := parseNeighMsgs(nack, func(neighUpdate) {}); err == nil {
		t.Error("a netlink error message was not reported")
	}
	// Parsing what the kernel sends allocates nothing.
	if n := testing.AllocsPerRun(100, func() {
		_ = parseNeighMsgs(batch, func(u neighUpdate) { got[0] = u })
	}); n != 0 {
		t.Errorf("%v allocations per batch", n)
	}
}

func FuzzParseNeighMsgs(f *testing.F) {
	f.Add(neighMsg(unix.RTM_NEWNEIGH, 9, unix.NUD_PERMANENT, MirrorFlag, netip.MustParseAddr("198.18.51.77"), []byte{2, 0, 0, 0, 0, 0x77}))
	f.Add(neighMsg(unix.RTM_DELNEIGH, 3, unix.NUD_STALE, 0, netip.MustParseAddr("fe80::1"), nil))
	f.Add(neighMsg(unix.RTM_NEWNEIGH, 3, unix.NUD_NOARP, 0, netip.MustParseAddr("ff02::1"), []byte{0x33, 0x33, 0, 0, 0, 1, 0, 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, sink := newTestSync()
		_ = parseNeighMsgs(b, func(u neighUpdate) {
			if u.macLen > len(u.mac) {
				t.Fatalf("macLen %d", u.macLen)
			}
			s.neigh(u)
		})
		for a, mac := range sink.neigh {
			if len(mac) != 6 || !a.IsValid() {
				t.Fatalf("pinned %v → %v", a, mac)
			}
		}
	})
}
