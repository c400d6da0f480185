package bench

import (
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Bridge mode (FwdOptions.Bridge): the same topology, frames and cores,
// bridged instead of routed — ovfwd in bridge mode (its XDP fast path
// redirects frames between two learned stations) against a Linux bridge
// of the same two veths. The generator's frames go to the sink's MAC,
// which both bridges learn from a broadcast the sink sends before each
// run (it drops what it receives, so it never answers anything), and the
// generator's MAC from its first frames.

// linuxBridge enslaves bnA1 and bnB1 to a bridge in the appliance
// namespace and returns what undoes it.
func linuxBridge(t *topology) (undo func(), err error) {
	undo = func() { _, _ = t.app.Run("ip", "link", "del", "bnbr0") }
	for _, args := range [][]string{
		{"ip", "link", "add", "bnbr0", "type", "bridge"},
		{"ip", "link", "set", "bnA1", "master", "bnbr0"},
		{"ip", "link", "set", "bnB1", "master", "bnbr0"},
		{"ip", "link", "set", "bnbr0", "up"},
	} {
		if _, err = t.app.Run(args...); err != nil {
			undo()
			return nil, err
		}
	}
	return undo, nil
}

// teachSink makes the sink send one broadcast frame from its MAC (three,
// a millisecond apart, against a drop), so the bridge under test learns
// where it is.
func teachSink(t *topology) error {
	f := udpFrame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, t.sinkMAC, net.ParseIP(sinkIP).To4(), net.ParseIP(genIP).To4())
	return t.sink.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Ifindex: t.sinkIf, Halen: 6}
		copy(to.Addr[:], f[:6])
		for range 3 {
			if err := unix.Sendto(fd, f, 0, to); err != nil {
				return fmt.Errorf("bench: teach the sink's MAC: %w", err)
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	})
}

// bridgeNetfilterOff keeps bridged frames out of iptables in the
// appliance namespace (the sysctls are per namespace; br_netfilter, which
// container runtimes load, turns them on): neither bridge filters here.
// It returns what the report prints.
func bridgeNetfilterOff(t *topology) string {
	if _, err := os.Stat("/proc/sys/net/bridge"); err != nil {
		return "br_netfilter not loaded"
	}
	for _, k := range []string{"iptables", "ip6tables", "arptables"} {
		if err := nsWrite(t.app, "/proc/sys/net/bridge/bridge-nf-call-"+k, "0"); err != nil {
			return "br_netfilter loaded, bridge-nf-call-* not switched off: " + err.Error()
		}
	}
	return "br_netfilter loaded, bridge-nf-call-* off in the appliance namespace"
}
