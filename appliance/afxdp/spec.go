package afxdp

// Linux uapi constants used by this package, with the kernel's names.
// golang.org/x/sys/unix has most of them; the few it lacks are here.
const (
	// include/uapi/linux/if_xdp.h
	xdpRingNeedWakeup = 1 << 0 // XDP_RING_NEED_WAKEUP, in a ring's flags word
	xdpPacketHeadroom = 256    // XDP_PACKET_HEADROOM: where copy mode puts data in a frame

	// net/xdp/xsk.c: TX_BATCH_SIZE, the frames one copy-mode sendto sends
	// unless XDP_MAX_TX_SKB_BUDGET raised it.
	defaultTxBudget = 32

	// include/uapi/linux/bpf.h (enum xdp_action; the BPF opcodes, helper
	// ids and map types come from cilium/ebpf)
	xdpAborted = 0 // XDP_ABORTED
	xdpDrop    = 1 // XDP_DROP
	xdpPass    = 2 // XDP_PASS
	xdpTX      = 3 // XDP_TX

	// struct xdp_md field offsets
	xdpMDData         = 0
	xdpMDDataEnd      = 4
	xdpMDRxQueueIndex = 16
)

// Wire constants the XDP program matches on.
const (
	ethHeaderLen  = 14
	vlanHeaderLen = 4
	ethTypeIPv4   = 0x0800
	ethTypeIPv6   = 0x86dd
	ethTypeVLAN   = 0x8100
	ethTypeQinQ   = 0x88a8 // IEEE 802.1ad service tag
	ipProtoUDP    = 17
	ipProtoTCP    = 6
	ipProtoICMP   = 1

	// RFC 792 ICMP types NAT translates (see Steering).
	icmpEchoReply    = 0
	icmpUnreachable  = 3
	icmpSourceQuench = 4
	icmpTimeExceeded = 11
	icmpParamProblem = 12
	ipProtoICMPv6    = 58

	icmp6NeighborSolicit = 135
	icmp6NeighborAdvert  = 136

	ipv6HeaderLen = 40
	udpHeaderLen  = 8

	// RFC 791 §3.1: the flags and fragment offset word at byte 6
	ipv4FlagMF     = 0x2000
	ipv4FragOffset = 0x1fff

	// OpenVPN: the first payload byte is opcode<<3 | key id; P_DATA_V2 is
	// opcode 9 (openvpn src/openvpn/ssl_pkt.h: P_OPCODE_SHIFT, P_DATA_V2).
	openvpnOpcodeShift = 3
	openvpnPDataV2     = 9
)

// be16 is how a big-endian 16-bit field reads as a little-endian load, which
// is what a BPF half-word load does on amd64.
func be16(v uint16) int32 { return int32(v>>8 | (v&0xff)<<8) }
