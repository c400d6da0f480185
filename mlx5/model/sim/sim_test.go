package sim

import (
	"encoding/binary"
	"testing"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// rawCmd is a minimal command poster that lets a test break any rule.
type rawCmd struct {
	t        *testing.T
	d        *Device
	mem      *Memory
	q        []byte
	inChain  []byte
	inIOVA   uint64
	outChain []byte
	outIOVA  uint64
	noSign   bool
}

func newRaw(t *testing.T) *rawCmd { return newRawCfg(t, DefaultConfig()) }

func newRawCfg(t *testing.T, cfg Config) *rawCmd {
	mem := NewMemory()
	d := New(cfg, mem)
	r := &rawCmd{t: t, d: d, mem: mem}
	var qIOVA uint64
	r.q, qIOVA, _ = mem.Alloc(4096, 4096)
	r.inChain, r.inIOVA, _ = mem.Alloc(16*1024, 1024)
	r.outChain, r.outIOVA, _ = mem.Alloc(16*1024, 1024)
	d.WriteConfig16(prm.PCICommand, prm.PCICommandBusMaster|prm.PCICommandMemory)
	for d.Read32(prm.InitInitializing) != 0 {
	}
	d.Write32(prm.InitCmdqAddrH, uint32(qIOVA>>32))
	d.Write32(prm.InitCmdqAddrLSz, uint32(qIOVA))
	for d.Read32(prm.InitInitializing) != 0 {
	}
	return r
}

func chainOf(buf []byte, iova uint64, n int, token uint8) {
	blocks := (n - 16 + 511) / 512
	for i := 0; i < blocks; i++ {
		b := buf[i*1024:]
		next := uint64(0)
		if i+1 < blocks {
			next = iova + uint64(i+1)*1024
		}
		binary.BigEndian.PutUint64(b[prm.MailboxNext:], next)
		binary.BigEndian.PutUint32(b[prm.MailboxBlockNum:], uint32(i))
		b[prm.MailboxToken] = token
	}
}

// post sends in (possibly broken by mutate) and returns delivery status,
// command status and output. done is false if the slot was never completed.
func (r *rawCmd) post(in []byte, outLen int, mutate func(e []byte)) (delivery, status uint8, out []byte, done bool) {
	e := r.q[:64]
	clear(e)
	const token = 0x5A
	e[prm.CmdEntryType] = prm.CmdTypePCI
	binary.BigEndian.PutUint32(e[prm.CmdEntryInLen:], uint32(len(in)))
	binary.BigEndian.PutUint32(e[prm.CmdEntryOutLen:], uint32(outLen))
	copy(e[16:32], in)
	clear(r.inChain)
	clear(r.outChain)
	if len(in) > 16 {
		chainOf(r.inChain, r.inIOVA, len(in), token)
		rest := in[16:]
		for i := 0; len(rest) > 0; i++ {
			rest = rest[copy(r.inChain[i*1024:i*1024+512], rest):]
		}
		binary.BigEndian.PutUint64(e[prm.CmdEntryInPtr:], r.inIOVA)
	}
	if outLen > 16 {
		chainOf(r.outChain, r.outIOVA, outLen, token)
		binary.BigEndian.PutUint64(e[prm.CmdEntryOutPtr:], r.outIOVA)
	}
	e[prm.CmdEntryToken] = token
	e[prm.CmdEntryStatusOwn] = 1
	if mutate != nil {
		mutate(e)
	}
	if !r.noSign {
		var x byte
		for _, b := range e {
			x ^= b
		}
		e[prm.CmdEntrySig] ^= ^x
	}
	r.d.Write32(prm.InitCmdDoorbell, 1)
	if e[prm.CmdEntryStatusOwn]&1 != 0 {
		return 0, 0, nil, false
	}
	delivery = e[prm.CmdEntryStatusOwn] >> 1
	out = make([]byte, outLen)
	n := copy(out, e[32:48])
	for i := 0; n < outLen; i++ {
		n += copy(out[n:], r.outChain[i*1024:i*1024+512])
	}
	return delivery, uint8(prm.OutStatus.Get(out)), out, true
}

func hdr(op, opMod uint16, n int) []byte {
	in := make([]byte, n)
	prm.InOpcode.Set(in, uint64(op))
	prm.InOpMod.Set(in, uint64(opMod))
	return in
}

func (r *rawCmd) mustOK(in []byte, outLen int) []byte {
	r.t.Helper()
	d, s, out, done := r.post(in, outLen, nil)
	if !done || d != 0 || s != 0 {
		r.t.Fatalf("%s: done=%v delivery %#x status %s", prm.OpcodeName(uint16(prm.InOpcode.Get(in))), done, d, prm.StatusName(s))
	}
	return out
}

// The transport checks (kernel cmd.c delivery statuses): each broken rule gives its
// delivery status and the command does not run.
func TestModelRejectsMalformedTransport(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(r *rawCmd, e []byte)
		want   uint8
	}{
		{"type not 7", func(r *rawCmd, e []byte) { e[0] = 3 }, prm.DeliveryBadCmdDesc},
		{"bad block number", func(r *rawCmd, e []byte) { binary.BigEndian.PutUint32(r.inChain[prm.MailboxBlockNum:], 7) }, prm.DeliveryBadBlockNumber},
		{"token mismatch", func(r *rawCmd, e []byte) { r.inChain[prm.MailboxToken] = 1 }, prm.DeliveryTokenErr},
		{"unmapped in_ptr", func(r *rawCmd, e []byte) { binary.BigEndian.PutUint64(e[8:], 0xdead0000) }, prm.DeliveryBadInPtr},
		{"misaligned out_ptr", func(r *rawCmd, e []byte) { binary.BigEndian.PutUint64(e[48:], r.outIOVA+8) }, prm.DeliveryBadOutPtr},
		{"inlen below header", func(r *rawCmd, e []byte) { binary.BigEndian.PutUint32(e[4:], 8) }, prm.DeliveryBadInLen},
		{"outlen below header", func(r *rawCmd, e []byte) { binary.BigEndian.PutUint32(e[56:], 4) }, prm.DeliveryBadOutLen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRaw(t)
			// SET_HCA_CAP needs mailboxes both ways... use QUERY_HCA_CAP-like sizes with ENABLE_HCA semantics
			in := hdr(prm.OpEnableHCA, 0, 600)
			d, _, _, done := r.post(in, 600, func(e []byte) { c.mutate(r, e) })
			if !done || d != c.want {
				t.Fatalf("done=%v delivery %#x (%s), want %#x", done, d, prm.DeliveryName(d), c.want)
			}
			if r.d.Enabled() {
				t.Fatal("command ran despite the delivery error")
			}
		})
	}
}

