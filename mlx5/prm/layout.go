package prm

// Every command field the driver or the model reads or writes. Each is
// declared with its offset and the mlx5_ifc.h path it
// corresponds to; layout_test.go checks all of them against
// testdata/mlx5_ifc_layout.txt, derived from the public header.
//
// Offsets are absolute inside the named command structure (for contexts
// embedded in a command, the context's offset is included), except for the
// capability structures, whose offsets are inside the 4096-byte capability
// (at CapabilityOffset of QUERY_HCA_CAP's output).

// LayoutEntry is one checked field.
type LayoutEntry struct {
	Path  string // mlx5_ifc.h structure (without mlx5_ifc_/_bits) and field path
	Field Field
}

var layout []LayoutEntry

func def(path string, f Field) Field {
	layout = append(layout, LayoutEntry{path, f})
	return f
}

// Layout lists every field declared in this package with its mlx5_ifc.h path.
func Layout() []LayoutEntry { return append([]LayoutEntry(nil), layout...) }

// Generic header (every *_in / *_out starts with these).
var (
	InOpcode  = def("create_cq_in.opcode", F(0x00, 31, 16))
	InUID     = def("create_cq_in.uid", F(0x00, 15, 0))
	InOpMod   = def("create_cq_in.op_mod", F(0x04, 15, 0))
	OutStatus = def("create_cq_out.status", F(0x00, 31, 24))
	OutSynd   = def("create_cq_out.syndrome", D32(0x04))
	// OutObjID is the object number every create/alloc command returns.
	OutObjID = def("create_cq_out.cqn", F(0x08, 23, 0))
	// InObjID is the object number every destroy/dealloc command takes.
	InObjID = def("destroy_cq_in.cqn", F(0x08, 23, 0))
)

// The id fields of the other create/destroy commands sit at the same place;
// these entries make the layout test prove it.
var (
	_ = def("alloc_uar_out.uar", F(0x08, 23, 0))
	_ = def("dealloc_uar_in.uar", F(0x08, 23, 0))
	_ = def("alloc_pd_out.pd", F(0x08, 23, 0))
	_ = def("dealloc_pd_in.pd", F(0x08, 23, 0))
	_ = def("alloc_transport_domain_out.transport_domain", F(0x08, 23, 0))
	_ = def("dealloc_transport_domain_in.transport_domain", F(0x08, 23, 0))
	_ = def("create_mkey_out.mkey_index", F(0x08, 23, 0))
	_ = def("destroy_mkey_in.mkey_index", F(0x08, 23, 0))
	_ = def("create_rq_out.rqn", F(0x08, 23, 0))
	_ = def("destroy_rq_in.rqn", F(0x08, 23, 0))
	_ = def("create_sq_out.sqn", F(0x08, 23, 0))
	_ = def("destroy_sq_in.sqn", F(0x08, 23, 0))
	_ = def("create_tis_out.tisn", F(0x08, 23, 0))
	_ = def("destroy_tis_in.tisn", F(0x08, 23, 0))
	_ = def("create_rqt_out.rqtn", F(0x08, 23, 0))
	_ = def("destroy_rqt_in.rqtn", F(0x08, 23, 0))
	_ = def("create_tir_out.tirn", F(0x08, 23, 0))
	_ = def("destroy_tir_in.tirn", F(0x08, 23, 0))
	_ = def("create_flow_table_out.table_id", F(0x08, 23, 0))
	_ = def("create_flow_group_out.group_id", F(0x08, 23, 0))
)

// EQ numbers are 8 bits wide.
var (
	CreateEQOutEQN = def("create_eq_out.eq_number", F(0x08, 7, 0))
	DestroyEQInEQN = def("destroy_eq_in.eq_number", F(0x08, 7, 0))
)

