package sim

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// Syndromes are firmware-specific and undocumented; the model returns
// opcode << 16 | reason so tests can tell failures apart. Reasons:
const (
	synBadOpcode = 0x01 + iota
	synBadOpMod
	synShortInput
	synShortOutput
	synNotEnabled
	synNotInitialized
	synAlreadyEnabled
	synBadISSI
	synNoBootPages
	synNoInitPages
	synBadPage
	synCapAboveMax
	synBadObject
	synBusy
	synBadSize
	synBadState
	synUnmapped
	synInjected
	synBadField
	synTooManyPages
)

// phase says in which HCA state a command may run.
type phase uint8

const (
	anyPhase phase = iota // even before ENABLE_HCA
	enabled               // after ENABLE_HCA
	inited                // after INIT_HCA
)

type handler struct {
	minIn, minOut int
	phase         phase
	opMods        []uint16 // allowed op_mods; nil = only 0
	run           func(d *Device, in, out []byte) (status uint8, reason uint32)
}

var handlers map[uint16]handler

func init() {
	handlers = map[uint16]handler{
		prm.OpEnableHCA:              {16, prm.EnableHCAOutLen, anyPhase, nil, (*Device).enableHCA},
		prm.OpDisableHCA:             {16, prm.DisableHCAOutLen, enabled, nil, (*Device).disableHCA},
		prm.OpQueryISSI:              {16, prm.QueryISSIOutLen, enabled, nil, (*Device).queryISSI},
		prm.OpSetISSI:                {16, 16, enabled, nil, (*Device).setISSI},
		prm.OpQueryPages:             {16, 16, enabled, []uint16{prm.PagesBoot, prm.PagesInit, prm.PagesRegular}, (*Device).queryPages},
		prm.OpManagePages:            {16, 16, enabled, []uint16{prm.ManagePagesCantGive, prm.ManagePagesGive, prm.ManagePagesTake}, (*Device).managePages},
		prm.OpAccessReg:              {prm.AccessRegDataOff, prm.AccessRegDataOff, enabled, []uint16{prm.AccessRegWrite, prm.AccessRegRead}, (*Device).accessReg},
		prm.OpQueryHCACap:            {16, prm.QueryHCACapOutLen, enabled, capOpMods(), (*Device).queryHCACap},
		prm.OpSetHCACap:              {prm.SetHCACapInLen, 16, enabled, []uint16{prm.CapGeneral << 1}, (*Device).setHCACap},
		prm.OpInitHCA:                {prm.InitHCAInLen, 16, enabled, nil, (*Device).initHCA},
		prm.OpTeardownHCA:            {16, 16, enabled, []uint16{prm.TeardownGraceful, prm.TeardownForceClose, prm.TeardownFast}, (*Device).teardownHCA},
		prm.OpSetDriverVersion:       {16, 16, inited, nil, func(*Device, []byte, []byte) (uint8, uint32) { return 0, 0 }},
		prm.OpNOP:                    {16, 16, enabled, nil, func(*Device, []byte, []byte) (uint8, uint32) { return 0, 0 }},
		prm.OpAllocUAR:               {16, 16, inited, nil, (*Device).allocUAR},
		prm.OpDeallocUAR:             {16, 16, inited, nil, destroyer(kUAR)},
		prm.OpAllocPD:                {16, 16, inited, nil, allocator(kPD)},
		prm.OpDeallocPD:              {16, 16, inited, nil, destroyer(kPD)},
		prm.OpAllocTransportDomain:   {16, 16, inited, nil, allocator(kTD)},
		prm.OpDeallocTransportDomain: {16, 16, inited, nil, destroyer(kTD)},
		prm.OpCreateMkey:             {prm.PASOffset, 16, inited, nil, (*Device).createMkey},
		prm.OpDestroyMkey:            {16, 16, inited, nil, destroyer(kMkey)},
		prm.OpCreateEQ:               {prm.PASOffset + 8, 16, inited, nil, (*Device).createEQ},
		prm.OpDestroyEQ:              {16, 16, inited, nil, (*Device).destroyEQ},
		prm.OpCreateCQ:               {prm.PASOffset + 8, 16, inited, nil, (*Device).createCQ},
		prm.OpDestroyCQ:              {16, 16, inited, nil, destroyer(kCQ)},
		prm.OpCreateRQ:               {prm.PASOffset + 8, 16, inited, nil, (*Device).createRQ},
		prm.OpModifyRQ:               {prm.PASOffset, 16, inited, nil, (*Device).modifyRQ},
		prm.OpDestroyRQ:              {16, 16, inited, nil, destroyer(kRQ)},
		prm.OpCreateSQ:               {prm.PASOffset + 8, 16, inited, nil, (*Device).createSQ},
		prm.OpModifySQ:               {prm.PASOffset, 16, inited, nil, (*Device).modifySQ},
		prm.OpDestroySQ:              {16, 16, inited, nil, destroyer(kSQ)},
		prm.OpCreateTIS:              {prm.CreateTISInLen, 16, inited, nil, (*Device).createTIS},
		prm.OpDestroyTIS:             {16, 16, inited, nil, destroyer(kTIS)},
		prm.OpCreateRQT:              {prm.CreateRQTInBaseLen + 4, 16, inited, nil, (*Device).createRQT},
		prm.OpDestroyRQT:             {16, 16, inited, nil, destroyer(kRQT)},
		prm.OpCreateTIR:              {prm.PASOffset, 16, inited, nil, (*Device).createTIR},
		prm.OpDestroyTIR:             {16, 16, inited, nil, destroyer(kTIR)},
		prm.OpCreateFlowTable:        {prm.CreateFlowTableLen, 16, inited, nil, (*Device).createFlowTable},
		prm.OpDestroyFlowTable:       {prm.FlowCmdInLen, 16, inited, nil, (*Device).destroyFlowTable},
		prm.OpCreateFlowGroup:        {prm.CreateFlowGroupLen, 16, inited, nil, (*Device).createFlowGroup},
		prm.OpDestroyFlowGroup:       {prm.FlowCmdInLen, 16, inited, nil, (*Device).destroyFlowGroup},
		prm.OpSetFlowTableEntry:      {prm.SetFTEInBaseLen, 16, inited, nil, (*Device).setFTE},
		prm.OpDeleteFlowTableEntry:   {prm.FlowCmdInLen, 16, inited, nil, (*Device).deleteFTE},
		prm.OpSetFlowTableRoot:       {prm.FlowCmdInLen, 16, inited, []uint16{0, 1}, (*Device).setRoot},
		prm.OpQueryNICVportContext:   {16, prm.QueryNICVportOutLen, inited, nil, (*Device).queryVport},
		prm.OpModifyNICVportContext:  {prm.ModifyNICVportInLen, 16, inited, nil, (*Device).modifyVport},
		prm.OpQueryVportState:        {16, 16, inited, nil, (*Device).queryVportState},
	}
}

