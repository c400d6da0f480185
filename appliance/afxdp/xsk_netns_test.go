package afxdp

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// linux61Mmap maps a ring as Linux 6.1 does: net/xdp/xsk.c xsk_mmap there
// answers -EBUSY once the socket is bound (xs->state != XSK_READY); later
// kernels, this host's among them, map a bound socket's rings too. A socket
// is bound when sendto answers anything but ENXIO (xsk_sendmsg: -ENXIO
// while !xsk_is_bound).
func linux61Mmap(fd int, pgoff int64, n, prot, flags int) ([]byte, error) {
	if kick(fd) != unix.ENXIO {
		return nil, unix.EBUSY
	}
	return unix.Mmap(fd, pgoff, n, prot, flags)
}

// failRing makes the mapping of the ring at pgoff fail with errno.
func failRing(t *testing.T, pgoff int64, errno unix.Errno) {
	t.Helper()
	mmapRing = func(fd int, off int64, n, prot, flags int) ([]byte, error) {
		if off == pgoff {
			return nil, errno
		}
		return unix.Mmap(fd, off, n, prot, flags)
	}
	t.Cleanup(func() { mmapRing = unix.Mmap })
}

// noPanic runs f and turns a panic into an error.
func noPanic(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// With ring mmaps refused after bind, as on Linux 6.1, ports open (their own
// UMEM and a Share's, so both the registering and the joining socket) and
// forward. Before the rings were mapped ahead of bind this failed:
// "mmap fill: device or resource busy", and tryOpenSocket panicked on it.
func TestRingsMappedBeforeBind(t *testing.T) {
	mmapRing = linux61Mmap
	t.Cleanup(func() { mmapRing = unix.Mmap })
	tp := newTopo(t, 1)
	var p *Port
	if err := tp.app.Do(func() error {
		return noPanic(func() (err error) { p, err = Open("h8a1", Options{Pool: 1}); return })
	}); err != nil {
		t.Fatalf("own UMEM: %v", err)
	}
	p.Close()
	sh := NewShare(7, 2)
	var pa, pb *Port
	if err := tp.app.Do(func() error {
		return noPanic(func() (err error) {
			if pa, err = Open("h8a1", Options{Pool: 1, Index: 0, Share: sh}); err != nil {
				return err
			}
			pb, err = Open("h8b1", Options{Pool: 2, Index: 1, Share: sh})
			return err
		})
	}); err != nil {
		t.Fatalf("shared UMEM: %v", err)
	}
	t.Cleanup(func() { pb.Close(); pa.Close() })
	if pa.Info().Pool != 7 || pb.Info().Pool != 7 {
		t.Fatalf("pools %d, %d: want the Share's 7 for both (the join fell back)", pa.Info().Pool, pb.Info().Pool)
	}
	runBridge(t, tp, pa, pb)
	floodPing(t, tp, 200)
}

// A ring mapping that fails leaves an error, not a panic, and nothing
// behind: no mapping of the dead socket and no bound socket (the queue binds
// again without the EBUSY retry), for a socket registering its UMEM and for
// one joining a Share's. Both panicked before (a deferred close of the
// named result, which the failing return had set to nil).
func TestRingMapFailureCleansUp(t *testing.T) {
	tp := newTopo(t, 1)
	var ifa, ifb int
	if err := tp.app.Do(func() error {
		a, err := net.InterfaceByName("h8a1")
		if err != nil {
			return err
		}
		b, err := net.InterfaceByName("h8b1")
		if err != nil {
			return err
		}
		ifa, ifb = a.Index, b.Index
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	failRing(t, unix.XDP_PGOFF_RX_RING, unix.ENOMEM) // after fill and completion are mapped
	err := tp.app.Do(func() error {
		return noPanic(func() error {
			qu, err := tryOpenSocket(ifa, 0, defaultRings, unix.XDP_COPY)
			if err == nil {
				qu.close()
			}
			return err
		})
	})
	if !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("own UMEM with a failing RX ring mmap: %v, want ENOMEM", err)
	}
	t.Log(err)
	if n := orphanRingCount(); n != 0 {
		t.Errorf("%d ring mappings of closed sockets after the failure, want 0", n)
	}
	err = tp.app.Do(func() error {
		return noPanic(func() (err error) { _, err = Open("h8a1", Options{Pool: 1}); return })
	})
	if !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("Open with a failing RX ring mmap: %v, want ENOMEM", err)
	}

	mmapRing = unix.Mmap
	bindOnce(t, tp, ifa)
	sh := NewShare(7, 2)
	pa := openIn(t, tp.app, "h8a1", Options{Pool: 1, Index: 0, Share: sh})
	u := sh.umems[0]
	failRing(t, unix.XDP_PGOFF_TX_RING, unix.ENOMEM)
	err = tp.app.Do(func() error {
		return noPanic(func() error {
			qu, err := joinSocket(ifb, 0, defaultRings, u)
			if err == nil {
				qu.close()
			}
			return err
		})
	})
	if !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("join with a failing TX ring mmap: %v, want ENOMEM", err)
	}
	if u.users != 1 {
		t.Errorf("shared UMEM has %d users after a failed join, want 1", u.users)
	}
	if n := orphanRingCount(); n != 0 {
		t.Errorf("%d ring mappings of closed sockets after the failed join, want 0", n)
	}
	mmapRing = unix.Mmap
	bindOnce(t, tp, ifb)
	pa.Close()
}

// bindOnce binds queue 0 of ifindex in a single attempt: nothing holds it.
func bindOnce(t *testing.T, tp *topo, ifindex int) {
	t.Helper()
	if err := tp.app.Do(func() error {
		qu, err := tryOpenSocket(ifindex, 0, defaultRings, unix.XDP_COPY)
		if err == nil {
			qu.close()
		}
		return err
	}); err != nil {
		t.Fatalf("bind after the failure: %v", err)
	}
}