func TestModelRejectsBadCommands(t *testing.T) {
	r := newRaw(t)
	check := func(name string, in []byte, outLen int, want uint8) {
		t.Helper()
		d, s, out, done := r.post(in, outLen, nil)
		if !done || d != 0 || s != want {
			t.Errorf("%s: done=%v delivery %#x status %s, want %s", name, done, d, prm.StatusName(s), prm.StatusName(want))
		}
		if s != 0 && prm.OutSynd.Get(out) == 0 {
			t.Errorf("%s: failure without a syndrome", name)
		}
	}
	check("before ENABLE_HCA", hdr(prm.OpQueryISSI, 0, 16), prm.QueryISSIOutLen, prm.StatusBadSysState)
	check("unknown opcode", hdr(0x7FF, 0, 16), 16, prm.StatusBadOp)
	r.mustOK(hdr(prm.OpEnableHCA, 0, 16), prm.EnableHCAOutLen)
	check("ENABLE_HCA twice", hdr(prm.OpEnableHCA, 0, 16), prm.EnableHCAOutLen, prm.StatusBadSysState)
	check("bad op_mod", hdr(prm.OpQueryPages, 9, 16), 16, prm.StatusBadParam)
	check("short output", hdr(prm.OpQueryISSI, 0, 16), 16, prm.StatusBadOutputLen)
	check("short input", hdr(prm.OpSetHCACap, 0, 16), 16, prm.StatusBadInputLen)
	check("caps before boot pages", hdr(prm.OpQueryHCACap, 1, 16), prm.QueryHCACapOutLen, prm.StatusBadSysState)
	set := hdr(prm.OpSetISSI, 0, 16)
	prm.SetISSICurrent.Set(set, 5)
	check("unsupported ISSI", set, 16, prm.StatusBadParam)
	prm.SetISSICurrent.Set(set, 1)
	r.mustOK(set, 16)
	check("INIT_HCA without pages", hdr(prm.OpInitHCA, 0, prm.InitHCAInLen), 16, prm.StatusNoResources)
	give := func(n int) []byte {
		in := hdr(prm.OpManagePages, prm.ManagePagesGive, 16+8*n)
		prm.ManagePagesInNum.Set(in, uint64(n))
		for i := 0; i < n; i++ {
			_, iova, _ := r.mem.Alloc(4096, 4096)
			binary.BigEndian.PutUint64(in[16+8*i:], iova)
		}
		return in
	}
	unaligned := give(1)
	binary.BigEndian.PutUint64(unaligned[16:], binary.BigEndian.Uint64(unaligned[16:])+8)
	check("unaligned page", unaligned, 16, prm.StatusBadParam)
	unmapped := give(1)
	binary.BigEndian.PutUint64(unmapped[16:], 0x7000_0000)
	check("unmapped page", unmapped, 16, prm.StatusBadParam)
	boot := give(16)
	r.mustOK(boot, 16)
	check("page given twice", boot, 16, prm.StatusBadParam)
	check("INIT_HCA without init pages", hdr(prm.OpInitHCA, 0, prm.InitHCAInLen), 16, prm.StatusNoResources)
	// SET_HCA_CAP above max is refused.
	caps := r.mustOK(hdr(prm.OpQueryHCACap, 0, 16), prm.QueryHCACapOutLen)[prm.CapabilityOffset:]
	setCap := hdr(prm.OpSetHCACap, 0, prm.SetHCACapInLen)
	copy(setCap[prm.CapabilityOffset:], caps)
	prm.CapLogMaxCQSz.Set(setCap[prm.CapabilityOffset:], 31)
	check("cap above max", setCap, 16, prm.StatusBadParam)
	r.mustOK(give(128), 16)
	// Checksums left on (the max value) make INIT_HCA fail.
	copy(setCap[prm.CapabilityOffset:], caps)
	r.mustOK(setCap, 16)
	check("INIT_HCA with cmdif checksums on", hdr(prm.OpInitHCA, 0, prm.InitHCAInLen), 16, prm.StatusBadParam)
	prm.CapCmdIfChecksum.Set(setCap[prm.CapabilityOffset:], 0)
	r.mustOK(setCap, 16)
	r.mustOK(hdr(prm.OpInitHCA, 0, prm.InitHCAInLen), 16)

	// Objects: references must exist, sizes must be legal.
	cq := hdr(prm.OpCreateCQ, 0, prm.PASOffset+8)
	prm.CQCEQN.Set(cq, 1)
	check("CQ on a missing EQ", cq, 16, prm.StatusBadResource)
	pd := prm.OutObjID.Get(r.mustOK(hdr(prm.OpAllocPD, 0, 16), 16))
	rq := hdr(prm.OpCreateRQ, 0, prm.PASOffset+8)
	prm.RQWQPD.Set(rq, pd)
	check("RQ on a missing CQ", rq, 16, prm.StatusBadResource)
	destroy := hdr(prm.OpDeallocPD, 0, 16)
	prm.InObjID.Set(destroy, pd+1)
	check("dealloc of an unknown PD", destroy, 16, prm.StatusBadResource)
	prm.InObjID.Set(destroy, pd)
	r.mustOK(destroy, 16)
	if objs := r.d.Objects(); len(objs) != 0 {
		t.Errorf("objects left: %v", objs)
	}
}

