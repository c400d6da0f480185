package mlx5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// Options tunes waiting. Zero fields take the defaults.
type Options struct {
	// PollInterval is the sleep between polls of a command's ownership
	// bit or of the initializing bit (default 50µs).
	PollInterval time.Duration
	// CommandTimeout bounds one command (default 60 s, rdma-core's value).
	CommandTimeout time.Duration
	// InitTimeout bounds each wait for the initializing bit (default 120 s,
	// FW_PRE_INIT_TIMEOUT_MILI).
	InitTimeout time.Duration
	// Sleep is time.Sleep unless a test injects virtual time. Timeouts are
	// measured as the sum of requested sleeps, so a no-op Sleep makes them
	// deterministic poll counts.
	Sleep func(time.Duration)
}

func (o Options) withDefaults() Options {
	if o.PollInterval <= 0 {
		o.PollInterval = 50 * time.Microsecond
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = 60 * time.Second
	}
	if o.InitTimeout <= 0 {
		o.InitTimeout = 120 * time.Second
	}
	if o.Sleep == nil {
		o.Sleep = time.Sleep
	}
	return o
}

// FWVersion is the firmware revision from the initialization segment.
type FWVersion struct{ Major, Minor, Sub uint16 }

func (v FWVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Sub) }

// HCA is one brought-up PCI function.
type HCA struct {
	bus  Bus
	opt  Options
	cmd  *cmdq
	FW   FWVersion
	Caps Caps

	pages     map[uint64][]byte // firmware pages given, by IOVA
	enabled   bool
	inited    bool
	uar       uint32 // UAR for the async EQ and CQ doorbells
	eq        *asyncEQ
	closed    bool
	lastCount uint32
	stalls    int
	// linkEvents counts PORT_CHANGE events seen on the async EQ.
	linkEvents atomic.Uint64
}

// Open brings the function up in the order the firmware expects
// (kernel main.c mlx5_function_setup, rdma-core mlx5_vfio_setup_function;
// docs/mlx5.md section 1) and creates the async EQ. On failure everything done so
// far is undone, so the device is left disabled and holds no pages.
func Open(bus Bus, opt Options) (*HCA, error) {
	h := &HCA{bus: bus, opt: opt.withDefaults(), pages: map[uint64][]byte{}}
	if err := h.bringUp(); err != nil {
		// Undo errors matter less than the cause; a dead device fails both.
		h.shutdown()
		return nil, err
	}
	return h, nil
}

func (h *HCA) bringUp() (err error) {
	bus := h.bus
	rev := bus.MMIO.Read32(prm.InitCmdIfRevFWSub)
	if rev>>16 != prm.CmdIfRev {
		return fmt.Errorf("mlx5: command interface revision %d, driver supports %d", rev>>16, prm.CmdIfRev)
	}
	fw := bus.MMIO.Read32(prm.InitFWRev)
	h.FW = FWVersion{Major: uint16(fw), Minor: uint16(fw >> 16), Sub: uint16(rev)}
	if err := h.refuseVF(); err != nil {
		return err
	}
	// Bus mastering first: the kernel (mlx5_pci_init: pci_set_master),
	// rdma-core (mlx5_vfio_init_cmd_interface) and Snabb's connectx.lua all
	// enable it before waiting for the firmware, which may DMA the command
	// queue as soon as its address is set.
	cmdReg, err := bus.Config.ReadConfig16(prm.PCICommand)
	if err != nil {
		return fmt.Errorf("mlx5: reading PCI command register: %w", err)
	}
	if err := bus.Config.WriteConfig16(prm.PCICommand, cmdReg|prm.PCICommandMemory|prm.PCICommandBusMaster); err != nil {
		return fmt.Errorf("mlx5: enabling bus mastering: %w", err)
	}
	if err := h.waitInitializing("before the command queue is set"); err != nil {
		return err
	}
	geo := bus.MMIO.Read32(prm.InitCmdqAddrLSz)
	if h.cmd, err = newCmdq(bus, &h.opt, uint8(geo>>4&0xF), uint8(geo&0xF)); err != nil {
		return err
	}
	h.cmd.health = h.healthSyndrome
	bus.MMIO.Write32(prm.InitCmdqAddrH, uint32(h.cmd.pageIOVA>>32))
	bus.MMIO.Write32(prm.InitCmdqAddrLSz, uint32(h.cmd.pageIOVA))
	if err := h.waitInitializing("after the command queue was set"); err != nil {
		return err
	}
	if err := h.enable(); err != nil {
		return err
	}
	if err := h.setISSI(); err != nil {
		return err
	}
	if err := h.supplyPages(prm.PagesBoot); err != nil {
		return err
	}
	if err := h.setHostEndianness(); err != nil {
		return err
	}
	if err := h.setGeneralCaps(); err != nil {
		return err
	}
	if err := h.supplyPages(prm.PagesInit); err != nil {
		return err
	}
	in := make([]byte, prm.InitHCAInLen)
	prm.InOpcode.Set(in, prm.OpInitHCA)
	if _, err := h.cmd.exec(in, 16); err != nil {
		return err
	}
	h.inited = true
	if err := h.readCaps(); err != nil {
		return err
	}
	if err := h.createAsyncEQ(); err != nil {
		return err
	}
	if h.Caps.WQEInlineMode == prm.CapInlineVport {
		v, err := h.QueryVport()
		if err != nil {
			return err
		}
		h.Caps.MinInline = v.MinInline
	}
	return nil
}

