// Package prm holds the mlx5 programming-reference constants and layouts the
// driver (mlx5) and the device model (mlx5/model/sim) share: opcodes, status codes,
// the initialization segment, command-queue structures and every command
// field either side reads or writes.
//
// Names follow linux include/linux/mlx5/mlx5_ifc.h and device.h. Layout fields are declared in layout.go through
// def, which also records the mlx5_ifc.h path of each field so that
// layout_test.go can check every offset against the table in testdata/
// derived from the public header.
//
// The package has no state and is safe for concurrent use.
package prm

import "fmt"

// Initialization segment (BAR0 offset 0), device.h struct mlx5_init_seg.
const (
	InitFWRev          = 0x0000 // [15:0] major, [31:16] minor
	InitCmdIfRevFWSub  = 0x0004 // [31:16] cmdif revision, [15:0] sub-minor
	InitCmdqAddrH      = 0x0010
	InitCmdqAddrLSz    = 0x0014 // read: [7:4] log_sz, [3:0] log_stride, [10:8] NIC state
	InitCmdDoorbell    = 0x0018
	InitInitializing   = 0x01FC // bit 31 while firmware initializes
	InitHealth         = 0x0200 // health buffer (64 bytes)
	InitHealthFWVer    = 0x0230
	InitHealthRFRSev   = 0x0238 // bit 31 recovery flow required; byte 0x23D syndrome
	InitHealthSynd     = 0x023C // dword holding irisc_index [31:24], synd [23:16], ext_synd [15:0]
	InitCmdExecTimeout = 0x0FF8
	InitHealthCounter  = 0x1010 // [23:0] increments while firmware is alive
	InitSegmentSize    = 0x1000 // UAR pages start after this (UAR 0 overlaps the init segment)

	CmdIfRev             = 5
	InitializingBit      = 1 << 31
	NICIfStateDisabled   = 1
	NICIfStateSWReset    = 7
	HealthFWVerDead      = 0xFFFFFFFF
	HealthCounterMask    = 0xFFFFFF
	MaxCommands          = 32
	AdapterPageSize      = 4096
	AdapterPageShift     = 12
	UARPageSize          = 4096
	UARCQDoorbell        = 0x20
	UAREQDoorbellArm     = 0x40
	UAREQDoorbellNoArm   = 0x48
	UARBlueFlameOffset   = 0x800
	CQEOpOwnInit         = 0xF1
	CQEValidityInit      = 0xFF
	EQEOwnerInit         = 1
	EQESize              = 64
	EQEOwnerOffset       = 63
	PCIDeviceID          = 0x2
	PCICommand           = 0x4
	PCICommandMemory     = 1 << 1
	PCICommandBusMaster  = 1 << 2
	HostEndiannessReg    = 0x7004
	RegPAOS              = 0x5006
	RegPMTU              = 0x5003
	AccessRegWrite       = 0
	AccessRegRead        = 1
	PCIVendorMellanox    = 0x15b3
	TeardownGraceful     = 0
	TeardownForceClose   = 1
	TeardownFast         = 2
	RcvDoorbellOffset    = 0 // RQ counter: dword 0 of the doorbell record
	SndDoorbellOffset    = 4 // SQ counter: dword 1 of the doorbell record
	SendWQEBB            = 64
	StridingRQWQEStride  = 32
	MPWQELogStridesBase  = 9
	MPWQELogStrideSzBase = 6
)

// Command queue entry (struct mlx5_cmd_layout, 64 bytes), device.h.
const (
	CmdEntrySize       = 64
	CmdEntryType       = 0  // byte: must be CmdTypePCI
	CmdEntryInLen      = 4  // be32
	CmdEntryInPtr      = 8  // be64
	CmdEntryIn         = 16 // 16 bytes of input
	CmdEntryOut        = 32 // 16 bytes of output
	CmdEntryOutPtr     = 48 // be64
	CmdEntryOutLen     = 56 // be32
	CmdEntryToken      = 60
	CmdEntrySig        = 61
	CmdEntryStatusOwn  = 63 // bit 0 ownership (1 = hardware), [7:1] delivery status
	CmdTypePCI         = 7
	CmdInlineBytes     = 16
	MailboxDataSize    = 512
	MailboxSize        = 576 // struct mlx5_cmd_prot_block
	MailboxNext        = 0x230
	MailboxBlockNum    = 0x238
	MailboxToken       = 0x23D
	MailboxCtrlSig     = 0x23E
	MailboxSig         = 0x23F
	MailboxAlign       = 1024
	CmdOwnerHW         = 1
	CmdDeliveryShift   = 1
	CmdHeaderLen       = 16 // every command input starts with a 16-byte header
	CmdOutMinLen       = 8  // every output starts with status and syndrome (ENABLE_HCA's is 12 bytes)
	CapabilitySize     = 4096
	CapabilityOffset   = 0x10
	PASOffset          = 0x110 // pas[] of CQ/EQ/RQ/SQ/mkey create commands
	SetFTEDestinations = 0x340
)

