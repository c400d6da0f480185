package sim

import "github.com/ovfwd/ovfwd/mlx5/prm"

// capability builds the 4096-byte capability the model reports for a
// QUERY_HCA_CAP op_mod (layouts: mlx5_ifc.h cmd_hca_cap and per_protocol_networking_offload_caps). Max and current are the same except
// for the general caps, whose current copy SET_HCA_CAP replaces.
func (d *Device) capability(capType, mode uint16) []byte {
	c := make([]byte, prm.CapabilitySize)
	cfg := d.cfg
	b := func(v bool) uint64 { return boolTo(v, 1, 0) }
	switch capType {
	case prm.CapGeneral:
		prm.CapLogMaxCQSz.Set(c, uint64(cfg.LogMaxCQSz))
		prm.CapLogMaxCQ.Set(c, 16)
		prm.CapLogMaxEQSz.Set(c, 22)
		prm.CapLogMaxEQ.Set(c, 8)
		prm.CapLogMaxMkey.Set(c, 16)
		prm.CapFastTeardown.Set(c, 1)
		prm.CapCacheLine128.Set(c, b(cfg.CacheLine128))
		prm.CapVportGroupManager.Set(c, 1)
		prm.CapNICFlowTable.Set(c, 1)
		prm.CapEswitchManager.Set(c, b(cfg.EswitchManager))
		prm.CapPortType.Set(c, 1) // Ethernet
		prm.CapNumPorts.Set(c, 1)
		prm.CapStridingRQ.Set(c, b(cfg.StridingRQ))
		prm.CapCmdIfChecksum.Set(c, uint64(cfg.MaxCmdIfChecksum))
		prm.CapBF.Set(c, 1)
		prm.CapLogBFRegSize.Set(c, 9)
		prm.CapMaxWQESzSQ.Set(c, uint64(cfg.MaxWQESzSQ))
		prm.CapLogMaxTransportDomain.Set(c, 16)
		prm.CapLogMaxPD.Set(c, 16)
		prm.CapLogMaxRQ.Set(c, 16)
		prm.CapLogMaxSQ.Set(c, 16)
		prm.CapLogMaxTIR.Set(c, 16)
		prm.CapLogMaxTIS.Set(c, 16)
		prm.CapLogMaxRQT.Set(c, 16)
		prm.CapLogMaxRQTSize.Set(c, uint64(cfg.LogMaxRQTSize))
		prm.CapExtStrideNumRange.Set(c, b(cfg.ExtStrideNumRange))
		prm.CapLogMaxWQSz.Set(c, uint64(cfg.LogMaxWQSz))
		prm.CapDeviceFrequencyKHz.Set(c, 1000000)
		prm.CapEnhancedCQECompression.Set(c, b(cfg.EnhancedCQECompression))
		prm.CapMiniCQERespStrideIndex.Set(c, b(cfg.MiniCQEStrideIndex))
		prm.CapCQECompression.Set(c, b(cfg.CQECompression))
		prm.CapCQECompressionMaxNum.Set(c, uint64(cfg.CQECompressionMaxNum))
		prm.CapDisableLocalLBUC.Set(c, b(cfg.DisableLocalLB))
		prm.CapDisableLocalLBMC.Set(c, b(cfg.DisableLocalLB))
		prm.CapRQTSFormat.Set(c, uint64(cfg.RQTSFormat))
		prm.CapSQTSFormat.Set(c, uint64(cfg.SQTSFormat))
	case prm.CapEthernetOffload:
		prm.CapEthCsum.Set(c, 1)
		prm.CapEthMultiPktSendWQE.Set(c, uint64(cfg.MultiPktSendWQE))
		prm.CapEthWQEInlineMode.Set(c, uint64(cfg.WQEInlineMode))
		prm.CapEthEnhancedMultiPktSend.Set(c, b(cfg.EnhancedMPW))
	case prm.CapFlowTable:
		prm.CapFTNICRXSupport.Set(c, 1)
		prm.CapFTNICRXLogMaxSize.Set(c, 16)
		prm.CapFTNICRXMaxLevel.Set(c, 64)
		prm.CapFTNICRXLogMaxDest.Set(c, 8)
	}
	return c
}