// Init-phase commands (kernel main.c, pagealloc.c).
var (
	EnableHCAFunctionID     = def("enable_hca_in.function_id", F(0x08, 15, 0))
	EnableHCAEmbeddedCPU    = def("enable_hca_in.embedded_cpu_function", F(0x08, 31, 31))
	DisableHCAFunctionID    = def("disable_hca_in.function_id", F(0x08, 15, 0))
	QueryISSICurrent        = def("query_issi_out.current_issi", F(0x08, 15, 0))
	QueryISSISupportedDW0   = def("query_issi_out.supported_issi_dw0", D32(0x6C))
	SetISSICurrent          = def("set_issi_in.current_issi", F(0x08, 15, 0))
	QueryPagesOutFunctionID = def("query_pages_out.function_id", F(0x08, 15, 0))
	QueryPagesOutNumPages   = def("query_pages_out.num_pages", D32(0x0C))
	QueryPagesInFunctionID  = def("query_pages_in.function_id", F(0x08, 15, 0))
	ManagePagesFunctionID   = def("manage_pages_in.function_id", F(0x08, 15, 0))
	ManagePagesInNum        = def("manage_pages_in.input_num_entries", D32(0x0C))
	ManagePagesInPAS        = def("manage_pages_in.pas", D64(0x10))
	ManagePagesOutNum       = def("manage_pages_out.output_num_entries", D32(0x08))
	ManagePagesOutPAS       = def("manage_pages_out.pas", D64(0x10))
	QueryHCACapFunctionID   = def("query_hca_cap_in.function_id", F(0x08, 15, 0))
	AccessRegID             = def("access_register_in.register_id", F(0x08, 15, 0))
	AccessRegArgument       = def("access_register_in.argument", D32(0x0C))
	AccessRegInData         = def("access_register_in.register_data", D32(0x10))
	AccessRegOutData        = def("access_register_out.register_data", D32(0x10))
	TeardownHCAProfile      = def("teardown_hca_in.profile", F(0x08, 15, 0))
	TeardownHCAOutState     = def("teardown_hca_out.state", F(0x0C, 0, 0))
)

// Input / output lengths of fixed-size commands.
const (
	InitHCAInLen        = 0x20
	QueryISSIOutLen     = 0x70
	SetHCACapInLen      = CapabilityOffset + CapabilitySize
	QueryHCACapOutLen   = CapabilityOffset + CapabilitySize
	AccessRegDataOff    = 0x10
	CreateTISInLen      = 0xC0
	CreateFlowTableLen  = 0x40
	CreateFlowGroupLen  = 0x400
	SetFTEInBaseLen     = SetFTEDestinations
	FlowCmdInLen        = 0x40
	QueryNICVportOutLen = 0x110
	ModifyNICVportInLen = 0x200
	CreateRQTInBaseLen  = 0x110
)