func capOpMods() []uint16 {
	var m []uint16
	for _, t := range []uint16{prm.CapGeneral, prm.CapEthernetOffload, prm.CapFlowTable} {
		m = append(m, t<<1|prm.CapModeMax, t<<1|prm.CapModeCurrent)
	}
	return m
}

// execute runs one command and returns its output message. Called with d.mu held.
func (d *Device) execute(in []byte, outLen int) []byte {
	out := make([]byte, outLen)
	op := uint16(prm.InOpcode.Get(in))
	opMod := uint16(prm.InOpMod.Get(in))
	status, reason := d.dispatch(op, opMod, in, out)
	if status != prm.StatusOK {
		clear(out)
		prm.OutStatus.Set(out, uint64(status))
		prm.OutSynd.Set(out, uint64(op)<<16|uint64(reason))
	}
	d.stats.Commands[op]++
	return out
}

func (d *Device) dispatch(op, opMod uint16, in, out []byte) (uint8, uint32) {
	h, ok := handlers[op]
	if !ok {
		return prm.StatusBadOp, synBadOpcode
	}
	if !opModAllowed(h.opMods, opMod) {
		return prm.StatusBadParam, synBadOpMod
	}
	if len(in) < h.minIn {
		return prm.StatusBadInputLen, synShortInput
	}
	if len(out) < h.minOut {
		return prm.StatusBadOutputLen, synShortOutput
	}
	if (op == prm.OpEnableHCA || op == prm.OpDisableHCA) && len(out) != h.minOut {
		// The model takes exactly the size the kernel sends
		// (MLX5_ST_SZ_BYTES of the 12-byte *_out struct); whether firmware
		// tolerates more is unknown, so a driver must not rely on it.
		return prm.StatusBadOutputLen, synShortOutput
	}
	switch {
	case h.phase >= enabled && !d.enabled:
		return prm.StatusBadSysState, synNotEnabled
	case h.phase == inited && !d.initialized:
		return prm.StatusBadSysState, synNotInitialized
	}
	if f := d.faults; f.FailOpcode == op && f.FailStatus != 0 && (f.FailOpMod < 0 || uint16(f.FailOpMod) == opMod) {
		d.failSeen++
		if d.failSeen >= f.FailCountOrOne() {
			return f.FailStatus, synInjected
		}
	}
	return h.run(d, in, out)
}

