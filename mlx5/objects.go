package mlx5

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// Object creation, one function per firmware object (layouts: mlx5_ifc.h). Each
// returns the object number; the matching Destroy* undoes it. Higher-level
// assembly with reverse-order cleanup is in port.go.

func (h *HCA) alloc(op uint16) (uint32, error) {
	out, err := h.simple(op, 0)
	if err != nil {
		return 0, err
	}
	return uint32(prm.OutObjID.Get(out)), nil
}

// AllocUAR allocates a doorbell page; its BAR0 offset is uar × 4096.
func (h *HCA) AllocUAR() (uint32, error) { return h.alloc(prm.OpAllocUAR) }

// DeallocUAR frees a UAR.
func (h *HCA) DeallocUAR(uar uint32) error { return h.destroy(prm.OpDeallocUAR, prm.InObjID, uar) }

// AllocPD allocates a protection domain.
func (h *HCA) AllocPD() (uint32, error) { return h.alloc(prm.OpAllocPD) }

// DeallocPD frees a protection domain.
func (h *HCA) DeallocPD(pd uint32) error { return h.destroy(prm.OpDeallocPD, prm.InObjID, pd) }

// AllocTransportDomain allocates a transport domain.
func (h *HCA) AllocTransportDomain() (uint32, error) { return h.alloc(prm.OpAllocTransportDomain) }

// DeallocTransportDomain frees a transport domain.
func (h *HCA) DeallocTransportDomain(td uint32) error {
	return h.destroy(prm.OpDeallocTransportDomain, prm.InObjID, td)
}

// CreatePAMkey creates a physical-address mkey (mkc.access_mode PA, length64): data
// segment addresses are used as IOVAs directly. It returns the mkey index
// and the lkey for data segments.
func (h *HCA) CreatePAMkey(pd uint32) (index, lkey uint32, err error) {
	in := make([]byte, prm.PASOffset)
	prm.InOpcode.Set(in, prm.OpCreateMkey)
	prm.MkeyLW.Set(in, 1)
	prm.MkeyLR.Set(in, 1)
	prm.MkeyAccessMode1_0.Set(in, prm.MkeyAccessPA)
	prm.MkeyQPN.Set(in, 0xFFFFFF)
	prm.Mkey7_0.Set(in, 0)
	prm.MkeyLength64.Set(in, 1)
	prm.MkeyPD.Set(in, uint64(pd))
	out, err := h.cmd.exec(in, 16)
	if err != nil {
		return 0, 0, err
	}
	index = uint32(prm.OutObjID.Get(out))
	return index, index << 8, nil
}

// DestroyMkey destroys an mkey by index.
func (h *HCA) DestroyMkey(index uint32) error {
	return h.destroy(prm.OpDestroyMkey, prm.InObjID, index)
}

// CreateTIS creates a transport interface send object in td.
func (h *HCA) CreateTIS(td uint32) (uint32, error) {
	in := make([]byte, prm.CreateTISInLen)
	prm.InOpcode.Set(in, prm.OpCreateTIS)
	prm.TISCTD.Set(in, uint64(td))
	out, err := h.cmd.exec(in, 16)
	if err != nil {
		return 0, err
	}
	return uint32(prm.OutObjID.Get(out)), nil
}

// DestroyTIS destroys a TIS.
func (h *HCA) DestroyTIS(tis uint32) error { return h.destroy(prm.OpDestroyTIS, prm.InObjID, tis) }

// ring is one IOVA-contiguous queue buffer plus its doorbell record.
type ring struct {
	buf, dbr      []byte
	iova, dbrIOVA uint64
}

// maxRingPage is the largest page a queue buffer is described with: the
// DMA seam aligns at most to its 2 MiB hugepages.
const maxRingPage = 2 << 20

// pageLog is the log_page_size (in 4 KiB units) the ring is described
// with: the largest power of two up to 2 MiB that divides both its size
// and its IOVA, so every pas entry is aligned to the page it names.
func (r ring) pageLog() int {
	page := min(len(r.buf), maxRingPage)
	for page > prm.AdapterPageSize && (r.iova%uint64(page) != 0 || len(r.buf)%page != 0) {
		page >>= 1
	}
	return log2(page) - prm.AdapterPageShift
}

// pas writes the ring's page list at prm.PASOffset of in, which must have
// room for pasLen bytes from there.
func (r ring) pas(in []byte) {
	page := prm.AdapterPageSize << r.pageLog()
	for i := 0; i*page < len(r.buf); i++ {
		binary.BigEndian.PutUint64(in[prm.PASOffset+8*i:], r.iova+uint64(i*page))
	}
}

