// Package sim is a model of an mlx5 (ConnectX) PCI function for tests: the
// initialization segment, the command queue with firmware-like validation
// and PRM status codes, firmware page accounting, object tables with
// reference checks, an event queue producer, capability knobs and a fault
// mode for every error path of bring-up. It stands behind the same seams as
// the VFIO layer: Device implements the MMIO (BAR0) and PCI config seams,
// Memory the DMA seam, and the device reads and writes host memory only
// through IOVAs the driver mapped.
//
// Threading: the model is synchronous. A doorbell write runs the device work
// to completion before it returns, on the caller's goroutine. Every method is
// safe for concurrent use (one mutex), so a data-path model (mlx5/model/dpsim) may
// drive the same Device from its own goroutine.
package sim

import (
	"encoding/binary"
	"sync"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// Config is the device's identity and capability knobs. DefaultConfig gives
// a ConnectX-6 Dx-like function (docs/mlx5.md section 2).
type Config struct {
	FWMajor, FWMinor, FWSub uint16
	LogCmdqSize             uint8 // log2 command slots (5 = 32)
	LogCmdqStride           uint8 // log2 entry stride (6 = 64 B)

	// InitializingReads is how many reads of the initializing register
	// return "busy" after reset and again after the command queue address
	// is written.
	InitializingReads int

	BootPages, InitPages int
	// SupportedISSI is query_issi_out.supported_issi_dw0.
	SupportedISSI uint32

	// Capability knobs.
	StridingRQ             bool
	ExtStrideNumRange      bool
	CacheLine128           bool
	CQECompression         bool
	EnhancedCQECompression bool
	MiniCQEStrideIndex     bool
	CQECompressionMaxNum   int
	WQEInlineMode          uint8 // 0 L2 required, 1 per vport, 2 none
	VportMinInline         uint8 // nic_vport_context.min_wqe_inline_mode
	EnhancedMPW            bool
	MultiPktSendWQE        uint8
	EswitchManager         bool
	MaxWQESzSQ             int
	LogMaxCQSz, LogMaxWQSz uint8
	LogMaxRQTSize          uint8
	MaxCmdIfChecksum       uint8 // max cmdif_checksum; the driver must set 0
	// CheckEntrySignature makes the transport verify every entry's
	// signature (XOR of the 64 bytes = 0xFF), as the kernel's signing allows.
	CheckEntrySignature bool

	MAC    [6]byte
	MaxMTU int // port max MTU (PMTU max_mtu), HW bytes
	// PortMTU is the PMTU admin/oper MTU the function starts with: what the
	// previous owner left (the kernel's default 1500 + 22). Frames longer
	// than min(PortMTU, vport MTU) are dropped on both sides of the wire.
	PortMTU int
	// DeviceID is the PCI device ID (config offset 2); a VF ID makes the
	// function a virtual function.
	DeviceID uint16
	// DisableLocalLB is the disable_local_lb_uc/mc caps. The vport starts
	// with local loopback on: the port's own multicast and broadcast come
	// back to it until the driver sets disable_mc_local_lb.
	DisableLocalLB bool
	// RQTSFormat / SQTSFormat are the rq_ts_format / sq_ts_format caps
	// (prm.TSCap*): which ts_format CREATE_RQ/CREATE_SQ accept.
	RQTSFormat, SQTSFormat uint8
	// LinkUp is the physical link; the vport is up after INIT_HCA when set.
	LinkUp  bool
	NumUARs int
}

// DefaultConfig is a ConnectX-6 Dx-like function.
func DefaultConfig() Config {
	return Config{
		FWMajor: 22, FWMinor: 39, FWSub: 1002,
		LogCmdqSize: 5, LogCmdqStride: 6,
		InitializingReads: 3,
		BootPages:         16, InitPages: 128,
		SupportedISSI: 0x3,
		StridingRQ:    true, ExtStrideNumRange: true,
		CQECompression: true, EnhancedCQECompression: true, MiniCQEStrideIndex: true,
		CQECompressionMaxNum: 64,
		WQEInlineMode:        prm.CapInlineNotNeeded,
		EnhancedMPW:          true,
		MaxWQESzSQ:           1024,
		LogMaxCQSz:           22, LogMaxWQSz: 16, LogMaxRQTSize: 8,
		MaxCmdIfChecksum: 3, CheckEntrySignature: true,
		MAC:             [6]byte{0x02, 0x00, 0x5e, 0x10, 0x00, 0x01},
		MaxMTU:          9978,
		PortMTU:         1500 + prm.HWMTUOverhead,
		LinkUp:          true,
		DeviceID:        0x101d,
		DisableLocalLB:  true,
		RQTSFormat:      prm.TSCapBoth,
		SQTSFormat:      prm.TSCapBoth,
		MultiPktSendWQE: 1,
		NumUARs:         64,
	}
}

// Faults selects error paths. Set them with Device.SetFaults; the zero value
// is a healthy device.
type Faults struct {
	// FailOpcode makes the FailCount-th and later executions of that
	// command (0 = every one) return FailStatus/FailSyndrome without
	// side effects.
	FailOpcode   uint16
	FailOpMod    int // the op_mod to match, or -1 for any
	FailCount    int
	FailStatus   uint8
	FailSyndrome uint32
	// InitTimeout keeps the initializing bit set forever.
	InitTimeout bool
	// PageRequestOpcode: the first time that command arrives while an EQ subscribed to
	// page requests exists, the model posts a PAGE_REQUEST EQE for
	// PageRequestPages pages and holds the command (ownership stays with
	// hardware) until MANAGE_PAGES gives them on another slot.
	PageRequestOpcode uint16
	PageRequestPages  int
	// HealthSyndrome is reported in the health buffer (with rfr set), and
	// commands stop completing, as on a firmware crash.
	HealthSyndrome uint8
	// FreezeHealthCounter stops the health counter.
	FreezeHealthCounter bool
	// StuckOpcode: that command is never completed (ownership stays set).
	StuckOpcode uint16
}

// Violations are driver mistakes the model saw that real firmware would
// not report through a command status: each would corrupt state silently
// or fail the function.
type Violations struct {
	// SlotReused: a doorbell rang for a command slot whose previous
	// command the device still owned (the driver overwrote a live entry).
	SlotReused int
	// EQOverrun: an event arrived at a full EQ created without oi; the
	// device declared the function in error (health syndrome 0xC).
	EQOverrun int
}

// Device is one modelled PCI function.
type Device struct {
	mu     sync.Mutex
	cfg    Config
	mem    *Memory
	faults Faults

	pciCommand  uint16
	initReads   int // remaining busy reads of the initializing register
	cmdqH       uint32
	cmdqL       uint32
	cmdqSet     bool
	healthCount uint32

	enabled     bool
	issi        uint16
	issiSet     bool
	initialized bool
	capsSet     bool
	curGeneral  []byte // current general capability (4096 bytes)

	inflight    []bool // command slots the device still owns
	violations  Violations
	pmtu        int             // PMTU admin (= oper) MTU, HW bytes
	pages       map[uint64]bool // firmware pages the driver gave
	runtimeOwed int             // pages requested by PAGE_REQUEST EQEs not yet given
	pending     *pendingCmd     // command held by a page request
	failSeen    int

	objs      objects
	eqs       map[uint32]*eqState
	vport     vportState
	fatal     uint8 // health syndrome raised by the model itself
	stats     Stats
	onUAR     func(off uint32, v uint64)
	leakLog   []string
	rootNICRX *object
}

// Stats counts what the model saw, for tests.
type Stats struct {
	Commands         map[uint16]int // executed commands by opcode
	DeliveryErrors   int
	PagesReclaimed   int
	PagesLeaked      int // pages still held by firmware at DISABLE_HCA
	CantGive         int // MANAGE_PAGES CANT_GIVE answers
	EQOverruns       int
	DoorbellsIgnored int // doorbells for slots not owned by hardware
}

type vportState struct {
	mtu                  int
	promiscUC, promiscMC bool
	promiscAll           bool
	ucList               [][6]byte
	adminUp              bool
	disableUCLB          bool
	disableMCLB          bool
}

// New returns a device in its post-reset state, using mem as host memory.
func New(cfg Config, mem *Memory) *Device {
	d := &Device{cfg: cfg, mem: mem, initReads: cfg.InitializingReads, pmtu: cfg.PortMTU,
		inflight: make([]bool, 1<<cfg.LogCmdqSize)}
	if d.pmtu == 0 {
		d.pmtu = 1500 + prm.HWMTUOverhead
	}
	d.reset()
	d.stats.Commands = map[uint16]int{}
	return d
}

// reset returns the function to its disabled state (DISABLE_HCA); the
// command queue address survives, as it does on the device.
func (d *Device) reset() {
	d.enabled, d.issiSet, d.initialized, d.capsSet = false, false, false, false
	d.issi = 0
	d.curGeneral = d.capability(prm.CapGeneral, prm.CapModeMax)
	prm.CapCmdIfChecksum.Set(d.curGeneral, 0)
	d.pages = map[uint64]bool{}
	d.runtimeOwed = 0
	d.pending = nil
	d.objs = newObjects()
	d.eqs = map[uint32]*eqState{}
	d.rootNICRX = nil
	d.vport = vportState{mtu: 1500 + prm.HWMTUOverhead, adminUp: true}
}

// Memory is the host memory the device works on.
func (d *Device) Memory() *Memory { return d.mem }

// SetFaults replaces the fault selection.
func (d *Device) SetFaults(f Faults) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = f
	d.failSeen = 0
}