// Opcodes (mlx5_ifc.h MLX5_CMD_OP_*).
const (
	OpQueryHCACap            = 0x100
	OpQueryAdapter           = 0x101
	OpInitHCA                = 0x102
	OpTeardownHCA            = 0x103
	OpEnableHCA              = 0x104
	OpDisableHCA             = 0x105
	OpQueryPages             = 0x107
	OpManagePages            = 0x108
	OpSetHCACap              = 0x109
	OpQueryISSI              = 0x10A
	OpSetISSI                = 0x10B
	OpSetDriverVersion       = 0x10D
	OpCreateMkey             = 0x200
	OpDestroyMkey            = 0x202
	OpCreateEQ               = 0x301
	OpDestroyEQ              = 0x302
	OpCreateCQ               = 0x400
	OpDestroyCQ              = 0x401
	OpQueryCQ                = 0x402
	OpModifyCQ               = 0x403
	OpQueryVportState        = 0x750
	OpQueryNICVportContext   = 0x754
	OpModifyNICVportContext  = 0x755
	OpAllocQCounter          = 0x771
	OpDeallocQCounter        = 0x772
	OpAllocPD                = 0x800
	OpDeallocPD              = 0x801
	OpAllocUAR               = 0x802
	OpDeallocUAR             = 0x803
	OpAccessReg              = 0x805
	OpNOP                    = 0x80D
	OpAllocTransportDomain   = 0x816
	OpDeallocTransportDomain = 0x817
	OpSetL2TableEntry        = 0x829
	OpDeleteL2TableEntry     = 0x82B
	OpCreateTIR              = 0x900
	OpModifyTIR              = 0x901
	OpDestroyTIR             = 0x902
	OpCreateSQ               = 0x904
	OpModifySQ               = 0x905
	OpDestroySQ              = 0x906
	OpQuerySQ                = 0x907
	OpCreateRQ               = 0x908
	OpModifyRQ               = 0x909
	OpDestroyRQ              = 0x90A
	OpQueryRQ                = 0x90B
	OpCreateTIS              = 0x912
	OpDestroyTIS             = 0x914
	OpCreateRQT              = 0x916
	OpModifyRQT              = 0x917
	OpDestroyRQT             = 0x918
	OpSetFlowTableRoot       = 0x92F
	OpCreateFlowTable        = 0x930
	OpDestroyFlowTable       = 0x931
	OpCreateFlowGroup        = 0x933
	OpDestroyFlowGroup       = 0x934
	OpSetFlowTableEntry      = 0x936
	OpDeleteFlowTableEntry   = 0x938
)