func (r ring) pasLen() int { return 8 * (len(r.buf) / (prm.AdapterPageSize << r.pageLog())) }

func (h *HCA) allocRing(size int) (ring, error) {
	var r ring
	var err error
	size = max(size, prm.AdapterPageSize)
	// Aligned to its own size up to 2 MiB: one pas entry describes a ring
	// up to 2 MiB, larger ones take one entry per 2 MiB page (pageLog).
	if r.buf, r.iova, err = h.bus.DMA.Alloc(size, min(size, maxRingPage)); err != nil {
		return r, fmt.Errorf("mlx5: queue memory: %w", err)
	}
	r.buf = r.buf[:size]
	if r.dbr, r.dbrIOVA, err = h.bus.DMA.Alloc(64, 64); err != nil {
		h.bus.DMA.Free(r.iova)
		return r, fmt.Errorf("mlx5: doorbell record: %w", err)
	}
	r.dbr = r.dbr[:8]
	return r, nil
}

func (h *HCA) freeRing(r ring) {
	h.bus.DMA.Free(r.iova)
	h.bus.DMA.Free(r.dbrIOVA)
}

// CQConfig selects a CQ's size and compression.
type CQConfig struct {
	LogSize     uint8
	Compression CQECompression
}

// CreateCQ creates a CQ of 64-byte CQEs on the async EQ and the HCA's UAR.
func (h *HCA) CreateCQ(cfg CQConfig) (*CompletionQueue, error) {
	if cfg.LogSize > h.Caps.LogMaxCQSz {
		return nil, fmt.Errorf("mlx5: CQ of 2^%d entries exceeds log_max_cq_sz %d", cfg.LogSize, h.Caps.LogMaxCQSz)
	}
	if c := cfg.Compression; c.Enabled {
		switch {
		case !h.Caps.CQECompression:
			return nil, fmt.Errorf("mlx5: CQE compression requested, device has no cqe_compression cap")
		case c.Layout == prm.CQECompLayoutEnhanced && !h.Caps.EnhancedCQECompression:
			return nil, fmt.Errorf("mlx5: enhanced CQE compression requested, device lacks enhanced_cqe_compression")
		case c.MiniFormat == prm.MiniCQEFtagStridx || c.MiniFormat > prm.MiniCQECsumStridx:
			return nil, fmt.Errorf("mlx5: mini-CQE format %d not supported by the data path (HASH 0, CSUM 1 and CSUM_STRIDX 3 are)", c.MiniFormat)
		case c.MiniFormat == prm.MiniCQECsumStridx && !h.Caps.MiniCQEStrideIndex:
			return nil, fmt.Errorf("mlx5: stride-index mini CQEs requested, device lacks mini_cqe_resp_stride_index")
		}
	}
	size := (1 << cfg.LogSize) * 64
	r, err := h.allocRing(size)
	if err != nil {
		return nil, err
	}
	for i := 0; i < 1<<cfg.LogSize; i++ {
		cqe := r.buf[i*64 : i*64+64]
		cqe[63] = prm.CQEOpOwnInit
		cqe[62] = prm.CQEValidityInit
	}
	in := make([]byte, prm.PASOffset+r.pasLen())
	prm.InOpcode.Set(in, prm.OpCreateCQ)
	prm.CQCCQESz.Set(in, 0)
	if cfg.Compression.Enabled {
		prm.CQCCompEn.Set(in, 1)
		prm.CQCMiniCQEFormat.Set(in, uint64(cfg.Compression.MiniFormat))
		prm.CQCCompLayout.Set(in, uint64(cfg.Compression.Layout))
	}
	prm.CQCLogSize.Set(in, uint64(cfg.LogSize))
	prm.CQCUARPage.Set(in, uint64(h.uar))
	prm.CQCEQN.Set(in, uint64(h.eq.eqn))
	prm.CQCLogPageSize.Set(in, uint64(r.pageLog()))
	prm.CQCDBRAddr.Set(in, r.dbrIOVA)
	r.pas(in)
	out, err := h.cmd.exec(in, 16)
	if err != nil {
		h.freeRing(r)
		return nil, err
	}
	return &CompletionQueue{
		CQN: uint32(prm.OutObjID.Get(out)), Ring: r.buf[:size], IOVA: r.iova, LogSize: cfg.LogSize, CQESize: 64,
		DBRec: r.dbr, DBRecIOVA: r.dbrIOVA, ArmDoorbell: h.uar*prm.UARPageSize + prm.UARCQDoorbell,
		Compression: cfg.Compression,
	}, nil
}