// General device capabilities (cmd_hca_cap), offsets inside the capability.
var (
	CapLogMaxCQSz              = def("cmd_hca_cap.log_max_cq_sz", F(0x18, 23, 16))
	CapLogMaxCQ                = def("cmd_hca_cap.log_max_cq", F(0x18, 4, 0))
	CapLogMaxEQSz              = def("cmd_hca_cap.log_max_eq_sz", F(0x1C, 31, 24))
	CapLogMaxMkey              = def("cmd_hca_cap.log_max_mkey", F(0x1C, 21, 16))
	CapFastTeardown            = def("cmd_hca_cap.fast_teardown", F(0x1C, 4, 4))
	CapLogMaxEQ                = def("cmd_hca_cap.log_max_eq", F(0x1C, 3, 0))
	CapCacheLine128            = def("cmd_hca_cap.cache_line_128byte", F(0x2C, 27, 27))
	CapVportGroupManager       = def("cmd_hca_cap.vport_group_manager", F(0x34, 31, 31))
	CapNICFlowTable            = def("cmd_hca_cap.nic_flow_table", F(0x34, 25, 25))
	CapEswitchManager          = def("cmd_hca_cap.eswitch_manager", F(0x34, 24, 24))
	CapPortType                = def("cmd_hca_cap.port_type", F(0x34, 9, 8))
	CapNumPorts                = def("cmd_hca_cap.num_ports", F(0x34, 7, 0))
	CapStridingRQ              = def("cmd_hca_cap.striding_rq", F(0x40, 30, 30))
	CapCmdIfChecksum           = def("cmd_hca_cap.cmdif_checksum", F(0x40, 15, 14))
	CapUAR4K                   = def("cmd_hca_cap.uar_4k", F(0x48, 31, 31))
	CapBF                      = def("cmd_hca_cap.bf", F(0x4C, 31, 31))
	CapLogBFRegSize            = def("cmd_hca_cap.log_bf_reg_size", F(0x4C, 20, 16))
	CapMaxWQESzSQ              = def("cmd_hca_cap.max_wqe_sz_sq", F(0x50, 15, 0))
	CapLogMaxTransportDomain   = def("cmd_hca_cap.log_max_transport_domain", F(0x64, 28, 24))
	CapLogMaxPD                = def("cmd_hca_cap.log_max_pd", F(0x64, 20, 16))
	CapLogMaxRQ                = def("cmd_hca_cap.log_max_rq", F(0x6C, 28, 24))
	CapLogMaxSQ                = def("cmd_hca_cap.log_max_sq", F(0x6C, 20, 16))
	CapLogMaxTIR               = def("cmd_hca_cap.log_max_tir", F(0x6C, 12, 8))
	CapLogMaxTIS               = def("cmd_hca_cap.log_max_tis", F(0x6C, 4, 0))
	CapLogMaxRQT               = def("cmd_hca_cap.log_max_rqt", F(0x70, 20, 16))
	CapLogMaxRQTSize           = def("cmd_hca_cap.log_max_rqt_size", F(0x70, 12, 8))
	CapExtStrideNumRange       = def("cmd_hca_cap.ext_stride_num_range", F(0x74, 31, 31))
	CapLogMaxWQSz              = def("cmd_hca_cap.log_max_wq_sz", F(0x78, 4, 0))
	CapLogUARPageSz            = def("cmd_hca_cap.log_uar_page_sz", F(0x90, 15, 0))
	CapDeviceFrequencyKHz      = def("cmd_hca_cap.device_frequency_khz", D32(0x9C))
	CapEnhancedCQECompression  = def("cmd_hca_cap.enhanced_cqe_compression", F(0xB4, 15, 15))
	CapMiniCQERespStrideIndex  = def("cmd_hca_cap.mini_cqe_resp_stride_index", F(0xB4, 3, 3))
	CapCQECompression          = def("cmd_hca_cap.cqe_compression", F(0xB4, 0, 0))
	CapCQECompressionMaxNum    = def("cmd_hca_cap.cqe_compression_max_num", F(0xB8, 15, 0))
	CapEthCsum                 = def("per_protocol_networking_offload_caps.csum_cap", F(0x00, 31, 31))
	CapEthMultiPktSendWQE      = def("per_protocol_networking_offload_caps.multi_pkt_send_wqe", F(0x00, 15, 14))
	CapEthWQEInlineMode        = def("per_protocol_networking_offload_caps.wqe_inline_mode", F(0x00, 13, 12))
	CapEthEnhancedMultiPktSend = def("per_protocol_networking_offload_caps.enhanced_multi_pkt_send_wqe", F(0x00, 5, 5))
	CapFTNICRXSupport          = def("flow_table_nic_cap.flow_table_properties_nic_receive.ft_support", F(0x40, 31, 31))
	CapFTNICRXLogMaxSize       = def("flow_table_nic_cap.flow_table_properties_nic_receive.log_max_ft_size", F(0x44, 29, 24))
	CapFTNICRXMaxLevel         = def("flow_table_nic_cap.flow_table_properties_nic_receive.max_ft_level", F(0x44, 7, 0))
	CapFTNICRXLogMaxDest       = def("flow_table_nic_cap.flow_table_properties_nic_receive.log_max_destination", F(0x50, 7, 0))
)