func TestModelChecksEntrySignature(t *testing.T) {
	r := newRaw(t)
	r.noSign = true
	d, _, _, done := r.post(hdr(prm.OpEnableHCA, 0, 16), prm.EnableHCAOutLen, nil)
	if !done || d != prm.DeliverySignatureErr || r.d.Enabled() {
		t.Fatalf("unsigned entry: done=%v delivery %#x enabled=%v", done, d, r.d.Enabled())
	}
	r.noSign = false
	r.mustOK(hdr(prm.OpEnableHCA, 0, 16), prm.EnableHCAOutLen)
}

// Without bus mastering the device cannot read the queue: no completion.
func TestModelNeedsBusMaster(t *testing.T) {
	r := newRaw(t)
	r.d.WriteConfig16(prm.PCICommand, 0)
	if _, _, _, done := r.post(hdr(prm.OpEnableHCA, 0, 16), prm.EnableHCAOutLen, nil); done {
		t.Fatal("command completed without bus mastering")
	}
	if r.d.Stats().DoorbellsIgnored != 1 {
		t.Fatal("doorbell not counted as ignored")
	}
}

func TestModelStridingRQValidation(t *testing.T) {
	for _, c := range []struct {
		ext     bool
		strides uint64 // field value
		ok      bool
	}{
		{false, 0, true},    // 512 strides
		{false, 7, true},    // 65536
		{false, 0xA, false}, // 8 strides needs ext range
		{true, 0xA, true},
		{true, 0x9, false}, // 4 strides: below 2^3
	} {
		d := New(Config{ExtStrideNumRange: c.ext}, NewMemory())
		l, ok := d.stridesLog(c.strides)
		if ok != c.ok {
			t.Errorf("ext=%v field %#x: log %d ok=%v, want ok=%v", c.ext, c.strides, l, ok, c.ok)
		}
	}
}