// DestroyCQ destroys a CQ and frees its memory.
func (h *HCA) DestroyCQ(cq *CompletionQueue) error {
	if err := h.destroy(prm.OpDestroyCQ, prm.InObjID, cq.CQN); err != nil {
		return err
	}
	h.freeRing(ring{iova: cq.IOVA, dbrIOVA: cq.DBRecIOVA})
	return nil
}

// RQConfig selects a striding RQ's geometry (mlx5_ifc.h wq: log_wqe_num_of_strides,
// log_wqe_stride_size).
type RQConfig struct {
	LogWQEs       uint8
	LogStrides    uint8 // log2(strides per WQE)
	LogStrideSize uint8 // log2(stride bytes)
	TwoByteShift  bool
	// LinkedList selects wq_type 2 (kernel) instead of 3 (cyclic, DPDK).
	LinkedList bool
	// StripVLAN lets the device strip the outer tag into the CQE (vsd =
	// 0). The data path puts it back, so packets look the same either way;
	// the default keeps tags in the frame.
	StripVLAN bool
}

func (h *HCA) checkRQConfig(c RQConfig) error {
	caps := h.Caps
	switch {
	case !caps.StridingRQ:
		return fmt.Errorf("mlx5: device has no striding RQ (cap striding_rq = 0)")
	case c.LogStrides < caps.MinLogStrides || c.LogStrides > caps.MaxLogStrides:
		return fmt.Errorf("mlx5: 2^%d strides per WQE outside the device range 2^%d..2^%d", c.LogStrides, caps.MinLogStrides, caps.MaxLogStrides)
	case c.LogStrideSize < caps.MinLogStrideSize || c.LogStrideSize > caps.MaxLogStrideSz:
		return fmt.Errorf("mlx5: stride of 2^%d bytes outside the device range 2^%d..2^%d", c.LogStrideSize, caps.MinLogStrideSize, caps.MaxLogStrideSz)
	case c.LogWQEs > caps.LogMaxWQSz:
		return fmt.Errorf("mlx5: 2^%d WQEs exceeds log_max_wq_sz %d", c.LogWQEs, caps.LogMaxWQSz)
	}
	return nil
}

// CreateRQ creates a striding RQ on cq and moves it RST → RDY.
func (h *HCA) CreateRQ(cfg RQConfig, cq *CompletionQueue, pd, lkey uint32) (*ReceiveQueue, error) {
	if err := h.checkRQConfig(cfg); err != nil {
		return nil, err
	}
	size := (1 << cfg.LogWQEs) * prm.StridingRQWQEStride
	r, err := h.allocRing(size)
	if err != nil {
		return nil, err
	}
	wqType := uint8(prm.WQTypeCyclicStridingRQ)
	if cfg.LinkedList {
		wqType = prm.WQTypeLinkedListStridingRQ
	}
	in := make([]byte, prm.PASOffset+r.pasLen())
	prm.InOpcode.Set(in, prm.OpCreateRQ)
	if !cfg.StripVLAN {
		prm.RQCVSD.Set(in, 1) // keep VLAN tags in the packet
	}
	prm.RQCTSFormat.Set(in, uint64(tsFormat(h.Caps.RQTSFormat)))
	prm.RQCState.Set(in, prm.QueueStateRST)
	prm.RQCFlushInError.Set(in, 1)
	prm.RQCCQN.Set(in, uint64(cq.CQN))
	prm.RQWQType.Set(in, uint64(wqType))
	// Full cache-line writes at the packet's end, as the kernel asks unless
	// it runs LRO with relaxed ordering (en/params.c rq_end_pad_mode). The
	// pad ends where the shinfo line begins, so the layout is unchanged.
	prm.RQWQEndPadding.Set(in, prm.WQEndPadAlign)
	prm.RQWQPD.Set(in, uint64(pd))
	prm.RQWQDBRAddr.Set(in, r.dbrIOVA)
	prm.RQWQLogStride.Set(in, 5) // 32-byte WQEs: next + one data segment
	prm.RQWQLogPgSz.Set(in, uint64(r.pageLog()))
	prm.RQWQLogSz.Set(in, uint64(cfg.LogWQEs))
	prm.RQWQLogNumStrides.Set(in, uint64(int(cfg.LogStrides)-prm.MPWQELogStridesBase)&0xF)
	if cfg.TwoByteShift {
		prm.RQWQTwoByteShift.Set(in, 1)
	}
	prm.RQWQLogStrideSize.Set(in, uint64(cfg.LogStrideSize-prm.MPWQELogStrideSzBase))
	r.pas(in)
	out, err := h.cmd.exec(in, 16)
	if err != nil {
		h.freeRing(r)
		return nil, err
	}
	rq := &ReceiveQueue{
		RQN: uint32(prm.OutObjID.Get(out)), CQN: cq.CQN, Ring: r.buf[:size], IOVA: r.iova, LogWQEs: cfg.LogWQEs,
		WQType: wqType, WQEStride: prm.StridingRQWQEStride, LogStrides: cfg.LogStrides, LogStrideSize: cfg.LogStrideSize,
		TwoByteShift: cfg.TwoByteShift, DBRec: r.dbr[:4], DBRecIOVA: r.dbrIOVA, LKey: lkey,
	}
	if err := h.ModifyRQState(rq.RQN, prm.QueueStateRST, prm.QueueStateRDY); err != nil {
		h.DestroyRQ(rq)
		return nil, err
	}
	return rq, nil
}

