package daemon

import (
	"net"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"golang.org/x/sys/unix"
)

// TestSetSocketBuffers: with CAP_NET_ADMIN the control socket gets its
// 4 MiB buffers even above net.core.rmem_max (default 208 KiB), and the
// sizes reported match what the kernel holds.
func TestSetSocketBuffers(t *testing.T) {
	nstest.RequireRoot(t)
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rcv, snd, err := setSocketBuffers(conn, controlSocketBuffer)
	if err != nil {
		t.Fatal(err)
	}
	if rcv < controlSocketBuffer || snd < controlSocketBuffer {
		t.Errorf("buffers rcv %d snd %d, want ≥ %d", rcv, snd, controlSocketBuffer)
	}
	raw, err := conn.(*net.UDPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var kr int
	_ = raw.Control(func(fd uintptr) { kr, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) })
	if kr != 2*rcv {
		t.Errorf("kernel holds SO_RCVBUF %d, reported %d", kr, rcv)
	}
	if _, _, err := setSocketBuffers(nil, controlSocketBuffer); err == nil {
		t.Error("a non-UDP conn was accepted")
	}
}