// SetLink changes the physical link state and, like the firmware, posts a
// PORT_CHANGE event (subtype 4 active, 1 down) to an EQ subscribed to it.
func (d *Device) SetLink(up bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg.LinkUp = up
	for _, eq := range d.eqs {
		if eq.subscribed(prm.EventPortChange) {
			var data [8]byte
			data[4] = 1 << 4 // port 1 in [7:4] of the port event's byte 4
			d.postEQE(eq, prm.EventPortChange, uint8(boolTo(up, 4, 1)), data[:])
			break
		}
	}
}

// Violations returns the driver mistakes the model saw.
func (d *Device) Violations() Violations {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.violations
}

// PortMTU is the PMTU oper MTU (HW bytes).
func (d *Device) PortMTU() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pmtu
}

// LocalLoopback reports whether the vport reflects the port's own unicast
// and multicast traffic back to it (disable_*_local_lb clear).
func (d *Device) LocalLoopback() (uc, mc bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.vport.disableUCLB, !d.vport.disableMCLB
}

// OnUARWrite registers the handler for UAR writes the command model does
// not consume (CQ arm, send doorbells): the data-path model hooks in here.
func (d *Device) OnUARWrite(f func(off uint32, v uint64)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.onUAR = f
}

// Stats returns a copy of the counters.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Commands = map[uint16]int{}
	for k, v := range d.stats.Commands {
		s.Commands[k] = v
	}
	return s
}