// ModifyRQState moves an RQ from state cur to next.
func (h *HCA) ModifyRQState(rqn uint32, cur, next uint8) error {
	in := make([]byte, prm.PASOffset)
	prm.InOpcode.Set(in, prm.OpModifyRQ)
	prm.ModifyRQCurState.Set(in, uint64(cur))
	prm.ModifyRQN.Set(in, uint64(rqn))
	prm.ModifyRQNextState.Set(in, uint64(next))
	_, err := h.cmd.exec(in, 16)
	return err
}

// DestroyRQ destroys an RQ and frees its ring.
func (h *HCA) DestroyRQ(rq *ReceiveQueue) error {
	if err := h.destroy(prm.OpDestroyRQ, prm.InObjID, rq.RQN); err != nil {
		return err
	}
	h.freeRing(ring{iova: rq.IOVA, dbrIOVA: rq.DBRecIOVA})
	return nil
}

// SQConfig selects an SQ's size.
type SQConfig struct {
	LogWQEBBs uint8
}

// CreateSQ creates a cyclic SQ on cq with tis, using its own UAR for
// doorbells, and moves it RST → RDY.
func (h *HCA) CreateSQ(cfg SQConfig, cq *CompletionQueue, pd, tis, uar, lkey uint32) (*SendQueue, error) {
	if cfg.LogWQEBBs > h.Caps.LogMaxWQSz {
		return nil, fmt.Errorf("mlx5: 2^%d WQEBBs exceeds log_max_wq_sz %d", cfg.LogWQEBBs, h.Caps.LogMaxWQSz)
	}
	size := (1 << cfg.LogWQEBBs) * prm.SendWQEBB
	r, err := h.allocRing(size)
	if err != nil {
		return nil, err
	}
	in := make([]byte, prm.PASOffset+r.pasLen())
	prm.InOpcode.Set(in, prm.OpCreateSQ)
	prm.SQCFlushInError.Set(in, 1)
	// DPDK (mlx5_devx.c, from the MPW support rdma-core derives from cap
	// multi_pkt_send_wqe) sets allow_multi_pkt_send_wqe only when the device
	// allows multi-packet WQEs at all; the kernel never sets it.
	allowMPW := h.Caps.MultiPktSendWQE != 0
	if allowMPW {
		prm.SQCAllowMultiPkt.Set(in, 1)
	}
	prm.SQCTSFormat.Set(in, uint64(tsFormat(h.Caps.SQTSFormat)))
	if h.Caps.WQEInlineMode == prm.CapInlineVport {
		prm.SQCMinInline.Set(in, uint64(h.Caps.MinInline))
	}
	prm.SQCState.Set(in, prm.QueueStateRST)
	prm.SQCCQN.Set(in, uint64(cq.CQN))
	prm.SQCTISListSize.Set(in, 1)
	prm.SQCTISNum0.Set(in, uint64(tis))
	prm.SQWQType.Set(in, prm.WQTypeCyclic)
	prm.SQWQPD.Set(in, uint64(pd))
	prm.SQWQUARPage.Set(in, uint64(uar))
	prm.SQWQDBRAddr.Set(in, r.dbrIOVA)
	prm.SQWQLogStride.Set(in, 6)
	prm.SQWQLogPgSz.Set(in, uint64(r.pageLog()))
	prm.SQWQLogSz.Set(in, uint64(cfg.LogWQEBBs))
	r.pas(in)
	out, err := h.cmd.exec(in, 16)
	if err != nil {
		h.freeRing(r)
		return nil, err
	}
	sq := &SendQueue{
		SQN: uint32(prm.OutObjID.Get(out)), CQN: cq.CQN, TISN: tis, Ring: r.buf[:size], IOVA: r.iova,
		LogWQEBBs: cfg.LogWQEBBs, DBRec: r.dbr, DBRecIOVA: r.dbrIOVA,
		Doorbell: uar*prm.UARPageSize + prm.UARBlueFlameOffset, LKey: lkey,
		MinInline: h.Caps.MinInline, EnhancedMPW: h.Caps.EnhancedMPW && allowMPW,
		MaxWQEBBs: min(16, max(h.Caps.MaxWQESzSQ/prm.SendWQEBB, 1)),
	}
	if err := h.ModifySQState(sq.SQN, prm.QueueStateRST, prm.QueueStateRDY); err != nil {
		h.DestroySQ(sq)
		return nil, err
	}
	return sq, nil
}

