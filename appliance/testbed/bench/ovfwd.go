package bench

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/fwd"
	"golang.org/x/sys/unix"
)

// boostNice is the nice value of ovfwd's worker and ingress NAPI threads
// with FwdOptions.Boost. Linux forwards in softirq context, which preempts
// every task, while ovfwd's work runs in ordinary threads sharing the CPU
// with whatever else runs. Boosting is not the default because it backfires
// here: under load the kernel defers softirq work to ksoftirqd (nice 0),
// which a boosted worker on the same CPU then starves; the ingress backlog
// stalls and the generator's socket buffer fills (docs/benchmarks.md).
const boostNice = -15

// runOvfwd opens the AF_XDP ports in the appliance namespace, runs the fwd
// engine in router mode with one worker pinned to FwdCPU, measures, and
// tears it all down (so the next Linux run sees plain veths).
func runOvfwd(ctx context.Context, t *topology, sink *afxdp.DropCounter, o FwdOptions, res *FwdResult) (Run, error) {
	var pa, pb *afxdp.Port
	var fp *afxdp.FastPath
	if !o.NoFastPath {
		var err error
		if fp, err = afxdp.NewFastPath(); err != nil {
			return Run{}, err
		}
		defer fp.Close()
	}
	err := t.app.Do(func() (err error) {
		// One UMEM per queue for both ports, as the daemon opens them.
		sh := afxdp.NewShare(3, 2)
		if pa, err = afxdp.Open("bnA1", afxdp.Options{Pool: 1, Index: 0, Attach: o.Attach, Share: sh, FastPath: fp}); err != nil {
			return err
		}
		pb, err = afxdp.Open("bnB1", afxdp.Options{Pool: 2, Index: 1, Attach: o.Attach, Share: sh, FastPath: fp})
		return err
	})
	defer func() {
		if pa != nil {
			pa.Close()
		}
		if pb != nil {
			pb.Close()
		}
	}()
	if err != nil {
		return Run{}, err
	}
	if res.QueueModes == nil {
		for _, p := range []*afxdp.Port{pa, pb} {
			for _, m := range p.Modes() {
				res.QueueModes = append(res.QueueModes, p.Info().Name+" "+m.String())
			}
		}
	}
	mode := fwd.ModeRouter
	if o.Bridge {
		mode = fwd.ModeBridge
	}
	e, err := fwd.New(fwd.Config{Mode: mode}, []fwd.Port{pa, pb})
	if err != nil {
		return Run{}, err
	}
	for _, s := range []struct {
		port int
		pfx  string
	}{{0, appAPrefix}, {1, appBPrefix}} {
		if o.Bridge {
			break
		}
		if err := e.AddAddress(s.port, netip.MustParsePrefix(s.pfx)); err != nil {
			return Run{}, err
		}
	}
	if !o.Bridge {
		if err := e.SetNeighbour(1, netip.MustParseAddr(sinkIP), t.sinkMAC); err != nil {
			return Run{}, err
		}
	}
	if o.NAT {
		if err := ovfwdNAT(e); err != nil {
			return Run{}, err
		}
	}
	var tick func()
	if fp != nil {
		// The tables are static for the run: one sync, as the daemon's
		// control loop would do after publishing them. A bridge learns in
		// place: its MACs are mirrored when a station was learned or
		// moved, as the daemon does, here from the control loop's tick so
		// that the cost lands on the appliance CPU.
		fs, err := afxdp.NewFastSync(fp, []int{pa.Ifindex(), pb.Ifindex()})
		switch {
		case err != nil:
		case o.Bridge:
			err = pa.SetFastBridge(true, 0, 1)
			var last time.Time
			gen := ^uint64(0)
			tick = func() {
				g := e.FastBridgeGen()
				if g != gen || time.Since(last) >= time.Second {
					gen, last = g, time.Now()
					_ = fs.ApplyBridge(e.FastBridge())
				}
			}
		default:
			if err = fs.Apply(e.FastView()); err == nil {
				err = pa.SetFast(true, false)
			}
		}
		if err != nil {
			return Run{}, fmt.Errorf("fast path: %w", err)
		}
	}
	var napiPID int
	switch {
	case o.IngressOnGenCPU:
	case pa.Modes()[0].Attach == afxdp.ModeGeneric:
		// Generic XDP runs in the receive softirq, which RPS moves to the
		// appliance CPU exactly as for Linux.
		if err := steerRPS(t, o); err != nil {
			return Run{}, err
		}
		defer unsteerRPS(t)
	default:
		// Native XDP on veth runs in the device's NAPI: make it a thread
		// and pin it to the appliance CPU.
		pid, unthread, err := threadIngressNAPI(t, o.FwdCPU)
		if err != nil {
			return Run{}, err
		}
		defer unthread()
		napiPID = pid
		if o.Boost && pid != 0 {
			_ = unix.Setpriority(unix.PRIO_PROCESS, pid, boostNice)
		}
	}
	// The daemon's loop (appliance/runner), its nice and control pace, on
	// the appliance CPU.
	ro := runner.Options{CPUs: []int{o.FwdCPU}, Tick: tick}
	if o.Boost {
		ro.Nice = boostNice
	}
	run, err := runner.Start(e, []fwd.Port{pa, pb}, ro)
	if err != nil {
		return Run{}, err
	}
	if o.Bridge {
		if err := teachSink(t); err != nil {
			run.Stop(0)
			return Run{}, err
		}
	}
	var threads []string
	for _, tid := range run.TIDs() {
		threads = append(threads, fmt.Sprintf("self/task/%d", tid))
	}
	if napiPID != 0 {
		threads = append(threads, strconv.Itoa(napiPID))
	}
	ringDrops := func() uint64 { s := pa.Stats(); return s.KernelRxRingFull + s.KernelRxDropped }
	var prog progStats
	if o.ProgStats {
		id, err := pa.ProgramID()
		if err != nil {
			run.Stop(0)
			return Run{}, err
		}
		var done func()
		prog, done, err = progStatterID(id)
		if err != nil {
			run.Stop(0)
			return Run{}, err
		}
		defer done()
	}
	r, err := measure(ctx, t, sink, o, "ovfwd", threads, ringDrops, prog)
	run.Stop(0)
	st := e.Stats()
	ps := pa.Stats()
	var drops string
	for reason, n := range st.Drops {
		if n > 0 {
			drops += fmt.Sprintf(" %s=%d", fwd.DropReason(reason), n)
		}
	}
	fast := ""
	if fp != nil {
		if fs, err := pa.FastStats(); err == nil {
			fast = fmt.Sprintf("; fast path forwarded=%d punted=%d%s", fs[afxdp.FastForwarded], sumPunts(fs), puntReasons(fs))
			r.Fast = fs[afxdp.FastForwarded]
		}
	}
	r.Note = fmt.Sprintf("[since open: xsk rx_ring_full=%d fill_empty=%d rx_dropped=%d; engine copies=%d drops:%s%s]",
		ps.KernelRxRingFull, ps.KernelFillEmpty, ps.KernelRxDropped, st.Copies, drops, fast)
	if o.NAT {
		r.Note += fmt.Sprintf(" [nat translated=%d]", e.NATStats().Translated)
	}
	return r, err
}

// puntReasons lists the non-zero punt counters, " (reason=n ...)".
func puntReasons(fs [afxdp.NumFastStats]uint64) string {
	var parts []string
	for i := afxdp.FastPuntOptions; i < afxdp.NumFastStats; i++ {
		if fs[i] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", i, fs[i]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, " ") + ")"
}

func sumPunts(fs [afxdp.NumFastStats]uint64) uint64 {
	var n uint64
	for i := afxdp.FastPuntOptions; i < afxdp.NumFastStats; i++ {
		n += fs[i]
	}
	return n
}
