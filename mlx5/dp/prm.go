package dp

// Data-path spec constants: CQE, mini-CQE and WQE layouts (byte offsets inside
// the structure, big-endian fields), opcodes and limits. Names follow the
// kernel's include/linux/mlx5/{device,qp}.h and mlx5_ifc.h; layout_test.go
// checks every offset against testdata/upstream_layout.txt, a table derived
// from those headers. What each bit means, with its upstream line and test:
// docs/mlx5-semantics.md.

// struct mlx5_cqe64 (64 bytes).
const (
	CQESize = 64

	CQEOffTunneled      = 0  // tls_outer_l3_tunneled
	CQEOffWQEID         = 2  // wqe_id (be16): striding RQ WQE index
	CQEOffRSSHashResult = 12 // rss_hash_result (be32)
	CQEOffRSSHashType   = 16 // rss_hash_type
	CQEOffCheckSum      = 20 // check_sum (be16)
	CQEOffHdsIPExt      = 28 // hds_ip_ext: L2/L3/L4 OK bits
	CQEOffL4L3HdrType   = 29 // l4_l3_hdr_type
	CQEOffVLANInfo      = 30 // vlan_info (be16)
	CQEOffSRQN          = 32 // srqn / user_index (be32)
	CQEOffByteCnt       = 44 // byte_cnt (be32)
	CQEOffTimestamp     = 48 // timestamp (be64)
	CQEOffSopDropQPN    = 56 // sop_drop_qpn (be32)
	CQEOffWQECounter    = 60 // wqe_counter (be16): striding RQ stride index
	CQEOffSignature     = 62 // signature / validity_iteration_count
	CQEOffOpOwn         = 63 // op_own

	// struct mlx5_err_cqe.
	ErrCQEOffVendorErrSynd = 54
	ErrCQEOffSyndrome      = 55
)

// op_own.
const (
	CQEOwnerMask     = 0x01
	CQEFormatShift   = 2
	CQEFormatMask    = 0x3
	CQEFormatComp    = 3 // compressed (title or enhanced block)
	CQEOpcodeShift   = 4
	CQEInvalidOpOwn  = 0xF1 // initial fill: opcode INVALID, owner 1
	CQEInvalidOpcode = 15
)

// CQE opcodes (op_own >> 4).
const (
	CQEReq      = 0  // MLX5_CQE_REQ: send completion
	CQERespSend = 2  // MLX5_CQE_RESP_SEND: received packet
	CQEReqErr   = 13 // MLX5_CQE_REQ_ERR
	CQERespErr  = 14 // MLX5_CQE_RESP_ERR
	CQEInvalid  = 15 // MLX5_CQE_INVALID
)

// Error CQE syndromes used by the data path.
const (
	SyndromeLocalLength     = 0x01
	SyndromeLocalQPOp       = 0x02
	SyndromeLocalProtection = 0x04
	SyndromeWRFlushErr      = 0x05
)

// hds_ip_ext and l4_l3_hdr_type bits.
const (
	CQEL2OK = 1 << 0
	CQEL3OK = 1 << 1
	CQEL4OK = 1 << 2

	// CQEVLANStripped: l4_l3_hdr_type bit 0 means the device removed the
	// outer tag into vlan_info (DPDK MLX5_CQE_VLAN_STRIPPED; the kernel's
	// cqe_has_vlan, after which en_rx.c re-adds the tag to the skb). With
	// rqc.vsd = 1 a tagged frame arrives whole and the bit is clear.
	CQEVLANStripped = 1 << 0
	CQEIPExt        = 1 << 1 // IPv4 options / IPv6 extension headers present
	CQEL3HdrShift   = 2
	CQEL3HdrMask    = 0x3
	CQEL3HdrNone    = 0
	CQEL3HdrIPv6    = 1
	CQEL3HdrIPv4    = 2
	CQEL4HdrShift   = 4
	CQEL4HdrMask    = 0x7
	CQEL4HdrNone    = 0
	CQEL4HdrTCP     = 1
	CQEL4HdrUDP     = 2
	CQEL4HdrTCPAck  = 3 // ACK, no data
	CQEL4HdrTCPAckD = 4 // ACK with data
	CQEIPFrag       = 1 << 7
)

// Striding RQ byte_cnt (mpwrq_get_cqe_*).
const (
	MPWRQFillerFlag      = 1 << 31
	MPWRQConsumedShift   = 16
	MPWRQConsumedMask    = 0x7FFF
	MPWRQByteCntMask     = 0xFFFF
	MPWRQMinStrideLog    = 6  // 64-byte strides
	MPWRQMaxStrideLog    = 13 // 8 KiB strides
	MPWRQMinStridesLog   = 3  // with ext_stride_num_range (9 without)
	MPWRQMaxStridesLog   = 16
	MPWRQNoExtStridesLog = 9
)