var opcodeNames = map[uint16]string{
	OpQueryHCACap: "QUERY_HCA_CAP", OpQueryAdapter: "QUERY_ADAPTER", OpInitHCA: "INIT_HCA",
	OpTeardownHCA: "TEARDOWN_HCA", OpEnableHCA: "ENABLE_HCA", OpDisableHCA: "DISABLE_HCA",
	OpQueryPages: "QUERY_PAGES", OpManagePages: "MANAGE_PAGES", OpSetHCACap: "SET_HCA_CAP",
	OpQueryISSI: "QUERY_ISSI", OpSetISSI: "SET_ISSI", OpSetDriverVersion: "SET_DRIVER_VERSION",
	OpCreateMkey: "CREATE_MKEY", OpDestroyMkey: "DESTROY_MKEY", OpCreateEQ: "CREATE_EQ",
	OpDestroyEQ: "DESTROY_EQ", OpCreateCQ: "CREATE_CQ", OpDestroyCQ: "DESTROY_CQ",
	OpQueryCQ: "QUERY_CQ", OpModifyCQ: "MODIFY_CQ", OpQueryVportState: "QUERY_VPORT_STATE",
	OpQueryNICVportContext: "QUERY_NIC_VPORT_CONTEXT", OpModifyNICVportContext: "MODIFY_NIC_VPORT_CONTEXT",
	OpAllocQCounter: "ALLOC_Q_COUNTER", OpDeallocQCounter: "DEALLOC_Q_COUNTER",
	OpAllocPD: "ALLOC_PD", OpDeallocPD: "DEALLOC_PD", OpAllocUAR: "ALLOC_UAR", OpDeallocUAR: "DEALLOC_UAR",
	OpAccessReg: "ACCESS_REG", OpNOP: "NOP", OpAllocTransportDomain: "ALLOC_TRANSPORT_DOMAIN",
	OpDeallocTransportDomain: "DEALLOC_TRANSPORT_DOMAIN", OpSetL2TableEntry: "SET_L2_TABLE_ENTRY",
	OpDeleteL2TableEntry: "DELETE_L2_TABLE_ENTRY", OpCreateTIR: "CREATE_TIR", OpModifyTIR: "MODIFY_TIR",
	OpDestroyTIR: "DESTROY_TIR", OpCreateSQ: "CREATE_SQ", OpModifySQ: "MODIFY_SQ", OpDestroySQ: "DESTROY_SQ",
	OpQuerySQ: "QUERY_SQ", OpCreateRQ: "CREATE_RQ", OpModifyRQ: "MODIFY_RQ", OpDestroyRQ: "DESTROY_RQ",
	OpQueryRQ: "QUERY_RQ", OpCreateTIS: "CREATE_TIS", OpDestroyTIS: "DESTROY_TIS", OpCreateRQT: "CREATE_RQT",
	OpModifyRQT: "MODIFY_RQT", OpDestroyRQT: "DESTROY_RQT", OpSetFlowTableRoot: "SET_FLOW_TABLE_ROOT",
	OpCreateFlowTable: "CREATE_FLOW_TABLE", OpDestroyFlowTable: "DESTROY_FLOW_TABLE",
	OpCreateFlowGroup: "CREATE_FLOW_GROUP", OpDestroyFlowGroup: "DESTROY_FLOW_GROUP",
	OpSetFlowTableEntry: "SET_FLOW_TABLE_ENTRY", OpDeleteFlowTableEntry: "DELETE_FLOW_TABLE_ENTRY",
}

// OpcodeName is the spec name of a command opcode ("CREATE_CQ"), or its hex value.
func OpcodeName(op uint16) string {
	if n, ok := opcodeNames[op]; ok {
		return n
	}
	return fmt.Sprintf("opcode 0x%x", op)
}

// Command status (mbox_out.status), kernel cmd.c cmd_status_str.
const (
	StatusOK           = 0x00
	StatusInternalErr  = 0x01
	StatusBadOp        = 0x02
	StatusBadParam     = 0x03
	StatusBadSysState  = 0x04
	StatusBadResource  = 0x05
	StatusResourceBusy = 0x06
	StatusExceedLim    = 0x08
	StatusBadResState  = 0x09
	StatusBadIndex     = 0x0A
	StatusNoResources  = 0x0F
	StatusBadQPState   = 0x10
	StatusBadPkt       = 0x30
	StatusBadSize      = 0x40
	StatusBadInputLen  = 0x50
	StatusBadOutputLen = 0x51
)

var statusNames = map[uint8]string{
	StatusOK: "OK", StatusInternalErr: "INTERNAL_ERR", StatusBadOp: "BAD_OP", StatusBadParam: "BAD_PARAM",
	StatusBadSysState: "BAD_SYS_STATE", StatusBadResource: "BAD_RES", StatusResourceBusy: "RES_BUSY",
	StatusExceedLim: "EXCEED_LIM", StatusBadResState: "BAD_RES_STATE", StatusBadIndex: "BAD_INDEX",
	StatusNoResources: "NO_RESOURCES", StatusBadQPState: "BAD_QP_STATE", StatusBadPkt: "BAD_PKT",
	StatusBadSize: "BAD_SIZE", StatusBadInputLen: "BAD_INPUT_LEN", StatusBadOutputLen: "BAD_OUTPUT_LEN",
}

// StatusName is the spec name of a command status.
func StatusName(s uint8) string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("status 0x%x", s)
}

// Delivery status (status_own >> 1): the transport refused the command, it never ran.
const (
	DeliveryOK             = 0x0
	DeliverySignatureErr   = 0x1
	DeliveryTokenErr       = 0x2
	DeliveryBadBlockNumber = 0x3
	DeliveryBadOutPtr      = 0x4
	DeliveryBadInPtr       = 0x5
	DeliveryFWErr          = 0x6
	DeliveryBadInLen       = 0x7
	DeliveryBadOutLen      = 0x8
	DeliveryResNotCleared  = 0x9
	DeliveryBadCmdDesc     = 0x10
)

var deliveryNames = map[uint8]string{
	DeliveryOK: "OK", DeliverySignatureErr: "signature error", DeliveryTokenErr: "token error",
	DeliveryBadBlockNumber: "bad block number", DeliveryBadOutPtr: "output pointer alignment error",
	DeliveryBadInPtr: "input pointer alignment error", DeliveryFWErr: "firmware error",
	DeliveryBadInLen: "input length error", DeliveryBadOutLen: "output length error",
	DeliveryResNotCleared: "reserved field not cleared", DeliveryBadCmdDesc: "bad command descriptor",
}