// initialized brings a raw model with 1 boot and 1 init page to INIT_HCA
// and allocates a UAR and a PD, so object commands are reachable.
func initialized(t *testing.T) *rawCmd {
	cfg := DefaultConfig()
	cfg.BootPages, cfg.InitPages, cfg.InitializingReads = 1, 1, 0
	r := newRawCfg(t, cfg)
	r.mustOK(hdr(prm.OpEnableHCA, 0, 16), prm.EnableHCAOutLen)
	set := hdr(prm.OpSetISSI, 0, 16)
	prm.SetISSICurrent.Set(set, 1)
	r.mustOK(set, 16)
	give := hdr(prm.OpManagePages, prm.ManagePagesGive, 32)
	prm.ManagePagesInNum.Set(give, 2)
	for i := 0; i < 2; i++ {
		_, iova, _ := r.mem.Alloc(4096, 4096)
		binary.BigEndian.PutUint64(give[16+8*i:], iova)
	}
	r.mustOK(give, 16)
	caps := r.mustOK(hdr(prm.OpQueryHCACap, 1, 16), prm.QueryHCACapOutLen)[prm.CapabilityOffset:]
	setCap := hdr(prm.OpSetHCACap, 0, prm.SetHCACapInLen)
	copy(setCap[prm.CapabilityOffset:], caps)
	r.mustOK(setCap, 16)
	r.mustOK(hdr(prm.OpInitHCA, 0, prm.InitHCAInLen), 16)
	r.mustOK(hdr(prm.OpAllocUAR, 0, 16), 16)
	r.mustOK(hdr(prm.OpAllocPD, 0, 16), 16)
	return r
}