// CREATE_MKEY (mlx5_ifc.h mkc).
var (
	MkeyFree          = def("create_mkey_in.memory_key_mkey_entry.free", F(0x10, 30, 30))
	MkeyLW            = def("create_mkey_in.memory_key_mkey_entry.lw", F(0x10, 11, 11))
	MkeyLR            = def("create_mkey_in.memory_key_mkey_entry.lr", F(0x10, 10, 10))
	MkeyAccessMode1_0 = def("create_mkey_in.memory_key_mkey_entry.access_mode_1_0", F(0x10, 9, 8))
	MkeyAccessMode4_2 = def("create_mkey_in.memory_key_mkey_entry.access_mode_4_2", F(0x10, 28, 26))
	MkeyQPN           = def("create_mkey_in.memory_key_mkey_entry.qpn", F(0x14, 31, 8))
	Mkey7_0           = def("create_mkey_in.memory_key_mkey_entry.mkey_7_0", F(0x14, 7, 0))
	MkeyLength64      = def("create_mkey_in.memory_key_mkey_entry.length64", F(0x1C, 31, 31))
	MkeyPD            = def("create_mkey_in.memory_key_mkey_entry.pd", F(0x1C, 23, 0))
	MkeyStartAddr     = def("create_mkey_in.memory_key_mkey_entry.start_addr", D64(0x20))
	MkeyLen           = def("create_mkey_in.memory_key_mkey_entry.len", D64(0x28))
	MkeyTranslations  = def("create_mkey_in.translations_octword_actual_size", D32(0x60))
)

// CREATE_EQ (mlx5_ifc.h eqc; kernel eq.c).
var (
	EQCLogSize     = def("create_eq_in.eq_context_entry.log_eq_size", F(0x1C, 28, 24))
	EQCUARPage     = def("create_eq_in.eq_context_entry.uar_page", F(0x1C, 23, 0))
	EQCIntr        = def("create_eq_in.eq_context_entry.intr", F(0x24, 11, 0))
	EQCLogPageSize = def("create_eq_in.eq_context_entry.log_page_size", F(0x28, 28, 24))
	EQEventBitmask = def("create_eq_in.event_bitmask", Bytes(0x58, 32)) // 4 × be64; event t is bit t%64 of word t/64
	EQPAS          = def("create_eq_in.pas", D64(PASOffset))
)

// CREATE_CQ (mlx5_ifc.h cqc; kernel en_main.c mlx5e_create_cq).
var (
	CQCCQESz         = def("create_cq_in.cq_context.cqe_sz", F(0x10, 23, 21))
	CQCOI            = def("create_cq_in.cq_context.oi", F(0x10, 17, 17))
	CQCCompEn        = def("create_cq_in.cq_context.cqe_comp_en", F(0x10, 14, 14))
	CQCMiniCQEFormat = def("create_cq_in.cq_context.mini_cqe_res_format", F(0x10, 13, 12))
	CQCCompLayout    = def("create_cq_in.cq_context.cqe_compression_layout", F(0x10, 1, 0))
	CQCLogSize       = def("create_cq_in.cq_context.log_cq_size", F(0x1C, 28, 24))
	CQCUARPage       = def("create_cq_in.cq_context.uar_page", F(0x1C, 23, 0))
	CQCEQN           = def("create_cq_in.cq_context.c_eqn_or_apu_element", D32(0x24))
	CQCLogPageSize   = def("create_cq_in.cq_context.log_page_size", F(0x28, 28, 24))
	CQCDBRAddr       = def("create_cq_in.cq_context.dbr_addr", D64(0x48))
	CQPAS            = def("create_cq_in.pas", D64(PASOffset))
)

