package mlx5

import "github.com/ovfwd/ovfwd/mlx5/prm"

// Caps are the capabilities that decide data-path features (kernel fw.c
// mlx5_query_hca_caps reads the same three).
// They are read from the device after INIT_HCA, never assumed.
type Caps struct {
	PortTypeEthernet bool
	LogMaxCQSz       uint8
	LogMaxWQSz       uint8
	LogMaxRQTSize    uint8
	MaxWQESzSQ       int // bytes
	LogBFRegSize     uint8

	// Striding RQ: supported, and the legal ranges of log2(strides per
	// WQE) and log2(stride bytes).
	StridingRQ                       bool
	MinLogStrides, MaxLogStrides     uint8
	MinLogStrideSize, MaxLogStrideSz uint8

	// CQE compression: supported layouts and mini-CQE formats.
	CQECompression         bool
	EnhancedCQECompression bool
	MiniCQEStrideIndex     bool
	CQECompressionMaxNum   int

	// TX.
	EnhancedMPW     bool
	MultiPktSendWQE uint8
	// WQEInlineMode is the cap (prm.CapInlineL2/Vport/NotNeeded); MinInline
	// the resolved mode TX WQEs must honour (prm.InlineNone/L2/IP/TCPUDP).
	WQEInlineMode uint8
	MinInline     uint8
	Checksum      bool

	NICFlowTable       bool
	FlowTableMaxLevel  uint8
	FlowTableLogMaxSz  uint8
	EswitchManager     bool
	VportGroupManager  bool
	DeviceFrequencyKHz uint32

	// DisableLocalLBUC/MC: the vport's local loopback can be turned off.
	DisableLocalLBUC, DisableLocalLBMC bool
	// RQTSFormat / SQTSFormat: timestamp formats queues may use (prm.TSCap*).
	RQTSFormat, SQTSFormat uint8
}

// parseCaps reads the general, Ethernet and flow-table capabilities.
func parseCaps(gen, eth, ft []byte) Caps {
	c := Caps{
		PortTypeEthernet:       prm.CapPortType.Get(gen) == 1,
		LogMaxCQSz:             uint8(prm.CapLogMaxCQSz.Get(gen)),
		LogMaxWQSz:             uint8(prm.CapLogMaxWQSz.Get(gen)),
		LogMaxRQTSize:          uint8(prm.CapLogMaxRQTSize.Get(gen)),
		MaxWQESzSQ:             int(prm.CapMaxWQESzSQ.Get(gen)),
		LogBFRegSize:           uint8(prm.CapLogBFRegSize.Get(gen)),
		StridingRQ:             prm.CapStridingRQ.Get(gen) == 1,
		CQECompression:         prm.CapCQECompression.Get(gen) == 1,
		EnhancedCQECompression: prm.CapEnhancedCQECompression.Get(gen) == 1,
		MiniCQEStrideIndex:     prm.CapMiniCQERespStrideIndex.Get(gen) == 1,
		CQECompressionMaxNum:   int(prm.CapCQECompressionMaxNum.Get(gen)),
		EnhancedMPW:            prm.CapEthEnhancedMultiPktSend.Get(eth) == 1,
		MultiPktSendWQE:        uint8(prm.CapEthMultiPktSendWQE.Get(eth)),
		WQEInlineMode:          uint8(prm.CapEthWQEInlineMode.Get(eth)),
		Checksum:               prm.CapEthCsum.Get(eth) == 1,
		NICFlowTable:           prm.CapNICFlowTable.Get(gen) == 1 && prm.CapFTNICRXSupport.Get(ft) == 1,
		FlowTableMaxLevel:      uint8(prm.CapFTNICRXMaxLevel.Get(ft)),
		FlowTableLogMaxSz:      uint8(prm.CapFTNICRXLogMaxSize.Get(ft)),
		EswitchManager:         prm.CapEswitchManager.Get(gen) == 1,
		VportGroupManager:      prm.CapVportGroupManager.Get(gen) == 1,
		DeviceFrequencyKHz:     uint32(prm.CapDeviceFrequencyKHz.Get(gen)),
		DisableLocalLBUC:       prm.CapDisableLocalLBUC.Get(gen) == 1,
		DisableLocalLBMC:       prm.CapDisableLocalLBMC.Get(gen) == 1,
		RQTSFormat:             uint8(prm.CapRQTSFormat.Get(gen)),
		SQTSFormat:             uint8(prm.CapSQTSFormat.Get(gen)),
	}
	if c.StridingRQ {
		// log2(strides) 9..16 always, 3..8 with ext_stride_num_range;
		// stride 64 B (128 B with 128-byte cache lines) .. 8 KiB.
		c.MinLogStrides, c.MaxLogStrides = 9, 16
		if prm.CapExtStrideNumRange.Get(gen) == 1 {
			c.MinLogStrides = 3
		}
		c.MinLogStrideSize, c.MaxLogStrideSz = 6, 13
		if prm.CapCacheLine128.Get(gen) == 1 {
			c.MinLogStrideSize = 7
		}
	}
	switch c.WQEInlineMode {
	case prm.CapInlineL2:
		c.MinInline = prm.InlineL2
	case prm.CapInlineNotNeeded:
		c.MinInline = prm.InlineNone
	default:
		c.MinInline = prm.InlineL2 // resolved from the vport context at Open
	}
	return c
}