// DeliveryName describes a delivery status.
func DeliveryName(s uint8) string {
	if n, ok := deliveryNames[s]; ok {
		return n
	}
	return fmt.Sprintf("delivery status 0x%x", s)
}

// Health syndromes (health buffer synd), kernel health.c hsynd_str.
var healthSyndromes = map[uint8]string{
	0x1: "FW internal error", 0x7: "IRISC not responding", 0x8: "HW unrecoverable", 0x9: "FW CRC error",
	0xA: "ICM fetch PCI error", 0xB: "HW fatal", 0xC: "async EQ overrun", 0xD: "EQ error",
	0xE: "invalid EQ", 0xF: "FFSER error", 0x10: "high temperature",
}

// HealthSyndromeName describes a health syndrome.
func HealthSyndromeName(s uint8) string {
	if n, ok := healthSyndromes[s]; ok {
		return n
	}
	return fmt.Sprintf("syndrome 0x%x", s)
}

// Event types (EQE type), device.h enum mlx5_event.
const (
	EventComp           = 0x00
	EventCQError        = 0x04
	EventWQCatasError   = 0x05
	EventInternalError  = 0x08
	EventPortChange     = 0x09
	EventCmd            = 0x0A
	EventPageRequest    = 0x0B
	EventNICVportChange = 0x0D
)

// EQE layout (struct mlx5_eqe).
const (
	EQEType         = 1
	EQESubType      = 3
	EQEData         = 0x20
	EQEPageFuncID   = EQEData + 2 // be16
	EQEPageNumPages = EQEData + 4 // be32, signed
	EQECmdVector    = EQEData     // be32
)

// Capability types (QUERY_HCA_CAP op_mod = type << 1 | mode).
const (
	CapGeneral         = 0x0
	CapEthernetOffload = 0x1
	CapFlowTable       = 0x7
	CapGeneral2        = 0x20
	CapModeMax         = 0
	CapModeCurrent     = 1
)

// QUERY_PAGES / MANAGE_PAGES op_mod.
const (
	PagesBoot    = 1
	PagesInit    = 2
	PagesRegular = 3

	ManagePagesCantGive = 0
	ManagePagesGive     = 1
	ManagePagesTake     = 2
)

// Object and queue enumerations.
const (
	QueueStateRST = 0
	QueueStateRDY = 1
	QueueStateERR = 3

	WQTypeLinkedList           = 0
	WQTypeCyclic               = 1
	WQEndPadAlign              = 1 // MLX5_WQ_END_PAD_MODE_ALIGN: the device pads a packet's last write to a cache line
	WQTypeLinkedListStridingRQ = 2
	WQTypeCyclicStridingRQ     = 3

	MkeyAccessPA = 0

	TIRDispDirect   = 0
	TIRDispIndirect = 1
	RxHashNone      = 0
	RxHashXOR8      = 1
	RxHashToeplitz  = 2
	ToeplitzKeySize = 40

	HashL3IPv4   = 0
	HashL3IPv6   = 1
	HashL4TCP    = 0
	HashL4UDP    = 1
	HashSrcIP    = 1 << 0
	HashDstIP    = 1 << 1
	HashL4SPort  = 1 << 2
	HashL4DPort  = 1 << 3
	HashIPSecSPI = 1 << 4

	FlowTableNICRX    = 0
	FlowActionAllow   = 0x1
	FlowActionDrop    = 0x2
	FlowActionFwdDest = 0x4
	FlowDestFlowTable = 1
	FlowDestTIR       = 2
	MatchOuterHeaders = 1 << 0

	CQECompLayoutBasic    = 0
	CQECompLayoutEnhanced = 1
	MiniCQEHash           = 0
	MiniCQECsum           = 1
	MiniCQEFtagStridx     = 2
	MiniCQECsumStridx     = 3

	InlineNone   = 0
	InlineL2     = 1
	InlineIP     = 2
	InlineTCPUDP = 3

	CapInlineL2        = 0 // wqe_inline_mode: L2 inline required
	CapInlineVport     = 1 // from nic_vport_context.min_wqe_inline_mode
	CapInlineNotNeeded = 2

	VportFieldAddresses = 1 << 2
	VportFieldPromisc   = 1 << 4
	VportFieldMTU       = 1 << 6

	// HW MTU = L3 MTU + Ethernet (14) + VLAN (4) + FCS (4) (MLX5E_SW2HW_MTU).
	HWMTUOverhead = 22
)
