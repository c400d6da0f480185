// Command xskprobe tells what a NIC's driver offers AF_XDP: it runs in the
// virtio guest (appliance/testbed/vmtest/virtio_test.go) before ovfwd does
// and prints FACT lines the host test checks. For each interface: the
// virtio feature bits the driver negotiated, the XDP features the netdev
// reports, and the errno of a bind that forces zero-copy (XDP_ZEROCOPY) on
// each queue. ovfwd itself binds without that flag, so the kernel falls back
// to copy without saying why; this bind is what says it.
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Virtio feature bits (include/uapi/linux/virtio_config.h,
// include/uapi/linux/virtio_net.h).
var virtioBits = []struct {
	name string
	bit  int
}{
	{"ctrl_guest_offloads", 2}, {"guest_tso4", 7}, {"mrg_rxbuf", 15}, {"ctrl_vq", 17}, {"mq", 22},
	{"version_1", 32}, {"access_platform", 33}, {"ring_packed", 34}, {"ring_reset", 40},
	{"hash_report", 57}, {"rss", 60},
}

// NETDEV_XDP_ACT_* (include/uapi/linux/netdev.h).
var xdpActs = []string{"basic", "redirect", "ndo_xmit", "xsk_zerocopy", "hw_offload", "rx_sg", "ndo_xmit_sg", "xsk_zerocopy_tx_meta"}

func main() {
	for _, ifname := range os.Args[1:] {
		probe(ifname)
	}
}

func fact(ifname, k string, v any) { fmt.Printf("FACT %s.%s %v\n", ifname, k, v) }

func probe(ifname string) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		fact(ifname, "error", err)
		return
	}
	// The virtio device's features file: one character per bit, bit 0
	// first (drivers/virtio/virtio.c features_show).
	if b, err := os.ReadFile("/sys/class/net/" + ifname + "/device/features"); err == nil {
		f := strings.TrimSpace(string(b))
		for _, vb := range virtioBits {
			fact(ifname, "virtio."+vb.name, vb.bit < len(f) && f[vb.bit] == '1')
		}
	} else {
		fact(ifname, "virtio", err)
	}
	if d, err := os.Readlink("/sys/class/net/" + ifname + "/device/driver"); err == nil {
		fact(ifname, "driver", d[strings.LastIndex(d, "/")+1:])
	}
	acts, err := xdpFeatures(ifi.Index)
	if err != nil {
		fact(ifname, "xdp_features", err)
	} else {
		var on []string
		for i, n := range xdpActs {
			if acts&(1<<i) != 0 {
				on = append(on, n)
			}
		}
		fact(ifname, "xdp_features", strings.Join(on, ","))
	}
	queues := 1
	if b, err := os.ReadDir("/sys/class/net/" + ifname + "/queues"); err == nil {
		n := 0
		for _, e := range b {
			if strings.HasPrefix(e.Name(), "rx-") {
				n++
			}
		}
		queues = max(n, 1)
	}
	fact(ifname, "rx_queues", queues)
	for q := 0; q < queues; q++ {
		fact(ifname, "q"+strconv.Itoa(q)+".zerocopy_bind", errName(bindZeroCopy(ifi.Index, q)))
	}
}

// xdpFeatures asks the netdev generic netlink family for the interface's
// xdp-features (NETDEV_CMD_DEV_GET, Documentation/netlink/specs/netdev.yaml).
func xdpFeatures(ifindex int) (uint64, error) {
	fam, err := netlink.GenlFamilyGet("netdev")
	if err != nil {
		return 0, fmt.Errorf("genl family netdev: %w", err)
	}
	const cmdDevGet, attrIfindex, attrXDPFeatures = 1, 1, 3
	req := nl.NewNetlinkRequest(int(fam.ID), 0)
	// The genetlink header by hand: nl.Genlmsg puts a non-zero byte in
	// its reserved field, which the family's strict validation refuses.
	req.AddData(genlHeader{cmdDevGet, 1, 0, 0})
	req.AddData(nl.NewRtAttr(attrIfindex, nl.Uint32Attr(uint32(ifindex))))
	msgs, err := req.Execute(unix.NETLINK_GENERIC, 0)
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofGenlmsg:])
		if err != nil {
			return 0, err
		}
		for _, a := range attrs {
			if a.Attr.Type == attrXDPFeatures && len(a.Value) == 8 {
				return binary.NativeEndian.Uint64(a.Value), nil
			}
		}
	}
	return 0, errors.New("no xdp-features in the answer")
}

type genlHeader [4]byte

func (h genlHeader) Len() int          { return len(h) }
func (h genlHeader) Serialize() []byte { return h[:] }

// bindZeroCopy binds a socket to queue q with XDP_ZEROCOPY: the kernel then
// returns the driver's error instead of falling back to copy
// (net/xdp/xsk_buff_pool.c xp_assign_dev).
func bindZeroCopy(ifindex, q int) error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	const frames, size = 4096, 4096
	mem, err := unix.Mmap(-1, 0, frames*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(mem)
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafePointer(mem))), Len: uint64(len(mem)), Size: size}
	if err := setUmemReg(fd, &reg); err != nil {
		return fmt.Errorf("XDP_UMEM_REG: %w", err)
	}
	for _, o := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING, unix.XDP_TX_RING} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, o, 2048); err != nil {
			return err
		}
	}
	return unix.Bind(fd, &unix.SockaddrXDP{Flags: unix.XDP_ZEROCOPY, Ifindex: uint32(ifindex), QueueID: uint32(q)})
}

func errName(err error) string {
	var en unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &en):
		return unix.ErrnoName(en)
	default:
		return strings.ReplaceAll(err.Error(), " ", "_")
	}
}