// PagesHeld is the number of firmware pages the device holds.
func (d *Device) PagesHeld() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pages)
}

// Initialized reports whether INIT_HCA succeeded and no TEARDOWN_HCA followed.
func (d *Device) Initialized() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.initialized
}

// Enabled reports whether the function is enabled (ENABLE_HCA without DISABLE_HCA).
func (d *Device) Enabled() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.enabled
}

// --- PCI config seam ---

// ReadConfig16 reads PCI configuration space (only COMMAND is modelled).
func (d *Device) ReadConfig16(off uint32) (uint16, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch off {
	case 0:
		return prm.PCIVendorMellanox, nil
	case prm.PCIDeviceID:
		return d.cfg.DeviceID, nil
	case prm.PCICommand:
		return d.pciCommand, nil
	}
	return 0, nil
}

// WriteConfig16 writes PCI configuration space.
func (d *Device) WriteConfig16(off uint32, v uint16) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off == prm.PCICommand {
		d.pciCommand = v
	}
	return nil
}

// --- MMIO seam (BAR0) ---

// Read32 reads a BAR0 register.
func (d *Device) Read32(off uint32) uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch off {
	case prm.InitFWRev:
		return uint32(d.cfg.FWMinor)<<16 | uint32(d.cfg.FWMajor)
	case prm.InitCmdIfRevFWSub:
		return prm.CmdIfRev<<16 | uint32(d.cfg.FWSub)
	case prm.InitCmdqAddrH:
		return d.cmdqH
	case prm.InitCmdqAddrLSz:
		return d.cmdqL&^0xFFF | uint32(d.cfg.LogCmdqSize)<<4 | uint32(d.cfg.LogCmdqStride)
	case prm.InitInitializing:
		if d.cmdqSet && d.pciCommand&prm.PCICommandBusMaster == 0 {
			// The firmware cannot reach the command queue it was just
			// given without bus mastering; drivers that work on real
			// cards enable it before this wait (kernel mlx5_pci_init,
			// rdma-core mlx5_vfio_init_cmd_interface, Snabb connectx.lua).
			return prm.InitializingBit
		}
		if d.faults.InitTimeout || d.initReads > 0 {
			d.initReads--
			return prm.InitializingBit
		}
		return 0
	case prm.InitHealthFWVer:
		return uint32(d.cfg.FWMajor)
	case prm.InitHealthRFRSev:
		if d.syndrome() != 0 {
			return 1 << 31
		}
		return 0
	case prm.InitHealthSynd:
		return uint32(d.syndrome()) << 16
	case prm.InitHealthCounter:
		if !d.faults.FreezeHealthCounter && d.syndrome() == 0 {
			d.healthCount = (d.healthCount + 1) & prm.HealthCounterMask
		}
		return d.healthCount
	case prm.InitCmdExecTimeout:
		return 60000
	}
	return 0
}

