package afxdp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels mirrors struct ethtool_channels (include/uapi/linux/ethtool.h).
type ethtoolChannels struct {
	cmd                                         uint32
	maxRx, maxTx, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

// ifreqData is struct ifreq with the ifr_data member.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte // the union is 24 bytes
}

// channelCount is deviceQueues; tests replace it to inject a driver
// without ETHTOOL_GCHANNELS (EOPNOTSUPP: no get_channels in its
// ethtool_ops, net/ethtool/ioctl.c ethtool_get_channels).
var channelCount = deviceQueues

// deviceQueues returns the number of RX queues of ifname (ETHTOOL_GCHANNELS:
// combined channels, else RX channels), in the calling thread's namespace.
// Invariant for the unsafe use: req.data points to ch, a local kept alive
// for the duration of the ioctl.
func deviceQueues(ifname string) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	ch := ethtoolChannels{cmd: unix.ETHTOOL_GCHANNELS}
	var req ifreqData
	copy(req.name[:unix.IFNAMSIZ-1], ifname)
	req.data = unsafe.Pointer(&ch)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req)))
	if errno != 0 {
		return 0, errno
	}
	return int(max(ch.combinedCount, ch.rxCount, 1)), nil
}