// Close destroys the async EQ and UAR, tears the function down, reclaims
// every firmware page and disables the function. Objects created on the HCA
// must be destroyed first (the firmware would free them, but the model
// reports them as leaks).
func (h *HCA) Close() error {
	if h.closed {
		return nil
	}
	return h.shutdown()
}

// shutdown undoes whatever Open got to, in reverse, and frees DMA memory.
func (h *HCA) shutdown() error {
	h.closed = true
	var errs []error
	if h.cmd != nil {
		h.cmd.onWait = nil
	}
	if h.eq != nil {
		if err := h.destroy(prm.OpDestroyEQ, prm.DestroyEQInEQN, h.eq.eqn); err != nil {
			// The device may still write events: keep the memory mapped.
			errs = append(errs, err)
		} else {
			h.bus.DMA.Free(h.eq.iova)
		}
		h.eq = nil
	}
	if h.uar != 0 {
		if err := h.destroy(prm.OpDeallocUAR, prm.InObjID, h.uar); err != nil {
			errs = append(errs, err)
		}
		h.uar = 0
	}
	if h.inited {
		in := make([]byte, 16)
		prm.InOpcode.Set(in, prm.OpTeardownHCA)
		prm.TeardownHCAProfile.Set(in, prm.TeardownGraceful)
		if _, err := h.cmd.exec(in, 16); err != nil {
			errs = append(errs, err)
		}
		h.inited = false
	}
	if h.enabled {
		if len(h.pages) > 0 {
			if err := h.reclaimPages(); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := h.simpleOut(prm.OpDisableHCA, prm.DisableHCAOutLen); err != nil {
			errs = append(errs, err)
		}
		h.enabled = false
	}
	// Pages the firmware did not give back stay mapped: freeing memory a
	// device may still write is worse than leaking it.
	if len(h.pages) > 0 {
		errs = append(errs, fmt.Errorf("mlx5: %d firmware pages not reclaimed; leaving them mapped", len(h.pages)))
	}
	if h.cmd != nil {
		h.cmd.free()
		h.cmd = nil
	}
	return errors.Join(errs...)
}

// enable runs ENABLE_HCA. A function left enabled by a previous owner
// that died without teardown (vfio-pci's reset may not clear it; docs/mlx5.md section 4) answers
// BAD_SYS_STATE: tear it down, disable it and enable again, once. Pages the
// firmware held for the dead owner are lost with its IOMMU mappings.
func (h *HCA) enable() error {
	_, err := h.simpleOut(prm.OpEnableHCA, prm.EnableHCAOutLen)
	var ce *CmdError
	if errors.As(err, &ce) && ce.Delivery == prm.DeliveryOK && ce.Status == prm.StatusBadSysState {
		in := make([]byte, 16)
		prm.InOpcode.Set(in, prm.OpTeardownHCA)
		h.cmd.exec(in, 16) // fails harmlessly if only enabled, not initialized
		if _, derr := h.simpleOut(prm.OpDisableHCA, prm.DisableHCAOutLen); derr != nil {
			return fmt.Errorf("%w; recovering a function left enabled: %w", err, derr)
		}
		_, err = h.simpleOut(prm.OpEnableHCA, prm.EnableHCAOutLen)
	}
	if err != nil {
		return err
	}
	h.enabled = true
	return nil
}

func (h *HCA) waitInitializing(when string) error {
	var waited time.Duration
	for h.bus.MMIO.Read32(prm.InitInitializing)&prm.InitializingBit != 0 {
		if waited >= h.opt.InitTimeout {
			return fmt.Errorf("mlx5: firmware still initializing %s after %v (initializing bit set); check the health buffer or reset the function", when, waited)
		}
		h.opt.Sleep(h.opt.PollInterval)
		waited += h.opt.PollInterval
	}
	return nil
}

// simple runs a header-only command and returns its 16-byte output.
func (h *HCA) simple(op, opMod uint16) ([]byte, error) {
	in := make([]byte, 16)
	prm.InOpcode.Set(in, uint64(op))
	prm.InOpMod.Set(in, uint64(opMod))
	return h.cmd.exec(in, 16)
}

// simpleOut runs a header-only command whose output structure is outLen
// bytes: the kernel sends exactly MLX5_ST_SZ_BYTES of the *_out struct.
func (h *HCA) simpleOut(op uint16, outLen int) ([]byte, error) {
	in := make([]byte, 16)
	prm.InOpcode.Set(in, uint64(op))
	return h.cmd.exec(in, outLen)
}

// refuseVF stops bring-up on a virtual function before any command. The
// kernel treats VFs differently in several places (no host-endianness
// register, PAOS may be refused, the MAC comes from the eswitch, multicast
// needs the vport's list) and none of that is implemented here.
func (h *HCA) refuseVF() error {
	id, err := h.bus.Config.ReadConfig16(prm.PCIDeviceID)
	if err != nil {
		return fmt.Errorf("mlx5: reading PCI device ID: %w", err)
	}
	if name, ok := connectXDevices[id]; ok && strings.HasSuffix(name, " VF") {
		return fmt.Errorf("mlx5: %s [%04x] is a virtual function; ovfwd drives physical functions only (VFs need the kernel's VF handling: eswitch-assigned MAC, multicast list, PAOS refusal, no host-endianness register). Use the PF, or a kernel interface with driver = \"afxdp\"", name, id)
	}
	return nil
}

func (h *HCA) setISSI() error {
	in := make([]byte, 16)
	prm.InOpcode.Set(in, prm.OpQueryISSI)
	out, err := h.cmd.exec(in, prm.QueryISSIOutLen)
	var ce *CmdError
	if errors.As(err, &ce) && ce.Delivery == 0 && ce.Status == prm.StatusBadOp {
		return nil // firmware without ISSI support: ISSI 0 (kernel behaviour)
	}
	if err != nil {
		return err
	}
	supported := prm.QueryISSISupportedDW0.Get(out)
	switch {
	case supported&2 != 0:
		in := make([]byte, 16)
		prm.InOpcode.Set(in, prm.OpSetISSI)
		prm.SetISSICurrent.Set(in, 1)
		_, err := h.cmd.exec(in, 16)
		return err
	case supported&1 != 0 || supported == 0:
		return nil
	}
	return fmt.Errorf("mlx5: firmware supports neither ISSI 0 nor 1 (supported_issi_dw0 %#x)", supported)
}

func (h *HCA) setHostEndianness() error {
	in := make([]byte, prm.AccessRegDataOff+16)
	prm.InOpcode.Set(in, prm.OpAccessReg)
	prm.InOpMod.Set(in, prm.AccessRegWrite)
	prm.AccessRegID.Set(in, prm.HostEndiannessReg)
	in[prm.AccessRegDataOff] = 0x00 // little-endian host (amd64, arm64)
	_, err := h.cmd.exec(in, prm.AccessRegDataOff+16)
	return err
}

func (h *HCA) queryCap(capType, mode uint16) ([]byte, error) {
	in := make([]byte, 16)
	prm.InOpcode.Set(in, prm.OpQueryHCACap)
	prm.InOpMod.Set(in, uint64(capType<<1|mode))
	out, err := h.cmd.exec(in, prm.QueryHCACapOutLen)
	if err != nil {
		return nil, err
	}
	return out[prm.CapabilityOffset:], nil
}

// setGeneralCaps writes back the current general caps with command
// checksums off and 4 KiB UAR pages (kernel main.c handle_hca_cap,
// rdma-core mlx5_vfio.c set_hca_cap).
func (h *HCA) setGeneralCaps() error {
	maxc, err := h.queryCap(prm.CapGeneral, prm.CapModeMax)
	if err != nil {
		return err
	}
	cur, err := h.queryCap(prm.CapGeneral, prm.CapModeCurrent)
	if err != nil {
		return err
	}
	if prm.CapPortType.Get(maxc) != 1 {
		return fmt.Errorf("mlx5: port type %d is not Ethernet (an InfiniBand port cannot carry ovfwd traffic)", prm.CapPortType.Get(maxc))
	}
	in := make([]byte, prm.SetHCACapInLen)
	prm.InOpcode.Set(in, prm.OpSetHCACap)
	prm.InOpMod.Set(in, prm.CapGeneral<<1)
	c := in[prm.CapabilityOffset:]
	copy(c, cur)
	prm.CapCmdIfChecksum.Set(c, 0)
	prm.CapLogUARPageSz.Set(c, 0) // 4 KiB host pages
	if prm.CapCacheLine128.Get(maxc) == 1 {
		// The CPU's line, as kernel main.c handle_hca_cap sets it
		// (cache_line_size() >= 128): amd64 and arm64 hosts have 64-byte
		// lines, and the data path lays packets out on them.
		prm.CapCacheLine128.Set(c, 0)
	}
	_, err = h.cmd.exec(in, 16)
	return err
}

func (h *HCA) readCaps() error {
	gen, err := h.queryCap(prm.CapGeneral, prm.CapModeCurrent)
	if err != nil {
		return err
	}
	eth, err := h.queryCap(prm.CapEthernetOffload, prm.CapModeCurrent)
	if err != nil {
		return err
	}
	ft, err := h.queryCap(prm.CapFlowTable, prm.CapModeCurrent)
	if err != nil {
		return err
	}
	h.Caps = parseCaps(gen, eth, ft)
	return nil
}

// destroy runs a destroy/dealloc command with the object id in field f.
func (h *HCA) destroy(op uint16, f prm.Field, id uint32) error {
	in := make([]byte, 16)
	prm.InOpcode.Set(in, uint64(op))
	f.Set(in, uint64(id))
	_, err := h.cmd.exec(in, 16)
	return err
}

// HealthError reports a firmware or PCI failure seen in the health buffer.
type HealthError struct {
	Reason      string
	Syndrome    uint8
	ExtSyndrome uint16
}

func (e *HealthError) Error() string {
	if e.Syndrome != 0 {
		return fmt.Sprintf("mlx5: device unhealthy: %s: %s (syndrome 0x%x, ext 0x%x)", e.Reason, prm.HealthSyndromeName(e.Syndrome), e.Syndrome, e.ExtSyndrome)
	}
	return "mlx5: device unhealthy: " + e.Reason
}

// healthSyndrome checks the fatal sensors in rdma-core's order
// (mlx5_vfio.c; health buffer in include/linux/mlx5/device.h).
func (h *HCA) healthSyndrome() error {
	m := h.bus.MMIO
	if m.Read32(prm.InitHealthFWVer) == prm.HealthFWVerDead {
		return &HealthError{Reason: "PCI link down (health fw_ver reads all ones)"}
	}
	switch (m.Read32(prm.InitCmdqAddrLSz) >> 8) & 7 {
	case prm.NICIfStateDisabled:
		return &HealthError{Reason: "NIC interface disabled"}
	case prm.NICIfStateSWReset:
		return &HealthError{Reason: "NIC interface in software reset"}
	}
	var hb [4]byte
	binary.BigEndian.PutUint32(hb[:], m.Read32(prm.InitHealthSynd))
	rfr := m.Read32(prm.InitHealthRFRSev)>>31 == 1
	if synd := hb[1]; rfr && synd != 0 {
		return &HealthError{Reason: "firmware error, recovery flow required", Syndrome: synd, ExtSyndrome: binary.BigEndian.Uint16(hb[2:])}
	}
	return nil
}

// CheckHealth is the periodic (about once a second) health poll: the fatal
// sensors, and the health counter, which must change between polls; three
// polls in a row without change mean the firmware is dead (rdma-core).
func (h *HCA) CheckHealth() error {
	if err := h.healthSyndrome(); err != nil {
		return err
	}
	c := h.bus.MMIO.Read32(prm.InitHealthCounter) & prm.HealthCounterMask
	if c == h.lastCount {
		h.stalls++
	} else {
		h.stalls = 0
	}
	h.lastCount = c
	if h.stalls >= 3 {
		return &HealthError{Reason: fmt.Sprintf("health counter stuck at %d for %d polls", c, h.stalls)}
	}
	return nil
}