// ModifySQState moves an SQ from state cur to next.
func (h *HCA) ModifySQState(sqn uint32, cur, next uint8) error {
	in := make([]byte, prm.PASOffset)
	prm.InOpcode.Set(in, prm.OpModifySQ)
	prm.ModifySQCurState.Set(in, uint64(cur))
	prm.ModifySQN.Set(in, uint64(sqn))
	prm.ModifySQNextState.Set(in, uint64(next))
	_, err := h.cmd.exec(in, 16)
	return err
}

// DestroySQ destroys an SQ and frees its ring.
func (h *HCA) DestroySQ(sq *SendQueue) error {
	if err := h.destroy(prm.OpDestroySQ, prm.InObjID, sq.SQN); err != nil {
		return err
	}
	h.freeRing(ring{iova: sq.IOVA, dbrIOVA: sq.DBRecIOVA})
	return nil
}

// CreateRQT creates an RQ table spreading rqns round-robin over size
// buckets (size a power of two).
func (h *HCA) CreateRQT(rqns []uint32, size int) (uint32, error) {
	if size <= 0 || size&(size-1) != 0 || size > 1<<h.Caps.LogMaxRQTSize || len(rqns) == 0 {
		return 0, fmt.Errorf("mlx5: RQT of %d buckets for %d RQs (max 2^%d)", size, len(rqns), h.Caps.LogMaxRQTSize)
	}
	in := make([]byte, prm.CreateRQTInBaseLen+4*size)
	prm.InOpcode.Set(in, prm.OpCreateRQT)
	prm.RQTCMaxSize.Set(in, uint64(size))
	prm.RQTCActualSize.Set(in, uint64(size))
	for i := 0; i < size; i++ {
		prm.F(uint32(prm.CreateRQTInBaseLen+4*i), 23, 0).Set(in, uint64(rqns[i%len(rqns)]))
	}
	out, err := h.cmd.exec(in, 16)
	if err != nil {
		return 0, err
	}
	return uint32(prm.OutObjID.Get(out)), nil
}

// DestroyRQT destroys an RQ table.
func (h *HCA) DestroyRQT(rqt uint32) error { return h.destroy(prm.OpDestroyRQT, prm.InObjID, rqt) }

// RSS selects the receive-side scaling hash of an indirect TIR.
type RSS struct {
	Key       [prm.ToeplitzKeySize]byte
	IPv6      bool   // l3_prot_type
	UDP       bool   // l4_prot_type (false: TCP)
	Fields    uint32 // prm.HashSrcIP | HashDstIP | HashL4SPort | HashL4DPort …
	Symmetric bool
}

// CreateTIRDirect creates a TIR delivering to one RQ.
func (h *HCA) CreateTIRDirect(td, rqn uint32) (uint32, error) {
	in := make([]byte, prm.PASOffset)
	prm.InOpcode.Set(in, prm.OpCreateTIR)
	prm.TIRCDispType.Set(in, prm.TIRDispDirect)
	prm.TIRCInlineRQN.Set(in, uint64(rqn))
	prm.TIRCTD.Set(in, uint64(td))
	return h.createTIR(in)
}