// CREATE_RQ / MODIFY_RQ (mlx5_ifc.h rqc, wq; kernel en_main.c mlx5e_create_rq).
var (
	RQCVSD            = def("create_rq_in.ctx.vsd", F(0x20, 28, 28))
	RQCMemRQType      = def("create_rq_in.ctx.mem_rq_type", F(0x20, 27, 24))
	RQCState          = def("create_rq_in.ctx.state", F(0x20, 23, 20))
	RQCFlushInError   = def("create_rq_in.ctx.flush_in_error_en", F(0x20, 18, 18))
	RQCCQN            = def("create_rq_in.ctx.cqn", F(0x28, 23, 0))
	RQWQType          = def("create_rq_in.ctx.wq.wq_type", F(0x50, 31, 28))
	RQWQEndPadding    = def("create_rq_in.ctx.wq.end_padding_mode", F(0x50, 26, 25))
	RQWQPD            = def("create_rq_in.ctx.wq.pd", F(0x58, 23, 0))
	RQWQDBRAddr       = def("create_rq_in.ctx.wq.dbr_addr", D64(0x60))
	RQWQLogStride     = def("create_rq_in.ctx.wq.log_wq_stride", F(0x70, 19, 16))
	RQWQLogPgSz       = def("create_rq_in.ctx.wq.log_wq_pg_sz", F(0x70, 12, 8))
	RQWQLogSz         = def("create_rq_in.ctx.wq.log_wq_sz", F(0x70, 4, 0))
	RQWQLogNumStrides = def("create_rq_in.ctx.wq.log_wqe_num_of_strides", F(0x74, 11, 8))
	RQWQTwoByteShift  = def("create_rq_in.ctx.wq.two_byte_shift_en", F(0x74, 7, 7))
	RQWQLogStrideSize = def("create_rq_in.ctx.wq.log_wqe_stride_size", F(0x74, 2, 0))
	RQPAS             = def("create_rq_in.ctx.wq.pas.pa_h", D64(PASOffset))
	ModifyRQCurState  = def("modify_rq_in.rq_state", F(0x08, 31, 28))
	ModifyRQN         = def("modify_rq_in.rqn", F(0x08, 23, 0))
	ModifyRQBitmask   = def("modify_rq_in.modify_bitmask", D64(0x10))
	ModifyRQNextState = def("modify_rq_in.ctx.state", F(0x20, 23, 20))
)

// CREATE_SQ / MODIFY_SQ and CREATE_TIS (mlx5_ifc.h sqc, tisc; kernel en_main.c).
var (
	SQCFlushInError   = def("create_sq_in.ctx.flush_in_error_en", F(0x20, 28, 28))
	SQCAllowMultiPkt  = def("create_sq_in.ctx.allow_multi_pkt_send_wqe", F(0x20, 27, 27))
	SQCMinInline      = def("create_sq_in.ctx.min_wqe_inline_mode", F(0x20, 26, 24))
	SQCState          = def("create_sq_in.ctx.state", F(0x20, 23, 20))
	SQCCQN            = def("create_sq_in.ctx.cqn", F(0x28, 23, 0))
	SQCTISListSize    = def("create_sq_in.ctx.tis_lst_sz", F(0x40, 31, 16))
	SQCTISNum0        = def("create_sq_in.ctx.tis_num_0", F(0x4C, 23, 0))
	SQWQType          = def("create_sq_in.ctx.wq.wq_type", F(0x50, 31, 28))
	SQWQPD            = def("create_sq_in.ctx.wq.pd", F(0x58, 23, 0))
	SQWQUARPage       = def("create_sq_in.ctx.wq.uar_page", F(0x5C, 23, 0))
	SQWQDBRAddr       = def("create_sq_in.ctx.wq.dbr_addr", D64(0x60))
	SQWQLogStride     = def("create_sq_in.ctx.wq.log_wq_stride", F(0x70, 19, 16))
	SQWQLogPgSz       = def("create_sq_in.ctx.wq.log_wq_pg_sz", F(0x70, 12, 8))
	SQWQLogSz         = def("create_sq_in.ctx.wq.log_wq_sz", F(0x70, 4, 0))
	SQPAS             = def("create_sq_in.ctx.wq.pas.pa_h", D64(PASOffset))
	ModifySQCurState  = def("modify_sq_in.sq_state", F(0x08, 31, 28))
	ModifySQN         = def("modify_sq_in.sqn", F(0x08, 23, 0))
	ModifySQNextState = def("modify_sq_in.ctx.state", F(0x20, 23, 20))
	TISCPrio          = def("create_tis_in.ctx.prio", F(0x20, 19, 16))
	TISCTD            = def("create_tis_in.ctx.transport_domain", F(0x44, 23, 0))
)

