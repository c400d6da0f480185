package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"golang.org/x/sys/unix"
)

// The bare side (FwdOptions.Bare) is the floor under the fast path: an XDP
// program on bnA1 that writes the sink's MACs and bpf_redirect_maps every
// frame to bnB1 through a one-entry DEVMAP_HASH, as the fast path's tail
// does, with nothing before it (no parsing, no tables, no counters, no
// AF_XDP sockets, no worker). Same NAPI thread set-up as ovfwd's native
// runs. The difference between bare and ovfwd is what the fast path's
// checks and tables cost on top of the veths' own work.

const xdpDropAct = 1 // XDP_DROP, include/uapi/linux/bpf.h enum xdp_action

// bareRedirect loads the bare program redirecting to ifindex out with
// these MACs.
func bareRedirect(out int, dst, src net.HardwareAddr) (*ebpf.Program, *ebpf.Map, error) {
	devs, err := ebpf.NewMap(&ebpf.MapSpec{Name: "bench_bare_devs", Type: ebpf.DevMapHash, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return nil, nil, err
	}
	if err := devs.Put(uint32(out), uint32(out)); err != nil {
		devs.Close()
		return nil, nil, err
	}
	var mac [12]byte
	copy(mac[:], dst)
	copy(mac[6:], src)
	// Packet loads and stores are in host order (little-endian here), so
	// the immediates are the MAC bytes read that way.
	w := func(i int) int64 { return int64(int32(binary.LittleEndian.Uint32(mac[i:]))) }
	r1, r2, r3, r4 := asm.R1, asm.R2, asm.R3, asm.R4
	insns := asm.Instructions{
		asm.LoadMem(r2, r1, 0, asm.Word), // xdp_md.data
		asm.LoadMem(r3, r1, 4, asm.Word), // xdp_md.data_end
		asm.Mov.Reg(r4, r2),
		asm.Add.Imm(r4, 14),
		asm.JGT.Reg(r4, r3, "drop"),
		asm.StoreImm(r2, 0, w(0), asm.Word),
		asm.StoreImm(r2, 4, w(4), asm.Word),
		asm.StoreImm(r2, 8, w(8), asm.Word),
		asm.LoadMapPtr(r1, devs.FD()),
		asm.Mov.Imm(r2, int32(out)),
		asm.Mov.Imm(r3, xdpDropAct),
		asm.FnRedirectMap.Call(),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpDropAct).WithSymbol("drop"),
		asm.Return(),
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "bench_bare", Type: ebpf.XDP, License: "GPL", Instructions: insns})
	if err != nil {
		devs.Close()
		return nil, nil, fmt.Errorf("bench: bare redirect: %w", err)
	}
	return prog, devs, nil
}

// runBare measures the bare redirect (see above).
func runBare(ctx context.Context, t *topology, sink *afxdp.DropCounter, o FwdOptions) (Run, error) {
	var prog *ebpf.Program
	var devs *ebpf.Map
	var lk link.Link
	err := t.app.Do(func() error {
		a, err := net.InterfaceByName("bnA1")
		if err != nil {
			return err
		}
		b, err := net.InterfaceByName("bnB1")
		if err != nil {
			return err
		}
		dst := t.sinkMAC
		if prog, devs, err = bareRedirect(b.Index, dst, b.HardwareAddr); err != nil {
			return err
		}
		lk, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: a.Index, Flags: link.XDPDriverMode})
		return err
	})
	defer func() {
		if lk != nil {
			lk.Close()
		}
		if prog != nil {
			prog.Close()
		}
		if devs != nil {
			devs.Close()
		}
	}()
	if err != nil {
		return Run{}, fmt.Errorf("bare redirect: %w", err)
	}
	var threads []string
	if !o.IngressOnGenCPU {
		pid, unthread, err := threadIngressNAPI(t, o.FwdCPU)
		if err != nil {
			return Run{}, err
		}
		defer unthread()
		threads = napiThreads(pid)
	}
	ps := progStatter(prog)
	r, err := measure(ctx, t, sink, o, "bare", threads, nil, ps)
	return r, err
}

// progStats reads a program's bpf_stats (run time, runs): zero unless
// kernel.bpf_stats_enabled is on (FwdOptions.ProgStats).
type progStats func() (ns, runs uint64)

func progStatter(p *ebpf.Program) progStats {
	if p == nil {
		return nil
	}
	return func() (uint64, uint64) {
		s, err := p.Stats()
		if err != nil {
			return 0, 0
		}
		return uint64(s.Runtime), s.RunCount
	}
}

// progStatterID is progStatter for a program known by id (the steering
// program afxdp loaded). The returned close releases the handle.
func progStatterID(id uint32) (progStats, func(), error) {
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return nil, func() {}, err
	}
	return progStatter(p), func() { p.Close() }, nil
}

// enableProgStats turns the kernel's BPF run-time accounting on while the
// returned closer is open (BPF_ENABLE_STATS). It costs each program run
// two clock reads, so the figures of a run with it are not those without.
func enableProgStats() (func(), error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("bench: enable BPF stats: %w", err)
	}
	return func() { c.Close() }, nil
}
