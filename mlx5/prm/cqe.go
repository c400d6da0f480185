package prm

// Data-path layouts as the device model writes and reads them: CQEs,
// mini-CQEs, striding-RQ WQEs, send WQE segments and EQEs. The driver
// (mlx5/dp) keeps its own hand-written copy of these; the model uses only
// this one, so a misreading on one side shows up as a disagreement in the
// tests instead of hiding in a shared constant. Names follow the kernel's
// include/linux/mlx5/device.h and qp.h and DPDK's
// drivers/common/mlx5/mlx5_prm.h; cqe_test.go checks every offset against
// testdata/datapath_layout.txt, derived from those headers.

// struct mlx5_cqe64 (device.h), byte offsets of big-endian fields.
const (
	CQESize             = 64
	CQEOffWQEID         = 2  // wqe_id: striding RQ WQE index
	CQEOffRSSHashResult = 12 // rss_hash_result
	CQEOffRSSHashType   = 16 // rss_hash_type
	CQEOffCheckSum      = 20 // check_sum
	CQEOffHdsIPExt      = 28 // hds_ip_ext
	CQEOffL4L3HdrType   = 29 // l4_l3_hdr_type (low byte of DPDK's hdr_type_etc)
	CQEOffVLANInfo      = 30 // vlan_info: TCI of a stripped tag
	CQEOffByteCnt       = 44 // byte_cnt
	CQEOffTimestamp     = 48
	CQEOffSopDropQPN    = 56 // sop_drop_qpn
	CQEOffWQECounter    = 60 // wqe_counter: striding RQ stride index
	CQEOffSignature     = 62 // signature / validity_iteration_count
	CQEOffOpOwn         = 63 // op_own

	ErrCQEOffSyndrome = 55 // struct mlx5_err_cqe.syndrome
)

// op_own: owner bit 0, format [3:2], opcode [7:4] (device.h
// get_cqe_opcode, mlx5_get_cqe_format).
const (
	CQEOwnerBit    = 0x01
	CQEFormatShift = 2
	CQEFormatMask  = 0x3
	CQEFormatComp  = 3 // compressed: a title (basic) or a mini-CQE block (enhanced)
	CQEOpcodeShift = 4

	CQEOpReq      = 0x0 // MLX5_CQE_REQ
	CQEOpRespSend = 0x2 // MLX5_CQE_RESP_SEND
	CQEOpReqErr   = 0xD // MLX5_CQE_REQ_ERR
	CQEOpRespErr  = 0xE // MLX5_CQE_RESP_ERR
	CQEOpInvalid  = 0xF // MLX5_CQE_INVALID
)

// l4_l3_hdr_type and hds_ip_ext bits.
const (
	// CQEVLANStripped: the outer tag was removed into vlan_info (DPDK
	// MLX5_CQE_VLAN_STRIPPED; the kernel's cqe_has_vlan). Clear when the
	// RQ keeps tags (rqc.vsd = 1), tagged or not.
	CQEVLANStripped = 1 << 0
	CQEIPExtOpts    = 1 << 1 // DPDK MLX5_CQE_RX_IP_EXT_OPTS_PACKET
	CQEL3HdrShift   = 2      // get_cqe_l3_hdr_type: [3:2]
	CQEL3HdrIPv6    = 1      // CQE_L3_HDR_TYPE_IPV6
	CQEL3HdrIPv4    = 2      // CQE_L3_HDR_TYPE_IPV4
	CQEL4HdrShift   = 4      // get_cqe_l4_hdr_type: [6:4]
	CQEL4HdrTCP     = 1      // CQE_L4_HDR_TYPE_TCP
	CQEL4HdrUDP     = 2      // CQE_L4_HDR_TYPE_UDP
	CQEIPFrag       = 1 << 7 // DPDK MLX5_CQE_RX_IP_FRAG_PACKET

	CQEL2OK = 1 << 0 // CQE_L2_OK (hds_ip_ext)
	CQEL3OK = 1 << 1 // CQE_L3_OK
	CQEL4OK = 1 << 2 // CQE_L4_OK
)

// Striding RQ byte_cnt (kernel mpwrq_get_cqe_byte_cnt / _consumed_strides
// / mpwrq_is_filler_cqe).
const (
	MPWRQFillerFlag    = 1 << 31
	MPWRQConsumedShift = 16
	MPWRQConsumedMask  = 0x7FFF
	MPWRQByteCntMask   = 0xFFFF
)

// struct mlx5_mini_cqe8 (device.h), 8 per array slot (MLX5_MINI_CQE_ARRAY_SIZE).
const (
	MiniCQESize      = 8
	MiniCQEArraySize = 8
	MiniOffCheckSum  = 0 // checksum (CSUM formats); rx_hash_result spans 0..3 (HASH)
	MiniOffStrideIdx = 2 // stridx (CSUM_STRIDX)
	MiniOffByteCnt   = 4
)

// Striding RQ WQE: struct mlx5_wqe_srq_next_seg + struct mlx5_wqe_data_seg.
const (
	RxWQEOffByteCount = 16
	RxWQEOffLKey      = 20
	RxWQEOffAddr      = 24
)

// Send WQEs (qp.h): control, Ethernet and data segments.
const (
	SendWQEDS = 16 // MLX5_SEND_WQE_DS

	WQECtrlOffOpmodIdxOpcode = 0 // opmod_idx_opcode
	WQECtrlOffQPNDS          = 4 // qpn_ds
	WQECtrlOffFmCeSe         = 11
	WQECtrlDSMask            = 0x3F // MLX5_WQE_CTRL_DS_MASK
	WQECtrlCEShift           = 2    // fm_ce_se: CE in [3:2]
	WQECtrlCEMask            = 0x3

	WQEEthSegOff          = 16 // the Ethernet segment is DS 1
	WQEEthOffInlineHdrSz  = 12 // inline_hdr.sz
	WQEEthOffInlineHdrStr = 14 // inline_hdr.start

	WQEDataOffByteCount = 0
	WQEDataOffLKey      = 4
	WQEDataOffAddr      = 8
	WQEInlineSeg        = 0x80000000 // MLX5_INLINE_SEG

	SendOpNOP          = 0x00 // MLX5_OPCODE_NOP
	SendOpSend         = 0x0A // MLX5_OPCODE_SEND
	SendOpEnhancedMPSW = 0x29 // MLX5_OPCODE_ENHANCED_MPSW

	MinInlineL2     = 18 // DPDK MLX5_ESEG_MIN_INLINE_SIZE: Ethernet header + one tag
	WQECounterMask  = 0xFFFF
	CQIndexMask     = 0xFFFFFF
	CQDoorbellSetCI = 0 // set_ci: dword 0 of a CQ doorbell record
)

// Error CQE syndromes (MLX5_CQE_SYNDROME_*).
const (
	CQESyndromeLocalLength     = 0x01
	CQESyndromeLocalQPOp       = 0x02
	CQESyndromeLocalProtection = 0x04
	CQESyndromeWRFlushErr      = 0x05
)