// CREATE_RQT / CREATE_TIR (mlx5_ifc.h rqtc, tirc; kernel en/rqt.c, en/tir.c).
var (
	RQTCMaxSize    = def("create_rqt_in.rqt_context.rqt_max_size", F(0x34, 15, 0))
	RQTCActualSize = def("create_rqt_in.rqt_context.rqt_actual_size", F(0x38, 15, 0))
	RQTCRQNum0     = def("create_rqt_in.rqt_context.rq_num.rq_num", F(0x110, 23, 0))
	TIRCDispType   = def("create_tir_in.ctx.disp_type", F(0x24, 31, 28))
	TIRCInlineRQN  = def("create_tir_in.ctx.inline_rqn", F(0x3C, 23, 0))
	TIRCIndirect   = def("create_tir_in.ctx.indirect_table", F(0x40, 23, 0))
	TIRCHashFn     = def("create_tir_in.ctx.rx_hash_fn", F(0x44, 31, 28))
	TIRCSelfLB     = def("create_tir_in.ctx.self_lb_block", F(0x44, 25, 24))
	TIRCTD         = def("create_tir_in.ctx.transport_domain", F(0x44, 23, 0))
	TIRCToeplitz   = def("create_tir_in.ctx.rx_hash_toeplitz_key", Bytes(0x48, ToeplitzKeySize))
	TIRCHashL3     = def("create_tir_in.ctx.rx_hash_field_selector_outer.l3_prot_type", F(0x70, 31, 31))
	TIRCHashL4     = def("create_tir_in.ctx.rx_hash_field_selector_outer.l4_prot_type", F(0x70, 30, 30))
	TIRCHashFields = def("create_tir_in.ctx.rx_hash_field_selector_outer.selected_fields", F(0x70, 29, 0))
)

// NIC RX steering (mlx5_ifc.h flow tables; kernel fs_cmd.c).
var (
	FTTableType     = def("create_flow_table_in.table_type", F(0x10, 31, 24))
	FTMissAction    = def("create_flow_table_in.flow_table_context.table_miss_action", F(0x18, 27, 24))
	FTLevel         = def("create_flow_table_in.flow_table_context.level", F(0x18, 23, 16))
	FTLogSize       = def("create_flow_table_in.flow_table_context.log_size", F(0x18, 7, 0))
	FTDestroyType   = def("destroy_flow_table_in.table_type", F(0x10, 31, 24))
	FTDestroyID     = def("destroy_flow_table_in.table_id", F(0x14, 23, 0))
	FGTableType     = def("create_flow_group_in.table_type", F(0x10, 31, 24))
	FGTableID       = def("create_flow_group_in.table_id", F(0x14, 23, 0))
	FGStartIndex    = def("create_flow_group_in.start_flow_index", D32(0x1C))
	FGEndIndex      = def("create_flow_group_in.end_flow_index", D32(0x24))
	FGCriteriaEn    = def("create_flow_group_in.match_criteria_enable", F(0x3C, 7, 0))
	FGDestroyType   = def("destroy_flow_group_in.table_type", F(0x10, 31, 24))
	FGDestroyTable  = def("destroy_flow_group_in.table_id", F(0x14, 23, 0))
	FGDestroyID     = def("destroy_flow_group_in.group_id", D32(0x18))
	FTETableType    = def("set_fte_in.table_type", F(0x10, 31, 24))
	FTETableID      = def("set_fte_in.table_id", F(0x14, 23, 0))
	FTEFlowIndex    = def("set_fte_in.flow_index", D32(0x20))
	FTEGroupID      = def("set_fte_in.flow_context.group_id", D32(0x44))
	FTEFlowTag      = def("set_fte_in.flow_context.flow_tag", F(0x48, 23, 0))
	FTEAction       = def("set_fte_in.flow_context.action", F(0x4C, 15, 0))
	FTEDestListSize = def("set_fte_in.flow_context.destination_list_size", F(0x50, 23, 0))
	FTEDestType0    = def("set_fte_in.flow_context.destination.extended_dest_format.destination_entry.destination_type", F(0x340, 31, 24))
	FTEDestID0      = def("set_fte_in.flow_context.destination.extended_dest_format.destination_entry.destination_id", F(0x340, 23, 0))
	FTEDelTableType = def("delete_fte_in.table_type", F(0x10, 31, 24))
	FTEDelTableID   = def("delete_fte_in.table_id", F(0x14, 23, 0))
	FTEDelIndex     = def("delete_fte_in.flow_index", D32(0x20))
	RootTableType   = def("set_flow_table_root_in.table_type", F(0x10, 31, 24))
	RootTableID     = def("set_flow_table_root_in.table_id", F(0x14, 23, 0))
)