// struct mlx5_mini_cqe8 (8 bytes, 8 per 64-byte array slot).
const (
	MiniCQESize      = 8
	MiniCQEArraySize = 8  // MLX5_MINI_CQE_ARRAY_SIZE
	MiniOffCheckSum  = 0  // CSUM formats
	MiniOffStrideIdx = 2  // CSUM_STRIDX
	MiniOffByteCnt   = 4  // be32
	MiniFmtHash      = 0  // mini_cqe_res_format HASH
	MiniFmtCSUM      = 1  // CSUM (no stride index)
	MiniFmtFTagStrdx = 2  // FTAG_STRIDX: flow tag + stride index; not decoded (refused)
	MiniFmtCSUMStrdx = 3  // CSUM_STRIDX (kernel default with mini_cqe_resp_stride_index)
	CQECompMaxNum    = 64 // cqe_compression_max_num the model uses by default
)

// Striding RQ WQE (struct mlx5e_rx_wqe_ll: next seg + data seg, 32 bytes).
const (
	RxWQESize          = 32
	RxWQEOffNextIndex  = 2  // next_wqe_index (be16), linked-list RQ only
	RxWQEOffByteCount  = 16 // data seg byte_count (be32)
	RxWQEOffLKey       = 20 // data seg lkey (be32)
	RxWQEOffAddr       = 24 // data seg addr (be64)
	WQTypeLinkedList   = 2
	WQTypeCyclicStride = 3
)

// Send WQEs: basic blocks, control / Ethernet / data segments.
const (
	SendWQEBBSize = 64 // MLX5_SEND_WQE_BB
	DSSize        = 16 // MLX5_SEND_WQE_DS
	DSPerWQEBB    = SendWQEBBSize / DSSize

	// struct mlx5_wqe_ctrl_seg (16 bytes).
	CtrlOffOpmodIdxOpcode = 0 // opmod[31:24] wqe_index[23:8] opcode[7:0]
	CtrlOffQPNDS          = 4 // qpn[31:8] ds[5:0]
	CtrlOffSignature      = 8
	CtrlOffFmCeSe         = 11
	CtrlOffImm            = 12
	CtrlDSMask            = 0x3F
	CtrlCQUpdate          = 0x08 // MLX5_WQE_CTRL_CQ_UPDATE: CE = 2, always a CQE
	CtrlCEShift           = 2
	CtrlCEMask            = 0x3

	// struct mlx5_wqe_eth_seg (16 bytes), at DS 1.
	EthSegOff            = 16
	EthOffSwpOuterL4     = 0
	EthOffCsFlags        = 4
	EthOffSwpFlags       = 5
	EthOffMSS            = 6
	EthOffFlowTableMeta  = 8
	EthOffInlineHdrSz    = 12 // be16
	EthOffInlineHdrStart = 14 // first 2 inline bytes
	EthAccelLen          = 6  // MLX5E_ACCEL_ESEG_LEN: bytes compared for MPWQE session breaks
	EthCsumL3            = 0x40
	EthCsumL4            = 0x80

	// struct mlx5_wqe_data_seg (16 bytes).
	DataOffByteCount = 0
	DataOffLKey      = 4
	DataOffAddr      = 8
	InlineSegFlag    = 0x80000000 // MLX5_INLINE_SEG
)

// Send opcodes.
const (
	OpNOP           = 0x00
	OpSend          = 0x0A
	OpLSO           = 0x0E
	OpEnhancedMPSW  = 0x29 // MLX5_OPCODE_ENHANCED_MPSW
	MaxSendWQEBBs   = 16   // MLX5_SEND_WQE_MAX_WQEBBS
	MaxMPWWQEBBs    = 15   // min(16, 63 DS / 4): the kernel's max_sq_mpw_wqebbs on x86
	MPWEmptyDS      = 2    // MLX5E_TX_WQE_EMPTY_DS_COUNT: ctrl + eth seg
	MinInlineL2     = 18   // MLX5_ESEG_MIN_INLINE_SIZE: Ethernet + one VLAN tag
	WQEIndexMask    = 0xFFFF
	CQIndexMask     = 0xFFFFFF
	DefaultFragment = 64 // WQEBBs per 4 KiB fragment
)

// Doorbell record dwords and the UAR send doorbell.
const (
	RcvDBROff      = 0 // MLX5_RCV_DBR
	SndDBROff      = 4 // MLX5_SND_DBR
	CQSetCIOff     = 0
	UARBlueFlameOf = 0x800
)