// CreateTIRRSS creates an indirect TIR hashing with Toeplitz over an RQT.
func (h *HCA) CreateTIRRSS(td, rqt uint32, rss RSS) (uint32, error) {
	in := make([]byte, prm.PASOffset)
	prm.InOpcode.Set(in, prm.OpCreateTIR)
	prm.TIRCDispType.Set(in, prm.TIRDispIndirect)
	prm.TIRCIndirect.Set(in, uint64(rqt))
	prm.TIRCHashFn.Set(in, prm.RxHashToeplitz)
	prm.TIRCTD.Set(in, uint64(td))
	copy(prm.TIRCToeplitz.Slice(in), rss.Key[:])
	prm.TIRCHashL3.Set(in, boolBit(rss.IPv6))
	prm.TIRCHashL4.Set(in, boolBit(rss.UDP))
	prm.TIRCHashFields.Set(in, uint64(rss.Fields))
	return h.createTIR(in)
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (h *HCA) createTIR(in []byte) (uint32, error) {
	out, err := h.cmd.exec(in, 16)
	if err != nil {
		return 0, err
	}
	return uint32(prm.OutObjID.Get(out)), nil
}

// DestroyTIR destroys a TIR.
func (h *HCA) DestroyTIR(tir uint32) error { return h.destroy(prm.OpDestroyTIR, prm.InObjID, tir) }

// CreateFlowTable creates a NIC RX flow table.
func (h *HCA) CreateFlowTable(level, logSize uint8) (uint32, error) {
	if !h.Caps.NICFlowTable {
		return 0, fmt.Errorf("mlx5: device has no NIC RX flow tables")
	}
	in := make([]byte, prm.CreateFlowTableLen)
	prm.InOpcode.Set(in, prm.OpCreateFlowTable)
	prm.FTTableType.Set(in, prm.FlowTableNICRX)
	prm.FTLevel.Set(in, uint64(level))
	prm.FTLogSize.Set(in, uint64(logSize))
	out, err := h.cmd.exec(in, 16)
	if err != nil {
		return 0, err
	}
	return uint32(prm.OutObjID.Get(out)), nil
}

// DestroyFlowTable destroys a NIC RX flow table.
func (h *HCA) DestroyFlowTable(table uint32) error {
	in := make([]byte, prm.FlowCmdInLen)
	prm.InOpcode.Set(in, prm.OpDestroyFlowTable)
	prm.FTDestroyType.Set(in, prm.FlowTableNICRX)
	prm.FTDestroyID.Set(in, uint64(table))
	_, err := h.cmd.exec(in, 16)
	return err
}

// Match selects which outer-header fields a flow group compares.
type Match struct {
	Ethertype  bool
	IPProtocol bool
}

// CreateFlowGroup creates a flow group over entries [start, end] comparing
// the fields m selects (none: a catch-all group).
func (h *HCA) CreateFlowGroup(table, start, end uint32, m Match) (uint32, error) {
	in := make([]byte, prm.CreateFlowGroupLen)
	prm.InOpcode.Set(in, prm.OpCreateFlowGroup)
	prm.FGTableType.Set(in, prm.FlowTableNICRX)
	prm.FGTableID.Set(in, uint64(table))
	prm.FGStartIndex.Set(in, uint64(start))
	prm.FGEndIndex.Set(in, uint64(end))
	if m.Ethertype || m.IPProtocol {
		prm.FGCriteriaEn.Set(in, prm.MatchOuterHeaders)
	}
	if m.Ethertype {
		prm.FGCritEthertype.Set(in, 0xFFFF)
	}
	if m.IPProtocol {
		prm.FGCritIPProtocol.Set(in, 0xFF)
	}
	out, err := h.cmd.exec(in, 16)
	if err != nil {
		return 0, err
	}
	return uint32(prm.OutObjID.Get(out)), nil
}

// DestroyFlowGroup destroys a flow group.
func (h *HCA) DestroyFlowGroup(table, group uint32) error {
	in := make([]byte, prm.FlowCmdInLen)
	prm.InOpcode.Set(in, prm.OpDestroyFlowGroup)
	prm.FGDestroyType.Set(in, prm.FlowTableNICRX)
	prm.FGDestroyTable.Set(in, uint64(table))
	prm.FGDestroyID.Set(in, uint64(group))
	_, err := h.cmd.exec(in, 16)
	return err
}

// SetFTEForwardToTIR adds entry index of group forwarding packets with the
// given ethertype and IP protocol (compared only where the group's criteria
// say so) to a TIR.
func (h *HCA) SetFTEForwardToTIR(table, group, index uint32, ethertype uint16, ipProtocol uint8, tir uint32) error {
	in := make([]byte, prm.SetFTEInBaseLen+8)
	prm.InOpcode.Set(in, prm.OpSetFlowTableEntry)
	prm.FTETableType.Set(in, prm.FlowTableNICRX)
	prm.FTETableID.Set(in, uint64(table))
	prm.FTEFlowIndex.Set(in, uint64(index))
	prm.FTEGroupID.Set(in, uint64(group))
	prm.FTEAction.Set(in, prm.FlowActionFwdDest)
	prm.FTEDestListSize.Set(in, 1)
	prm.FTEEthertype.Set(in, uint64(ethertype))
	prm.FTEIPProtocol.Set(in, uint64(ipProtocol))
	prm.FTEDestType0.Set(in, prm.FlowDestTIR)
	prm.FTEDestID0.Set(in, uint64(tir))
	_, err := h.cmd.exec(in, 16)
	return err
}

// DeleteFTE deletes a flow table entry.
func (h *HCA) DeleteFTE(table, index uint32) error {
	in := make([]byte, prm.FlowCmdInLen)
	prm.InOpcode.Set(in, prm.OpDeleteFlowTableEntry)
	prm.FTEDelTableType.Set(in, prm.FlowTableNICRX)
	prm.FTEDelTableID.Set(in, uint64(table))
	prm.FTEDelIndex.Set(in, uint64(index))
	_, err := h.cmd.exec(in, 16)
	return err
}

// SetRoot makes table the NIC RX root (connect) or, with disconnect,
// detaches the root so the table can be destroyed.
func (h *HCA) SetRoot(table uint32, disconnect bool) error {
	in := make([]byte, prm.FlowCmdInLen)
	prm.InOpcode.Set(in, prm.OpSetFlowTableRoot)
	prm.RootTableType.Set(in, prm.FlowTableNICRX)
	if disconnect {
		prm.InOpMod.Set(in, 1)
	} else {
		prm.RootTableID.Set(in, uint64(table))
	}
	_, err := h.cmd.exec(in, 16)
	return err
}

// Vport is the NIC vport context (mlx5_ifc.h nic_vport_context).
type Vport struct {
	MAC        net.HardwareAddr
	HWMTU      int // L3 MTU + 22
	MinInline  uint8
	PromiscUC  bool
	PromiscMC  bool
	PromiscAll bool
}

// QueryVport reads the own vport context.
func (h *HCA) QueryVport() (Vport, error) {
	in := make([]byte, 16)
	prm.InOpcode.Set(in, prm.OpQueryNICVportContext)
	out, err := h.cmd.exec(in, prm.QueryNICVportOutLen)
	if err != nil {
		return Vport{}, err
	}
	mac := make(net.HardwareAddr, 6)
	hi, lo := prm.QVportMAC47_32.Get(out), prm.QVportMAC31_0.Get(out)
	for i := 0; i < 2; i++ {
		mac[i] = byte(hi >> (8 * (1 - i)))
	}
	for i := 0; i < 4; i++ {
		mac[2+i] = byte(lo >> (8 * (3 - i)))
	}
	return Vport{
		MAC: mac, HWMTU: int(prm.QVportMTU.Get(out)), MinInline: uint8(prm.QVportMinInline.Get(out)),
		PromiscUC: prm.QVportPromiscUC.Get(out) == 1, PromiscMC: prm.QVportPromiscMC.Get(out) == 1,
		PromiscAll: prm.QVportPromiscAll.Get(out) == 1,
	}, nil
}

// SetVport sets the HW MTU, the unicast MAC list and the promiscuous bits.
func (h *HCA) SetVport(l3MTU int, uc []net.HardwareAddr, promiscUC, promiscMC, promiscAll bool) error {
	in := make([]byte, prm.ModifyNICVportInLen+8*len(uc))
	prm.InOpcode.Set(in, prm.OpModifyNICVportContext)
	prm.D32(0x0C).Set(in, prm.VportFieldMTU|prm.VportFieldPromisc|prm.VportFieldAddresses)
	prm.MVportMTU.Set(in, uint64(l3MTU+prm.HWMTUOverhead))
	prm.MVportPromiscUC.Set(in, boolBit(promiscUC))
	prm.MVportPromiscMC.Set(in, boolBit(promiscMC))
	prm.MVportPromiscAll.Set(in, boolBit(promiscAll))
	prm.MVportListType.Set(in, 0)
	prm.MVportListSize.Set(in, uint64(len(uc)))
	for i, mac := range uc {
		if len(mac) != 6 {
			return fmt.Errorf("mlx5: MAC %v is not 6 bytes", mac)
		}
		copy(in[prm.ModifyNICVportInLen+8*i+2:], mac)
	}
	_, err := h.cmd.exec(in, 16)
	return err
}

// SetPortMTU sets the port's admin MTU (PMTU register, HW bytes: L3 MTU +
// 22), after checking it against the port's max_mtu (kernel port.c
// mlx5_set_port_mtu / mlx5_query_port_max_mtu).
func (h *HCA) SetPortMTU(hwMTU int) error {
	in := make([]byte, prm.AccessRegDataOff+16)
	prm.InOpcode.Set(in, prm.OpAccessReg)
	prm.InOpMod.Set(in, prm.AccessRegRead)
	prm.AccessRegID.Set(in, prm.RegPMTU)
	prm.PMTULocalPort.Set(in[prm.AccessRegDataOff:], 1)
	out, err := h.cmd.exec(in, prm.AccessRegDataOff+16)
	if err != nil {
		return err
	}
	if max := int(prm.PMTUMaxMTU.Get(out[prm.AccessRegDataOff:])); hwMTU > max {
		return fmt.Errorf("mlx5: MTU %d is above the port's maximum %d (max_mtu %d includes %d bytes of L2)",
			hwMTU-prm.HWMTUOverhead, max-prm.HWMTUOverhead, max, prm.HWMTUOverhead)
	}
	prm.InOpMod.Set(in, prm.AccessRegWrite)
	prm.PMTUAdminMTU.Set(in[prm.AccessRegDataOff:], uint64(hwMTU))
	_, err = h.cmd.exec(in, prm.AccessRegDataOff+16)
	return err
}

// DisableLocalLoopback sets disable_uc_local_lb and disable_mc_local_lb
// where the device offers them (kernel vport.c
// mlx5_nic_vport_update_local_lb: a device without either cap has nothing
// to turn off).
func (h *HCA) DisableLocalLoopback() error {
	if !h.Caps.DisableLocalLBUC && !h.Caps.DisableLocalLBMC {
		return nil
	}
	in := make([]byte, prm.ModifyNICVportInLen)
	prm.InOpcode.Set(in, prm.OpModifyNICVportContext)
	if h.Caps.DisableLocalLBUC {
		prm.MVportSelDisableUCLB.Set(in, 1)
		prm.MVportDisableUCLB.Set(in, 1)
	}
	if h.Caps.DisableLocalLBMC {
		prm.MVportSelDisableMCLB.Set(in, 1)
		prm.MVportDisableMCLB.Set(in, 1)
	}
	_, err := h.cmd.exec(in, 16)
	return err
}

// SetPortAdminUp sets the port's administrative state (PAOS register,
// kernel port.c mlx5_set_port_admin_status); the kernel does this when the interface is opened.
func (h *HCA) SetPortAdminUp(up bool) error {
	in := make([]byte, prm.AccessRegDataOff+16)
	prm.InOpcode.Set(in, prm.OpAccessReg)
	prm.InOpMod.Set(in, prm.AccessRegWrite)
	prm.AccessRegID.Set(in, prm.RegPAOS)
	reg := in[prm.AccessRegDataOff:]
	prm.PAOSLocalPort.Set(reg, 1)
	status := uint64(2)
	if up {
		status = 1
	}
	prm.PAOSAdminStatus.Set(reg, status)
	prm.PAOSASE.Set(reg, 1)
	_, err := h.cmd.exec(in, prm.AccessRegDataOff+16)
	return err
}

// LinkState is the vport's logical link (QUERY_VPORT_STATE).
type LinkState struct{ AdminUp, Up bool }

// QueryLink reads the own vport state.
func (h *HCA) QueryLink() (LinkState, error) {
	out, err := h.simple(prm.OpQueryVportState, 0)
	if err != nil {
		return LinkState{}, err
	}
	return LinkState{AdminUp: prm.VportStateAdmin.Get(out) == 1, Up: prm.VportStateOper.Get(out) == 1}, nil
}

// tsFormat picks a queue's ts_format from its cap as the kernel does
// (include/linux/mlx5/driver.h mlx5_get_rq_default_ts /
// mlx5_get_sq_default_ts): real time only where the device offers nothing
// else (the kernel also takes it when both are offered and the clock can be
// steered, which ovfwd never does), free running otherwise.
func tsFormat(capv uint8) uint8 {
	if capv == prm.TSCapRealTime {
		return prm.TSRealTime
	}
	return prm.TSFreeRunning
}