// Vport context and link (mlx5_ifc.h nic_vport_context, paos_reg; kernel
// vport.c, port.c).
var (
	QVportMinInline   = def("query_nic_vport_context_out.nic_vport_context.min_wqe_inline_mode", F(0x10, 26, 24))
	QVportMTU         = def("query_nic_vport_context_out.nic_vport_context.mtu", F(0x34, 15, 0))
	QVportPromiscUC   = def("query_nic_vport_context_out.nic_vport_context.promisc_uc", F(0x100, 31, 31))
	QVportPromiscMC   = def("query_nic_vport_context_out.nic_vport_context.promisc_mc", F(0x100, 30, 30))
	QVportPromiscAll  = def("query_nic_vport_context_out.nic_vport_context.promisc_all", F(0x100, 29, 29))
	QVportMAC47_32    = def("query_nic_vport_context_out.nic_vport_context.permanent_address.mac_addr_47_32", F(0x104, 15, 0))
	QVportMAC31_0     = def("query_nic_vport_context_out.nic_vport_context.permanent_address.mac_addr_31_0", D32(0x108))
	MVportFieldSelect = def("modify_nic_vport_context_in.field_select.mtu", F(0x0C, 6, 6))
	MVportMTU         = def("modify_nic_vport_context_in.nic_vport_context.mtu", F(0x124, 15, 0))
	MVportPromiscUC   = def("modify_nic_vport_context_in.nic_vport_context.promisc_uc", F(0x1F0, 31, 31))
	MVportPromiscMC   = def("modify_nic_vport_context_in.nic_vport_context.promisc_mc", F(0x1F0, 30, 30))
	MVportPromiscAll  = def("modify_nic_vport_context_in.nic_vport_context.promisc_all", F(0x1F0, 29, 29))
	MVportListType    = def("modify_nic_vport_context_in.nic_vport_context.allowed_list_type", F(0x1F0, 26, 24))
	MVportListSize    = def("modify_nic_vport_context_in.nic_vport_context.allowed_list_size", F(0x1F0, 11, 0))
	MVportUCMAC0      = def("modify_nic_vport_context_in.nic_vport_context.current_uc_mac_address", D64(0x200))
	VportStateAdmin   = def("query_vport_state_out.admin_state", F(0x0C, 7, 4))
	VportStateOper    = def("query_vport_state_out.state", F(0x0C, 3, 0))
	PAOSLocalPort     = def("paos_reg.local_port", F(0x00, 23, 16))
	PAOSAdminStatus   = def("paos_reg.admin_status", F(0x00, 11, 8))
	PAOSOperStatus    = def("paos_reg.oper_status", F(0x00, 3, 0))
	PAOSASE           = def("paos_reg.ase", F(0x04, 31, 31))
	HealthRFR         = def("health_buffer.rfr", F(0x38, 31, 31))
	HealthSynd        = def("health_buffer.synd", F(0x3C, 23, 16))
	HealthExtSynd     = def("health_buffer.ext_synd", F(0x3C, 15, 0))
	HealthFWVersion   = def("health_buffer.fw_version", D32(0x30))
)

// The modify field_select bits the driver uses live in the same dword as
// MVportFieldSelect; these entries prove their positions.
var (
	_ = def("modify_nic_vport_context_in.field_select.addresses_list", F(0x0C, 2, 2))
	_ = def("modify_nic_vport_context_in.field_select.promisc", F(0x0C, 4, 4))
)

// SetEventBit subscribes a CREATE_EQ input to event type t.
func SetEventBit(createEQIn []byte, t uint8) {
	w := D64(EQEventBitmask.Bit/8 + uint32(t/64)*8)
	w.Set(createEQIn, w.Get(createEQIn)|1<<(t%64))
}

// EventBitSet reports whether a CREATE_EQ input subscribes to event type t.
func EventBitSet(createEQIn []byte, t uint8) bool {
	w := D64(EQEventBitmask.Bit/8 + uint32(t/64)*8)
	return w.Get(createEQIn)&(1<<(t%64)) != 0
}

