package bench

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// genXDP is the XDP live-frames generator (FwdOptions.Gen "xdp"): the
// kernel runs a small XDP program over a page-pool frame again and again
// (BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, net/bpf/test_run.c
// bpf_test_run_xdp_live), the program writes flow i's frame into it and
// bpf_redirects it out of bnA0. The frames reach bnA1 as xdp_frames
// through veth_xdp_xmit (drivers/net/veth.c), as a NIC's receive ring
// hands its XDP program raw buffers: no skb. With the AF_XDP and AF_PACKET
// generators the appliance side instead receives an skb per frame, which
// veth's XDP path copies into a page-pool page first
// (veth_convert_skb_to_xdp_buff: too little headroom) and whose release
// runs the generator socket's completion on the appliance CPU
// (xsk_destruct_skb, sock_wfree): work of the test rig that a router on a
// NIC never does. A veth takes xdp_frames only while its receiving end
// runs NAPI, so Linux's runs turn GRO on on bnA1 (veth_set_features) and
// pin its NAPI thread to FwdCPU, exactly as ovfwd's.
const genXDP = "xdp"

// liveBatch is the frames per BPF_PROG_TEST_RUN call (Repeat); the kernel
// works through them in batches of 64 and flushes the redirects per batch.
// Each call sets up and tears down a page pool, and the teardown waits for
// an RCU grace period (measured: ~25 ms of sleep per call), so a call must
// be long: 2^18 frames is ~0.1 s of the generator's CPU.
const liveBatch = 1 << 18

// liveFramesRun is BPF_PROG_TEST_RUN; tests replace it to inject the
// kernel's refusal of live frames.
var liveFramesRun = (*ebpf.Program).Run

type liveGen struct {
	prog   *ebpf.Program
	frames *ebpf.Map // array: flow -> frame (64 bytes, 60 used)
	next   *ebpf.Map // per-CPU array[1]: the next flow
	data   []byte
}

// newLiveGen loads the generator's program for ifindex (in the calling
// thread's namespace) and the flow set.
func newLiveGen(ifindex int, frames [][]byte) (g *liveGen, err error) {
	if len(frames) == 0 || len(frames[0]) != 60 {
		return nil, errors.New("bench: xdp generator: want 60-byte frames")
	}
	// The deferred cleanup closes what was opened, so every error return
	// below leaves g set: returning nil, err would hand close a nil g.
	g = &liveGen{data: append([]byte(nil), frames[0]...)}
	defer func() {
		if err != nil {
			g.close()
			g = nil
		}
	}()
	if g.frames, err = ebpf.NewMap(&ebpf.MapSpec{Name: "bench_gen_frames", Type: ebpf.Array, KeySize: 4, ValueSize: 64, MaxEntries: uint32(len(frames))}); err != nil {
		return g, err
	}
	for i, f := range frames {
		v := make([]byte, 64)
		copy(v, f)
		if err = g.frames.Put(uint32(i), v); err != nil {
			return g, err
		}
	}
	if g.next, err = ebpf.NewMap(&ebpf.MapSpec{Name: "bench_gen_next", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 4, MaxEntries: 1}); err != nil {
		return g, err
	}
	r0, r1, r2, r3, r4, r6, r7, r8, r10 := asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R6, asm.R7, asm.R8, asm.R10
	insns := asm.Instructions{
		asm.Mov.Reg(r6, r1),
		asm.StoreImm(r10, -4, 0, asm.Word),
		asm.LoadMapPtr(r1, g.next.FD()),
		asm.Mov.Reg(r2, r10),
		asm.Add.Imm(r2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(r0, 0, "drop"),
		asm.LoadMem(r7, r0, 0, asm.Word),
		asm.Mov.Reg(r2, r7),
		asm.Add.Imm(r2, 1),
		asm.JLT.Imm(r2, int32(len(frames)), "store"),
		asm.Mov.Imm(r2, 0),
		asm.StoreMem(r0, 0, r2, asm.Word).WithSymbol("store"),
		asm.StoreMem(r10, -8, r7, asm.Word),
		asm.LoadMapPtr(r1, g.frames.FD()),
		asm.Mov.Reg(r2, r10),
		asm.Add.Imm(r2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(r0, 0, "drop"),
		asm.Mov.Reg(r8, r0),
		asm.LoadMem(r2, r6, 0, asm.Word), // xdp_md.data
		asm.LoadMem(r3, r6, 4, asm.Word), // xdp_md.data_end
		asm.Mov.Reg(r4, r2),
		asm.Add.Imm(r4, 60),
		asm.JGT.Reg(r4, r3, "drop"),
	}
	for off := int16(0); off < 56; off += 8 {
		insns = append(insns, asm.LoadMem(r4, r8, off, asm.DWord), asm.StoreMem(r2, off, r4, asm.DWord))
	}
	insns = append(insns,
		asm.LoadMem(r4, r8, 56, asm.Word),
		asm.StoreMem(r2, 56, r4, asm.Word),
		asm.Mov.Imm(r1, int32(ifindex)),
		asm.Mov.Imm(r2, 0),
		asm.FnRedirect.Call(),
		asm.Return(),
		asm.Mov.Imm(r0, xdpDropAct).WithSymbol("drop"),
		asm.Return(),
	)
	if g.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: "bench_gen", Type: ebpf.XDP, License: "GPL", Instructions: insns}); err != nil {
		return g, fmt.Errorf("bench: xdp generator: %w", err)
	}
	// One frame now: live-frames mode needs Linux 5.18, and a kernel may
	// refuse it even to root (EPERM from bpf_prog_test_run_xdp).
	if _, err = liveFramesRun(g.prog, &ebpf.RunOptions{Data: g.data, Repeat: 1, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES}); err != nil {
		return g, fmt.Errorf("bench: xdp generator: live frames: %w", err)
	}
	return g, nil
}

// run sends until the budget, the deadline or stop. A frame the veth peer
// has no room for is dropped there without a word to the sender, so
// nothing stalls: sent − forwarded shows those losses.
func (g *liveGen) run(budget uint64, deadline time.Time, stop *atomic.Bool, c *genCounters) unix.Errno {
	var sent uint64
	for sent < budget && !stop.Load() && time.Now().Before(deadline) {
		n := uint32(min(liveBatch, budget-sent))
		if _, err := liveFramesRun(g.prog, &ebpf.RunOptions{Data: g.data, Repeat: n, BatchSize: 64, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES}); err != nil {
			var errno unix.Errno
			if errors.As(err, &errno) {
				return errno
			}
			return unix.EIO
		}
		sent += uint64(n)
		c.sent.Add(uint64(n))
		c.calls.Add(1)
	}
	return 0
}

func (g *liveGen) close() {
	if g.prog != nil {
		g.prog.Close()
	}
	for _, m := range []*ebpf.Map{g.frames, g.next} {
		if m != nil {
			m.Close()
		}
	}
}
