package nat

// Wire constants, named as in their specs.

// RFC 791 IPv4.
const (
	ipv4MinHdrLen = 20
	ipv4FlagMF    = 0x2000
	ipv4FragMask  = 0x1fff
	// ipv4FlagMF|ipv4FragMask over the flags and offset's bytes loaded in
	// wire order (see wireKey).
	fragBitsWire = 0xff3f
)

// IANA protocol numbers.
const (
	protoICMP = 1
	protoTCP  = 6
	protoUDP  = 17
)

// RFC 792 ICMP types.
const (
	icmpEchoReply    = 0
	icmpUnreachable  = 3
	icmpSourceQuench = 4
	icmpEchoRequest  = 8
	icmpTimeExceeded = 11
	icmpParamProblem = 12
	icmpHdrLen       = 8
)

// RFC 9293 TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
)

// RFC 768 UDP.
const udpHdrLen = 8

// Offsets of the checksum fields.
const (
	tcpCsumOff  = 16
	udpCsumOff  = 6
	icmpCsumOff = 2
	ipCsumOff   = 10
)
