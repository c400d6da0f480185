package fwd

// Wire constants, named as in their specs. All multi-byte fields are big endian.

// IEEE 802.3 / 802.1Q EtherTypes and header sizes.
const (
	etherTypeIPv4 = 0x0800
	etherTypeARP  = 0x0806
	etherTypeVLAN = 0x8100 // IEEE 802.1Q C-tag
	etherTypeQinQ = 0x88a8 // IEEE 802.1ad S-tag
	etherTypeIPv6 = 0x86dd

	ethHdrLen  = 14
	vlanTagLen = 4
	ethAddrLen = 6
)

// RFC 826 ARP for IPv4 over Ethernet.
const (
	arpHrdEthernet = 1
	arpOpRequest   = 1
	arpOpReply     = 2
	arpLen         = 28
)

// RFC 791 IPv4.
const (
	ipv4MinHdrLen = 20
	ipv4FlagDF    = 0x4000
	ipv4FlagMF    = 0x2000
	ipv4FragMask  = 0x1fff
	ipv4MinMTU    = 68
	// RFC 1812 §4.3.2.3: an ICMP error carries as much of the offending
	// datagram as fits without the error exceeding 576 bytes.
	icmp4MaxErrLen = 576
)

// RFC 8200 IPv6.
const (
	ipv6HdrLen   = 40
	ipv6FragLen  = 8
	ipv6MinMTU   = 1280 // also the size cap of an ICMPv6 error (RFC 4443 §2.4 (c))
	ndHopLimit   = 255  // RFC 4861 §7.1: ND messages must arrive with hop limit 255
	defaultHop   = 64   // TTL / hop limit of packets the appliance originates
	ipv6ExtHopBy = 0
	ipv6ExtRoute = 43
	ipv6ExtFrag  = 44
	ipv6ExtAH    = 51
	ipv6ExtDest  = 60
	ipv6NoNext   = 59
)

// IANA protocol numbers.
const (
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
)

// RFC 792 ICMP types and codes.
const (
	icmpEchoReply    = 0
	icmpUnreachable  = 3
	icmpEchoRequest  = 8
	icmpTimeExceeded = 11
	icmpCodeNet      = 0
	icmpCodeHost     = 1
	icmpCodeAdmin    = 13 // communication administratively prohibited (RFC 1812 §5.2.7.1)
	icmpCodeFragNeed = 4  // RFC 1191: next-hop MTU in bytes 6–7
	icmpCodeTTL      = 0
	icmpHdrLen       = 8
	icmpParamProblem = 12
	icmpRedirect     = 5
	icmpSourceQuench = 4
)

// RFC 4443 ICMPv6 and RFC 4861 Neighbor Discovery.
const (
	icmp6Unreachable     = 1
	icmp6PacketTooBig    = 2
	icmp6TimeExceeded    = 3
	icmp6EchoRequest     = 128
	icmp6EchoReply       = 129
	icmp6NeighborSolicit = 135
	icmp6NeighborAdvert  = 136
	icmp6CodeNoRoute     = 0
	icmp6CodeAddr        = 3
	icmp6CodeAdmin       = 1 // communication administratively prohibited (RFC 4443 §3.1)
	icmp6CodeHopLimit    = 0

	ndOptSourceLLAddr = 1
	ndOptTargetLLAddr = 2
	ndNSLen           = 24 // type, code, checksum, reserved, target
	ndNAFlagRouter    = 0x80
	ndNAFlagSolicited = 0x40
	ndNAFlagOverride  = 0x20
)

// RFC 793 / RFC 9293 TCP.
const (
	tcpMinHdrLen = 20
	tcpFlagSYN   = 0x02
	tcpOptEnd    = 0
	tcpOptNOP    = 1
	tcpOptMSS    = 2
	tcpOptMSSLen = 4
)

const udpHdrLen = 8