// FailCountOrOne is the execution number at which FailOpcode starts failing.
func (f Faults) FailCountOrOne() int { return max(f.FailCount, 1) }

func opModAllowed(allowed []uint16, m uint16) bool {
	if allowed == nil {
		return m == 0
	}
	for _, a := range allowed {
		if a == m {
			return true
		}
	}
	return false
}

// --- function and page life cycle ---

func (d *Device) enableHCA(in, out []byte) (uint8, uint32) {
	if d.enabled {
		return prm.StatusBadSysState, synAlreadyEnabled
	}
	if prm.EnableHCAFunctionID.Get(in) != 0 {
		return prm.StatusBadParam, synBadField
	}
	d.enabled = true
	return 0, 0
}

func (d *Device) disableHCA(in, out []byte) (uint8, uint32) {
	if d.initialized {
		return prm.StatusBadSysState, synBadState
	}
	d.stats.PagesLeaked += len(d.pages)
	cfg := d.cfg
	d.reset()
	d.cfg = cfg
	return 0, 0
}

func (d *Device) queryISSI(in, out []byte) (uint8, uint32) {
	prm.QueryISSICurrent.Set(out, uint64(d.issi))
	prm.QueryISSISupportedDW0.Set(out, uint64(d.cfg.SupportedISSI))
	return 0, 0
}

func (d *Device) setISSI(in, out []byte) (uint8, uint32) {
	v := uint16(prm.SetISSICurrent.Get(in))
	if v > 31 || d.cfg.SupportedISSI&(1<<v) == 0 {
		return prm.StatusBadParam, synBadISSI
	}
	d.issi, d.issiSet = v, true
	return 0, 0
}

func (d *Device) pagesOwed(stage uint16) int {
	switch stage {
	case prm.PagesBoot:
		return max(d.cfg.BootPages-len(d.pages), 0)
	case prm.PagesInit:
		return max(d.cfg.BootPages+d.cfg.InitPages-len(d.pages), 0)
	}
	return max(d.runtimeOwed, 0)
}

func (d *Device) queryPages(in, out []byte) (uint8, uint32) {
	prm.QueryPagesOutFunctionID.Set(out, 0)
	prm.QueryPagesOutNumPages.Set(out, uint64(uint32(d.pagesOwed(uint16(prm.InOpMod.Get(in))))))
	return 0, 0
}

func (d *Device) managePages(in, out []byte) (uint8, uint32) {
	n := int(prm.ManagePagesInNum.Get(in))
	switch prm.InOpMod.Get(in) {
	case prm.ManagePagesCantGive:
		d.runtimeOwed = 0
		d.stats.CantGive++
		return 0, 0
	case prm.ManagePagesGive:
		if len(in) < 16+8*n {
			return prm.StatusBadInputLen, synShortInput
		}
		seen := map[uint64]bool{}
		for i := 0; i < n; i++ {
			pa := binary.BigEndian.Uint64(in[16+8*i:])
			if pa%prm.AdapterPageSize != 0 || d.pages[pa] || seen[pa] {
				return prm.StatusBadParam, synBadPage
			}
			if _, err := d.mem.Slice(pa, prm.AdapterPageSize); err != nil {
				return prm.StatusBadParam, synUnmapped
			}
			seen[pa] = true
		}
		for pa := range seen {
			d.pages[pa] = true
		}
		d.runtimeOwed -= n
		return 0, 0
	default: // TAKE
		// While initialized, the boot and init pages are in use.
		keep := 0
		if d.initialized {
			keep = d.cfg.BootPages + d.cfg.InitPages
		}
		give := min(n, max(len(d.pages)-keep, 0), (len(out)-16)/8)
		i := 0
		for pa := range d.pages {
			if i == give {
				break
			}
			binary.BigEndian.PutUint64(out[16+8*i:], pa)
			delete(d.pages, pa)
			i++
		}
		prm.ManagePagesOutNum.Set(out, uint64(i))
		d.stats.PagesReclaimed += i
		return 0, 0
	}
}

