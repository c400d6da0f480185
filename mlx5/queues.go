package mlx5

// This file is the contract between object creation (this package) and the
// data path (mlx5/dp). CreateCQ/CreateRQ/CreateSQ return these plain structs;
// the data path builds its rings from them and needs nothing else from this
// package except the MMIO seam for doorbells. Every slice points into memory
// from the DMA seam, so it is identical on VFIO hugepages and on the model.
//
// Byte order: the device reads and writes every field in Ring and DBRec
// big-endian (include/linux/mlx5/device.h: every field is __be). Ring contents are initialised before creation as
// the spec requires (CQ entries: op_own 0xF1 and validity_iteration_count
// 0xFF; WQ rings: zero), DBRec is zero.

// CompletionQueue is a created CQ.
type CompletionQueue struct {
	CQN     uint32
	Ring    []byte // (1 << LogSize) entries of CQESize bytes
	IOVA    uint64 // device address of Ring[0]
	LogSize uint8  // log2(number of CQEs)
	CQESize int    // 64 (only 64-byte CQEs are created)

	// DBRec is the 8-byte doorbell record: bytes 0..3 set_ci (be32,
	// consumer index & 0xFFFFFF), bytes 4..7 arm. DBRecIOVA is its device address.
	DBRec     []byte
	DBRecIOVA uint64

	// ArmDoorbell is the BAR0 offset of the CQ arm doorbell (UAR + 0x20).
	// A polling data path never arms; it is here for completeness.
	ArmDoorbell uint32

	// Compression is what the CQ context was created with.
	Compression CQECompression
}

// CQECompression is the CQE compression setting of a CQ (mlx5_ifc.h cqc:
// cqe_comp_en, mini_cqe_res_format, cqe_compression_layout).
type CQECompression struct {
	Enabled bool
	// Layout: 0 basic, 1 enhanced (prm.CQECompLayoutBasic/Enhanced).
	Layout uint8
	// MiniFormat is cqc.mini_cqe_res_format: 0 HASH, 1 CSUM, 2 FTAG_STRIDX, 3 CSUM_STRIDX.
	MiniFormat uint8
}

// ReceiveQueue is a created striding (multi-packet) RQ in state RDY.
type ReceiveQueue struct {
	RQN uint32
	CQN uint32 // the CQ this RQ completes to

	// Ring holds (1 << LogWQEs) WQEs of WQEStride bytes (32: one next
	// segment + one data segment). The data path fills the data segments
	// (byte_count = strides × stride size, LKey, buffer IOVA).
	Ring    []byte
	IOVA    uint64
	LogWQEs uint8
	// WQType is prm.WQTypeCyclicStridingRQ (3) or prm.WQTypeLinkedListStridingRQ (2).
	WQType    uint8
	WQEStride int

	LogStrides    uint8 // log2(strides per WQE)
	LogStrideSize uint8 // log2(stride bytes)
	TwoByteShift  bool  // device writes each packet 2 bytes into its stride

	// DBRec: the receive counter is the be32 at bytes 0..3 (MLX5_RCV_DBR).
	DBRec     []byte
	DBRecIOVA uint64

	LKey uint32 // the PA mkey's lkey, for data segments
}

// SendQueue is a created SQ in state RDY.
type SendQueue struct {
	SQN  uint32
	CQN  uint32
	TISN uint32

	// Ring holds (1 << LogWQEBBs) 64-byte WQE basic blocks.
	Ring      []byte
	IOVA      uint64
	LogWQEBBs uint8

	// DBRec: the send counter is the be32 at bytes 4..7 (MLX5_SND_DBR = 1).
	DBRec     []byte
	DBRecIOVA uint64

	// Doorbell is the BAR0 offset of the send doorbell register of the SQ's
	// UAR (UAR × 4096 + 0x800). Ring it with MMIO.Write64 and the first 8
	// bytes of the last WQE's control segment, after writing DBRec.
	Doorbell uint32

	LKey uint32

	// MinInline is the inline header mode TX WQEs must honour
	// (prm.InlineNone/L2/IP/TCPUDP), resolved from caps and the vport context.
	MinInline uint8
	// EnhancedMPW is true when the device supports opcode 0x29 and the SQ
	// was created allowing multi-packet WQEs.
	EnhancedMPW bool
	// MaxWQEBBs bounds one WQE (from cap max_wqe_sz_sq / 64, at most 16).
	MaxWQEBBs int
}
