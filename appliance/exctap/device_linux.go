package exctap

import (
	"fmt"
	"net"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// openTAP creates the TAP device name in the calling thread's network
// namespace, without packet information headers (IFF_NO_PI: each read and
// write is exactly one Ethernet frame), sets its MAC and MTU and brings it
// up. The descriptor is non-blocking, so os.File reads go through the
// runtime poller and Close unblocks them.
func openTAP(name string, mac net.HardwareAddr, mtu int) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("exctap: open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("exctap: %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("exctap: TUNSETIFF %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun:"+name)
	fail := func(what string, err error) (*os.File, error) {
		f.Close() // a non-persistent TAP disappears with its last descriptor
		return nil, fmt.Errorf("exctap: %s %s: %w", what, name, err)
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fail("find", err)
	}
	if err := netlink.LinkSetHardwareAddr(link, mac); err != nil {
		return fail("set MAC of", err)
	}
	if err := netlink.LinkSetMTU(link, mtu); err != nil {
		return fail("set MTU of", err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fail("bring up", err)
	}
	return f, nil
}