// Write32 writes a BAR0 register; a command doorbell runs the commands.
func (d *Device) Write32(off uint32, v uint32) {
	d.mu.Lock()
	if off >= prm.InitSegmentSize {
		if reg := off % prm.UARPageSize; reg == prm.UAREQDoorbellArm || reg == prm.UAREQDoorbellNoArm {
			d.eqDoorbell(off/prm.UARPageSize, v)
			d.mu.Unlock()
			return
		}
		f := d.onUAR
		d.mu.Unlock()
		if f != nil {
			f(off, uint64(v))
		}
		return
	}
	defer d.mu.Unlock()
	switch off {
	case prm.InitCmdqAddrH:
		d.cmdqH = v
	case prm.InitCmdqAddrLSz:
		d.cmdqL = v
		d.cmdqSet = v&0xFFF == 0 // the queue must be one 4 KiB aligned page
		d.initReads = d.cfg.InitializingReads
	case prm.InitCmdDoorbell:
		for slot := 0; slot < 1<<d.cfg.LogCmdqSize; slot++ {
			if v&(1<<slot) != 0 {
				d.runSlot(slot)
			}
		}
	}
}

// Write64 is an 8-byte store: only doorbells in UAR pages take them.
func (d *Device) Write64(off uint32, v uint64) {
	d.mu.Lock()
	f := d.onUAR
	d.mu.Unlock()
	if off >= prm.InitSegmentSize && f != nil {
		f(off, v)
	}
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// isVF reports whether the configured device ID is a virtual function's.
func (d *Device) isVF() bool {
	switch d.cfg.DeviceID {
	case 0x1016, 0x1018, 0x101a, 0x101c, 0x101e:
		return true
	}
	return false
}

// syndrome is the health syndrome in force: injected or raised by the model.
func (d *Device) syndrome() uint8 {
	if d.faults.HealthSyndrome != 0 {
		return d.faults.HealthSyndrome
	}
	return d.fatal
}