func (d *Device) accessReg(in, out []byte) (uint8, uint32) {
	reg := prm.AccessRegID.Get(in)
	write := prm.InOpMod.Get(in) == prm.AccessRegWrite
	data := in[prm.AccessRegDataOff:]
	odata := out[prm.AccessRegDataOff:]
	switch reg {
	case prm.HostEndiannessReg:
		if d.isVF() {
			// The kernel writes it on PFs only (set_hca_ctrl).
			return prm.StatusBadParam, synBadField
		}
		return 0, 0
	case prm.RegPMTU:
		if len(data) < 16 || len(odata) < 16 || prm.PMTULocalPort.Get(data) != 1 {
			return prm.StatusBadParam, synBadField
		}
		if write {
			mtu := int(prm.PMTUAdminMTU.Get(data))
			if mtu < 68+prm.HWMTUOverhead || mtu > d.cfg.MaxMTU {
				return prm.StatusBadParam, synBadSize
			}
			d.pmtu = mtu
			return 0, 0
		}
		prm.PMTULocalPort.Set(odata, 1)
		prm.PMTUMaxMTU.Set(odata, uint64(d.cfg.MaxMTU))
		prm.PMTUAdminMTU.Set(odata, uint64(d.pmtu))
		prm.PMTUOperMTU.Set(odata, uint64(d.pmtu))
		return 0, 0
	case prm.RegPAOS:
		if len(data) < 16 || len(odata) < 16 {
			return prm.StatusBadSize, synBadSize
		}
		if write {
			if prm.PAOSASE.Get(data) == 1 {
				d.vport.adminUp = prm.PAOSAdminStatus.Get(data) == 1
			}
			return 0, 0
		}
		prm.PAOSLocalPort.Set(odata, 1)
		prm.PAOSAdminStatus.Set(odata, boolTo(d.vport.adminUp, 1, 2))
		prm.PAOSOperStatus.Set(odata, boolTo(d.linkUp(), 1, 2))
		return 0, 0
	}
	return prm.StatusBadParam, synBadField
}

func boolTo(b bool, t, f uint64) uint64 {
	if b {
		return t
	}
	return f
}

func (d *Device) linkUp() bool { return d.initialized && d.cfg.LinkUp && d.vport.adminUp }

func (d *Device) queryHCACap(in, out []byte) (uint8, uint32) {
	if len(d.pages) < d.cfg.BootPages {
		return prm.StatusBadSysState, synNoBootPages
	}
	opMod := uint16(prm.InOpMod.Get(in))
	capType, mode := opMod>>1, opMod&1
	var c []byte
	if capType == prm.CapGeneral && mode == prm.CapModeCurrent {
		c = d.curGeneral
	} else {
		c = d.capability(capType, mode)
	}
	copy(out[prm.CapabilityOffset:], c)
	return 0, 0
}

func (d *Device) setHCACap(in, out []byte) (uint8, uint32) {
	if d.initialized {
		return prm.StatusBadSysState, synBadState
	}
	if len(d.pages) < d.cfg.BootPages {
		return prm.StatusBadSysState, synNoBootPages
	}
	req := in[prm.CapabilityOffset : prm.CapabilityOffset+prm.CapabilitySize]
	maxc := d.capability(prm.CapGeneral, prm.CapModeMax)
	for _, e := range prm.Layout() {
		if !isGeneralCap(e.Path) {
			continue
		}
		if e.Field.Get(req) > e.Field.Get(maxc) {
			return prm.StatusBadParam, synCapAboveMax
		}
	}
	d.curGeneral = append([]byte(nil), req...)
	d.capsSet = true
	return 0, 0
}

func isGeneralCap(path string) bool {
	const p = "cmd_hca_cap."
	return len(path) > len(p) && path[:len(p)] == p
}

func (d *Device) initHCA(in, out []byte) (uint8, uint32) {
	switch {
	case d.initialized:
		return prm.StatusBadSysState, synBadState
	case !d.issiSet && d.cfg.SupportedISSI&2 != 0:
		return prm.StatusBadSysState, synBadISSI
	case len(d.pages) < d.cfg.BootPages:
		return prm.StatusNoResources, synNoBootPages
	case len(d.pages) < d.cfg.BootPages+d.cfg.InitPages:
		return prm.StatusNoResources, synNoInitPages
	case prm.CapCmdIfChecksum.Get(d.curGeneral) != 0:
		// The model does not implement command signatures; a driver must
		// turn them off (both reference drivers do).
		return prm.StatusBadParam, synBadField
	}
	d.initialized = true
	return 0, 0
}

func (d *Device) teardownHCA(in, out []byte) (uint8, uint32) {
	if !d.initialized {
		return prm.StatusBadSysState, synNotInitialized
	}
	// Firmware frees whatever the driver left; the model records it so
	// tests can fail on leaks.
	for _, o := range d.objs.all() {
		d.leakLog = append(d.leakLog, o.String())
	}
	d.objs = newObjects()
	d.eqs = map[uint32]*eqState{}
	d.rootNICRX = nil
	d.initialized = false
	d.issiSet = false
	return 0, 0
}