// Outer-header matching (fte_match_set_lyr_2_4 at fte_match_param +0),
// used for the traffic-type classifier in front of the RSS TIRs.
const (
	FGMatchCriteria  = 0x40 // create_flow_group_in.match_criteria
	FTEMatchValue    = 0x80 // set_fte_in.flow_context.match_value
	OuterHeadersSize = 0x40
)

var (
	FGCritEthertype  = def("create_flow_group_in.match_criteria.outer_headers.ethertype", F(0x44, 15, 0))
	FGCritIPProtocol = def("create_flow_group_in.match_criteria.outer_headers.ip_protocol", F(0x50, 31, 24))
	FTEEthertype     = def("set_fte_in.flow_context.match_value.outer_headers.ethertype", F(0x84, 15, 0))
	FTEIPProtocol    = def("set_fte_in.flow_context.match_value.outer_headers.ip_protocol", F(0x90, 31, 24))
)

// Fields the bring-up and port set-up added after comparing them with the
// kernel's mlx5_core/mlx5e, rdma-core's mlx5_vfio.c and Snabb's connectx.lua.
var (
	// EQCOI: overrun ignore. With it the device drops events into a full EQ
	// instead of declaring the EQ (and, for the async EQ, the function) in
	// error; Snabb's connectx.lua sets it on its only EQ.
	EQCOI = def("create_eq_in.eq_context_entry.oi", F(0x10, 17, 17))

	CapDisableLocalLBUC = def("cmd_hca_cap.disable_local_lb_uc", F(0x7C, 30, 30))
	CapDisableLocalLBMC = def("cmd_hca_cap.disable_local_lb_mc", F(0x7C, 29, 29))
	CapSQTSFormat       = def("cmd_hca_cap.sq_ts_format", F(0x88, 31, 30))
	CapRQTSFormat       = def("cmd_hca_cap.rq_ts_format", F(0x88, 29, 28))
	RQCTSFormat         = def("create_rq_in.ctx.ts_format", F(0x20, 5, 4))
	SQCTSFormat         = def("create_sq_in.ctx.ts_format", F(0x20, 5, 4))

	MVportSelDisableUCLB = def("modify_nic_vport_context_in.field_select.disable_uc_local_lb", F(0x0C, 11, 11))
	MVportSelDisableMCLB = def("modify_nic_vport_context_in.field_select.disable_mc_local_lb", F(0x0C, 10, 10))
	MVportDisableMCLB    = def("modify_nic_vport_context_in.nic_vport_context.disable_mc_local_lb", F(0x100, 2, 2))
	MVportDisableUCLB    = def("modify_nic_vport_context_in.nic_vport_context.disable_uc_local_lb", F(0x100, 1, 1))
	QVportDisableMCLB    = def("query_nic_vport_context_out.nic_vport_context.disable_mc_local_lb", F(0x10, 2, 2))
	QVportDisableUCLB    = def("query_nic_vport_context_out.nic_vport_context.disable_uc_local_lb", F(0x10, 1, 1))

	// PMTU register (ACCESS_REG 0x5003), offsets inside register_data.
	PMTULocalPort = def("pmtu_reg.local_port", F(0x00, 23, 16))
	PMTUMaxMTU    = def("pmtu_reg.max_mtu", F(0x04, 31, 16))
	PMTUAdminMTU  = def("pmtu_reg.admin_mtu", F(0x08, 31, 16))
	PMTUOperMTU   = def("pmtu_reg.oper_mtu", F(0x0C, 31, 16))
)

// Output lengths the kernel sends (MLX5_ST_SZ_BYTES of the *_out struct)
// for commands whose output is not the generic 16 bytes:
// mlx5_ifc_enable_hca_out_bits and mlx5_ifc_disable_hca_out_bits are
// status, syndrome and one reserved dword (0x60 bits).
const (
	EnableHCAOutLen  = 12
	DisableHCAOutLen = 12
)

// Timestamp formats: the cap values (MLX5_TIMESTAMP_FORMAT_CAP_*) and the
// rqc/sqc ts_format values (MLX5_TIMESTAMP_FORMAT_*), mlx5_ifc.h.
const (
	TSCapFreeRunning = 0
	TSCapRealTime    = 1
	TSCapBoth        = 2
	TSFreeRunning    = 0
	TSDefault        = 1
	TSRealTime       = 2
)
