package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"golang.org/x/sys/unix"
)

// FwdOptions tune Fwd. Zero values take the defaults in brackets.
type FwdOptions struct {
	Rounds     int           // A B pairs [3]
	Duration   time.Duration // measured time per run [3s], after Warmup [500ms]
	Warmup     time.Duration
	MaxPackets uint64 // generator budget per run [40M]
	// Gen is the generator, the same for both sides: "xdp" (XDP live
	// frames, genlive.go), "afxdp" (AF_XDP copy-mode TX of prebuilt
	// frames, genxdp_unsafe.go) or "afpacket" (sendmmsg, gen_unsafe.go).
	// Empty: the first of these that opens here (pickGen).
	Gen        string
	GenThreads int // generator threads, all pinned to GenCPU [afpacket 2; afxdp 1, one per TX queue, and veth has one]
	GenCPU     int // [0]
	Flows      int // distinct UDP flows the generator cycles through [256]
	// GenOnly measures the generator alone: an XDP_DROP counter on the
	// appliance's ingress veth takes its frames, with that veth's NAPI on
	// FwdCPU as in ovfwd's runs. Nothing is forwarded.
	GenOnly bool
	FwdCPU  int // the appliance's CPU: ovfwd's worker and, with IngressOnFwdCPU, the ingress softirq [1]
	// IngressOnGenCPU leaves the appliance's receive softirq where veth
	// puts it — on the generator's CPU — instead of moving it to FwdCPU
	// (RPS for Linux, threaded NAPI for ovfwd). The default moves it, so
	// both sides forward on the same one core.
	IngressOnGenCPU bool
	Attach          afxdp.AttachMode // ovfwd ports' XDP mode [native, then generic]
	Boost           bool             // run ovfwd's worker and NAPI threads at nice boostNice (see there)
	NAT             bool             // translate the source: ovfwd's NAT44 vs nftables masquerade (nat.go)
	// NoFastPath runs ovfwd without the XDP fast path, every frame through
	// the worker. The default has it, as the daemon's fast_path = "auto"
	// does on these copy-mode veths.
	NoFastPath bool
	// Bridge bridges instead of routing: ovfwd in bridge mode against a
	// Linux bridge (bridge.go).
	Bridge bool
	// LinuxXDPPass gives Linux's bnA1 NAPI with an XDP_PASS program
	// instead of GRO with the XDP generator (see linuxNAPI).
	LinuxXDPPass bool
	// Bare adds a third side to each round: a bare XDP redirect from the
	// ingress to the egress veth (bare.go), the floor under the fast path.
	// Routed mode only.
	Bare bool
	// ProgStats turns the kernel's BPF run-time accounting on and reports
	// the ingress XDP program's ns per run (ovfwd's steering program, the
	// bare program). It adds two clock reads to every program run, the
	// sink's too, so compare runs with it only with each other.
	ProgStats bool
}

func (o *FwdOptions) defaults() {
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.Duration == 0 {
		o.Duration = 3 * time.Second
	}
	if o.Warmup == 0 {
		o.Warmup = 500 * time.Millisecond
	}
	if o.MaxPackets == 0 {
		o.MaxPackets = 40_000_000
	}
	if o.Flows == 0 {
		o.Flows = 256
	}
	if o.FwdCPU == 0 && o.GenCPU == 0 {
		o.FwdCPU = min(1, runtime.NumCPU()-1)
	}
}

// Run is one measured run.
type Run struct {
	Side      string // "ovfwd" or "linux"
	Sent      uint64 // generator frames during the measured window
	Forwarded uint64 // frames the sink counted during the window
	Seconds   float64
	CPUBusy   []float64 // per CPU, percent
	// CPUns is the appliance CPU's work per forwarded packet, in ns: its
	// busy time in /proc/stat over the window. The tick accounting there
	// charges each tick to one category, so softirq that runs inside the
	// worker's system calls is counted once; the price is that whatever
	// else ran on that CPU is in it too (Before shows how much there was).
	CPUns float64
	// Before is the appliance CPU's busy share, percent, in the moment
	// before the generator started: other tenants (and an idle worker).
	Before float64
	// Softirq is the appliance CPU's softirq share, percent, and WorkerCPU
	// each ovfwd worker thread's utime+stime share, then the ingress NAPI
	// thread's (if threaded). They overlap: a thread's time includes the
	// softirq ticks that hit it (no IRQ time accounting), so they are the
	// breakdown, not the cost.
	Softirq   float64
	WorkerCPU []float64
	// GenNs is the generator threads' own CPU time (utime+stime, with the
	// softirq run inside their sendto) per frame sent: what a frame costs
	// the generator whatever share of its CPU other load leaves it.
	GenNs float64
	// GenStalled is the share, percent, of the generator's send calls
	// that ended early because the receiving side was full (genCounters).
	GenStalled float64
	RingDrops  uint64 // ovfwd: frames the kernel dropped for a full XSK RX ring or empty fill ring
	Fast       uint64 // ovfwd: frames the XDP fast path forwarded since the ports opened
	// WorkNs is the forwarding work per forwarded packet, in ns: the
	// side's threads' utime+stime (ovfwd's workers and NAPI thread; the
	// NAPI thread of Linux or the bare redirect) and the appliance CPU's
	// ksoftirqd's, or without threads the CPU's softirq time (Linux with
	// RPS). Unlike CPUns it leaves out what other tenants ran on the CPU,
	// so it stays comparable on a shared host. It is tick-sampled (±1
	// tick per thread); softirq work that runs on the way out of an
	// interrupt while another task runs is charged to that task, and so
	// missed for the thread sides, as are their wake-ups (the IPI, the
	// scheduler): against Linux with RPS it flatters the thread side.
	WorkNs float64
	// ProgNs is the ingress XDP program's own run time per run in the
	// window (bpf_stats, FwdOptions.ProgStats; 0 without).
	ProgNs float64
	Note   string // side-specific counters (ovfwd drops, queue modes)
}

func (r Run) SentPPS() float64 { return float64(r.Sent) / r.Seconds }
func (r Run) PPS() float64     { return float64(r.Forwarded) / r.Seconds }

// FwdResult is what Fwd measured.
type FwdResult struct {
	Runs       []Run
	OvfwdPPS   float64 // median
	LinuxPPS   float64 // median
	Ratio      float64 // OvfwdPPS / LinuxPPS
	OvfwdNs    float64 // median appliance-CPU ns per forwarded packet
	LinuxNs    float64
	CostRatio  float64 // LinuxNs / OvfwdNs: above 1, ovfwd needs less CPU per packet
	QueueModes []string
	GenPPS     float64 // GenOnly: median frames/s the sink counted
	GenNs      float64 // GenOnly: median Run.GenNs
	OvfwdLimit string
	LinuxLimit string
	OvfwdWork  float64 // median Run.WorkNs
	LinuxWork  float64
	// Gen is the generator that ran; GenFallback, when the default one
	// could not, which it fell back to and why (also in the report).
	Gen         string
	GenFallback string
	// IngressFallback says, when the appliance's ingress NAPI could not be
	// made a thread on FwdCPU, why and where it ran instead; appliance-CPU
	// costs are then left out as not comparable.
	IngressFallback string
	BarePPS         float64 // Bare: the bare redirect's median pps, CPU ns per packet and limit
	BareNs          float64
	BareLimit       string
}

// Fwd builds the topology, alternates Linux and ovfwd forwarding of 64-byte
// UDP frames Rounds times, writes a report to w and returns the numbers.
// Needs root. Everything it creates is removed before it returns.
func Fwd(ctx context.Context, w io.Writer, o FwdOptions) (*FwdResult, error) {
	o.defaults()
	if runtime.NumCPU() < 2 {
		return nil, errors.New("bench: needs 2 CPUs (generator and appliance apart)")
	}
	if o.Flows < 1 || o.Flows > xdpGenFrames {
		return nil, fmt.Errorf("bench: %d flows, want 1 to %d", o.Flows, xdpGenFrames)
	}
	if o.Gen != "" && o.Gen != genAFXDP && o.Gen != genAFPacket && o.Gen != genXDP {
		return nil, fmt.Errorf("bench: generator %q, want %s, %s or %s", o.Gen, genAFXDP, genAFPacket, genXDP)
	}
	// The generator threads spin in Go between sendmmsg calls and hold a P
	// each; without spare Ps the worker goroutine (and the timers that wake
	// it) would wait for one, and the benchmark would measure the Go
	// scheduler. Ps are not CPUs: pinning decides where threads run.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(o.GenThreads, 2) + 4))
	if stale := netns.Sweep(); len(stale) > 0 {
		fmt.Fprintf(w, "removed stale namespaces: %s\n", strings.Join(stale, " "))
	}
	t, err := buildTopology()
	if err != nil {
		return nil, err
	}
	defer t.destroy()
	sink, err := newSink(t)
	if err != nil {
		return nil, err
	}
	defer sink.Close()
	what := "through"
	t.frames = flowFrames(t.appA, t.genMAC, o.Flows)
	if o.Bridge {
		if o.NAT {
			return nil, errors.New("bench: -bridge and -nat exclude each other")
		}
		// Bridged: the frames go to the sink's MAC.
		t.frames = flowFrames(t.sinkMAC, t.genMAC, o.Flows)
		what = "bridged by"
	}
	genDesc, genFallback, err := pickGen(t, &o)
	if err != nil {
		return nil, err
	}
	if genFallback != "" {
		fmt.Fprintf(w, "generator: %s\n", genFallback)
	}
	if o.GenOnly {
		what = "into an XDP_DROP counter on the ingress veth of"
	}

	fmt.Fprintf(w, "bench fwd: 64-byte UDP %s -> %s (%d flows: 16 source addresses x %d source ports) %s the appliance namespace; generator: %s; appliance CPU %d; sink: XDP_DROP counter on the far veth\n",
		genIP+"-16", sinkIP, o.Flows, (o.Flows+15)/16, what, genDesc, o.FwdCPU)
	if o.Bridge {
		fmt.Fprintf(w, "bridge: ovfwd bridge mode vs a Linux bridge of the same veths (%s); both learn the sink's MAC from a broadcast it sends before each run\n", bridgeNetfilterOff(t))
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(w, "load average before: %s (other work on these CPUs skews every number)\n", strings.Join(strings.Fields(string(la))[:3], " "))
	}
	switch {
	case o.IngressOnGenCPU:
		fmt.Fprintf(w, "ingress softirq: on the generator's CPU (veth default)\n")
	case o.Gen == genXDP:
		napi := "GRO on"
		if o.LinuxXDPPass {
			napi = "an XDP_PASS program"
		}
		fmt.Fprintf(w, "ingress: bnA1's NAPI made a thread and pinned to CPU %d on every side (Linux: %s, for NAPI)\n", o.FwdCPU, napi)
	default:
		fmt.Fprintf(w, "ingress softirq: moved to CPU %d (Linux and generic XDP: RPS; native XDP: threaded NAPI, pinned)\n", o.FwdCPU)
	}
	if o.NAT {
		fmt.Fprintf(w, "NAT: source translated to %s out of bnB1 — ovfwd [[nat]] vs Linux nftables masquerade (conntrack)\n", appBIP)
	}
	if o.Boost {
		fmt.Fprintf(w, "ovfwd worker and NAPI threads at nice %d (Linux forwards in softirq, above every task)\n", boostNice)
	}
	switch {
	case o.GenOnly:
	case o.NoFastPath:
		fmt.Fprintf(w, "ovfwd: XDP fast path off (every frame through the worker)\n")
	case o.Bridge:
		fmt.Fprintf(w, "ovfwd: XDP fast path on (bridged frames between learned MACs forwarded in the ingress XDP program, counted in napi; learned MACs mirrored from the control loop's tick when one is learned or moves)\n")
	default:
		fmt.Fprintf(w, "ovfwd: XDP fast path on (fast_path = auto: routed IPv4 forwarded in the ingress XDP program, counted in napi)\n")
	}
	fmt.Fprintf(w, "ns/pkt: CPU %d's busy time (/proc/stat, every tick counted once, whatever ran) per forwarded packet; before: its busy share just before the generator started (other load); softirq%d, worker, napi: the breakdown (softirq from /proc/stat; threads' utime+stime, which include softirq run inside them)\n", o.FwdCPU, o.FwdCPU)
	if o.ProgStats {
		undo, err := enableProgStats()
		if err != nil {
			return nil, err
		}
		defer undo()
		fmt.Fprintf(w, "bpf_stats on: prog ns = the ingress XDP program's own run time per run (every program run pays two clock reads more)\n")
	}
	res := &FwdResult{Gen: o.Gen, GenFallback: genFallback}
	sides := []string{"linux", "ovfwd"}
	if o.Bare {
		if o.Bridge || o.NAT || o.GenOnly {
			return nil, errors.New("bench: -bare is for routed runs only")
		}
		sides = []string{"linux", "bare", "ovfwd"}
		fmt.Fprintf(w, "bare: an XDP program on bnA1 that writes the MACs and redirects every frame to bnB1 (DEVMAP_HASH), nothing else; NAPI as ovfwd's\n")
	}
	if o.GenOnly {
		sides = []string{"gen"}
	}
	for round := 0; round < o.Rounds; round++ {
		for _, side := range sides {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			var r Run
			switch side {
			case "linux":
				r, err = runLinux(ctx, t, sink, o)
			case "ovfwd":
				r, err = runOvfwd(ctx, t, sink, o, res)
			case "bare":
				r, err = runBare(ctx, t, sink, o)
			default:
				r, err = runGenOnly(ctx, t, o)
			}
			if err != nil {
				return res, fmt.Errorf("bench: %s run %d: %w", side, round+1, err)
			}
			res.Runs = append(res.Runs, r)
			prog := ""
			if r.ProgNs > 0 {
				prog = fmt.Sprintf("  prog %3.0f ns/run", r.ProgNs)
			}
			fmt.Fprintf(w, "  round %d %-5s sent %8.0f pps (gen %4.0f ns/frame, %3.0f%% stalled)  forwarded %8.0f pps  %5.0f ns/pkt (work %4.0f)%s  cpu %s (before %3.0f%%) softirq%d %3.0f%%%s%s\n",
				round+1, side, r.SentPPS(), r.GenNs, r.GenStalled, r.PPS(), r.CPUns, r.WorkNs, prog, fmtCPU(r.CPUBusy), r.Before, o.FwdCPU, r.Softirq, fmtWorkers(r.WorkerCPU, side != "ovfwd"), noteSuffix(r.Note))
		}
	}
	if t.ingressErr != nil {
		// The sides whose ingress runs in bnA1's NAPI ran it elsewhere
		// than the sides with RPS: their CPU costs do not compare.
		res.IngressFallback = fmt.Sprintf("%v: the sides whose ingress it would have moved ran it as softirq on the CPU that raised it, the generator's", t.ingressErr)
		fmt.Fprintf(w, "ingress: %s\n", res.IngressFallback)
		o.IngressOnGenCPU = true
	}
	if o.GenOnly {
		pps, _ := summarize(res.Runs, "gen", o)
		var offered []float64
		for _, r := range res.Runs {
			offered = append(offered, r.SentPPS())
		}
		slices.Sort(offered)
		res.GenPPS = pps
		var ns []float64
		for _, r := range res.Runs {
			if r.GenNs > 0 {
				ns = append(ns, r.GenNs)
			}
		}
		slices.Sort(ns)
		fmt.Fprintf(w, "generator alone (%s): median offered %.0f pps, counted by the XDP_DROP sink %.0f pps\n", o.Gen, offered[len(offered)/2], pps)
		if len(ns) > 0 {
			res.GenNs = ns[len(ns)/2]
			fmt.Fprintf(w, "generator threads' CPU per frame: median %.0f ns, so %.0f pps per CPU-second they get\n", res.GenNs, 1e9/res.GenNs)
		}
		return res, nil
	}
	res.LinuxPPS, res.LinuxLimit = summarize(res.Runs, "linux", o)
	res.OvfwdPPS, res.OvfwdLimit = summarize(res.Runs, "ovfwd", o)
	if res.LinuxPPS > 0 {
		res.Ratio = res.OvfwdPPS / res.LinuxPPS
	}
	res.OvfwdNs, res.LinuxNs = medianNs(res.Runs, "ovfwd"), medianNs(res.Runs, "linux")
	if res.OvfwdNs > 0 {
		res.CostRatio = res.LinuxNs / res.OvfwdNs
	}
	fmt.Fprintf(w, "ovfwd queues: %s\n", strings.Join(res.QueueModes, "; "))
	fmt.Fprintf(w, "median forwarded: ovfwd %.0f pps, linux %.0f pps, ratio %.2f\n", res.OvfwdPPS, res.LinuxPPS, res.Ratio)
	if o.IngressOnGenCPU {
		// Linux's whole forwarding then runs on the generator's CPU, which
		// the cost accounting (appliance CPU only) does not see.
		res.OvfwdNs, res.LinuxNs, res.CostRatio = 0, 0, 0
		fmt.Fprintf(w, "appliance-CPU cost: not comparable with the ingress on the generator's CPU\n")
	} else {
		fmt.Fprintf(w, "median appliance-CPU cost: ovfwd %.0f ns/packet, linux %.0f ns/packet (linux/ovfwd %.2f, ovfwd/linux %.2f; CPU %d busy time per forwarded packet, so work on frames later dropped and other load on that CPU count too)\n", res.OvfwdNs, res.LinuxNs, res.CostRatio, 1/res.CostRatio, o.FwdCPU)
	}
	res.OvfwdWork, res.LinuxWork = medianOf(res.Runs, "ovfwd", func(r Run) float64 { return r.WorkNs }), medianOf(res.Runs, "linux", func(r Run) float64 { return r.WorkNs })
	if res.OvfwdWork > 0 && res.LinuxWork > 0 && !o.IngressOnGenCPU {
		fmt.Fprintf(w, "median forwarding work: ovfwd %.0f ns/packet, linux %.0f ns/packet (ovfwd/linux %.2f; the forwarding threads' time, or Linux's softirq time with RPS: what other load on CPU %d does not inflate; a thread's wake-ups, IPIs and scheduling are not in it, so it flatters a thread against RPS: compare sides that both run in threads, as with -gen xdp)\n",
			res.OvfwdWork, res.LinuxWork, res.OvfwdWork/res.LinuxWork, o.FwdCPU)
	}
	fmt.Fprintf(w, "ovfwd limited by: %s\nlinux limited by: %s\n", res.OvfwdLimit, res.LinuxLimit)
	if o.Bare {
		res.BarePPS, res.BareLimit = summarize(res.Runs, "bare", o)
		res.BareNs = medianNs(res.Runs, "bare")
		bareWork := medianOf(res.Runs, "bare", func(r Run) float64 { return r.WorkNs })
		fmt.Fprintf(w, "bare redirect: median %.0f pps, %.0f ns/packet of CPU %d (ovfwd %+.0f), forwarding work %.0f ns/packet (ovfwd %+.0f); bare limited by: %s\n",
			res.BarePPS, res.BareNs, o.FwdCPU, res.OvfwdNs-res.BareNs, bareWork, res.OvfwdWork-bareWork, res.BareLimit)
	}
	if o.ProgStats {
		fmt.Fprintf(w, "ingress program ns/run (bpf_stats, median): ovfwd %.0f", medianProg(res.Runs, "ovfwd"))
		if o.Bare {
			fmt.Fprintf(w, ", bare %.0f", medianProg(res.Runs, "bare"))
		}
		fmt.Fprintln(w)
	}
	return res, nil
}

func noteSuffix(s string) string {
	if s == "" {
		return ""
	}
	return "  " + s
}

// fmtWorkers names ovfwd's thread shares: its workers, then its NAPI
// thread if there is one; in a generator-only run, just the NAPI thread.
func fmtWorkers(w []float64, napiOnly bool) string {
	var s string
	for i, v := range w {
		name := fmt.Sprintf("worker%d", i)
		if i == len(w)-1 && (i > 0 || napiOnly) {
			name = "napi"
		}
		s += fmt.Sprintf(" %s %3.0f%%", name, v)
	}
	return s
}

func fmtCPU(b []float64) string {
	var parts []string
	for i, v := range b {
		parts = append(parts, fmt.Sprintf("cpu%d %3.0f%%", i, v))
	}
	return strings.Join(parts, " ")
}

// summarize gives the median forwarded rate of one side and what limited
// it, judged from the median run.
func summarize(runs []Run, side string, o FwdOptions) (float64, string) {
	var mine []Run
	for _, r := range runs {
		if r.Side == side {
			mine = append(mine, r)
		}
	}
	if len(mine) == 0 {
		return 0, "no runs"
	}
	slices.SortFunc(mine, func(a, b Run) int {
		switch {
		case a.PPS() < b.PPS():
			return -1
		case a.PPS() > b.PPS():
			return 1
		}
		return 0
	})
	m := mine[len(mine)/2]
	var fwdBusy, genBusy float64
	if o.FwdCPU < len(m.CPUBusy) {
		fwdBusy = m.CPUBusy[o.FwdCPU]
	}
	if o.GenCPU < len(m.CPUBusy) {
		genBusy = m.CPUBusy[o.GenCPU]
	}
	got := 100 * float64(m.Forwarded) / float64(max(m.Sent, 1))
	var why string
	switch {
	case m.Forwarded >= m.Sent*95/100 && m.GenStalled >= 10:
		why = fmt.Sprintf("the appliance, which took frames no faster: the generator stalled in %.0f%% of its send calls on a full receiver (forwarded %.0f%% of %.0f pps offered; appliance CPU %d %.0f%% busy, %.0f%% before the run, softirq %.0f%%%s)",
			m.GenStalled, got, m.SentPPS(), o.FwdCPU, fwdBusy, m.Before, m.Softirq, threadShare(m.WorkerCPU))
	case m.Forwarded >= m.Sent*95/100:
		why = fmt.Sprintf("the generator (forwarded %.0f%% of %.0f pps offered; generator CPU %d %.0f%% busy; appliance CPU %d %.0f%% busy, %.0f%% before the run, softirq %.0f%%%s)",
			got, m.SentPPS(), o.GenCPU, genBusy, o.FwdCPU, fwdBusy, m.Before, m.Softirq, threadShare(m.WorkerCPU))
	case m.RingDrops > 0 && len(m.WorkerCPU) > 0:
		var ours float64
		for _, v := range m.WorkerCPU {
			ours += v
		}
		why = fmt.Sprintf("the ovfwd threads' share of CPU %d: %.0f%% of %.0f pps offered got through, the kernel dropped %.0f/s at the full XSK RX ring; the CPU was %.0f%% busy (%.0f%% before the run), softirq %.0f%%, ovfwd's worker+NAPI threads %.0f%% (including the softirq inside them)",
			o.FwdCPU, got, m.SentPPS(), float64(m.RingDrops)/m.Seconds, fwdBusy, m.Before, m.Softirq, ours)
	case fwdBusy >= 90:
		why = fmt.Sprintf("the appliance CPU %d (%.0f%% busy, %.0f%% before the run, softirq %.0f%%%s; %.0f%% of %.0f pps offered got through)",
			o.FwdCPU, fwdBusy, m.Before, m.Softirq, threadShare(m.WorkerCPU), got, m.SentPPS())
	case genBusy >= 90:
		why = fmt.Sprintf("the generator CPU %d (%.0f%% busy), which also runs the ingress softirq; %.0f%% of %.0f pps offered got through", o.GenCPU, genBusy, got, m.SentPPS())
	default:
		why = fmt.Sprintf("neither CPU saturated (%.0f%%/%.0f%%): drops in rings or queues; %.0f%% of %.0f pps offered got through", genBusy, fwdBusy, got, m.SentPPS())
	}
	return m.PPS(), why
}

// threadShare is ", ovfwd threads N%" for a run with ovfwd's threads.
func threadShare(w []float64) string {
	if len(w) == 0 {
		return ""
	}
	var sum float64
	for _, v := range w {
		sum += v
	}
	return fmt.Sprintf(", its threads %.0f%%", sum)
}

// beforeWait is how long measure samples the appliance CPU before traffic.
const beforeWait = 300 * time.Millisecond

// measure runs the generator for warmup+duration and counts the window.
// workers are the ovfwd worker threads (empty for Linux); ringDrops reads
// the ingress port's kernel-side drop counters (nil for Linux).
func measure(ctx context.Context, t *topology, sink *afxdp.DropCounter, o FwdOptions, side string, threads []string, ringDrops func() uint64, prog progStats) (Run, error) {
	if ringDrops == nil {
		ringDrops = func() uint64 { return 0 }
	}
	if prog == nil {
		prog = func() (uint64, uint64) { return 0, 0 }
	}
	// What else keeps the appliance CPU busy, before any traffic.
	b0 := readCPUTimes()
	select {
	case <-time.After(beforeWait):
	case <-ctx.Done():
		return Run{}, ctx.Err()
	}
	b1 := readCPUTimes()
	var stop atomic.Bool
	var gc genCounters
	deadline := time.Now().Add(o.Warmup + o.Duration + time.Second)
	budget := o.MaxPackets / uint64(o.GenThreads)
	var wg sync.WaitGroup
	errc := make(chan error, o.GenThreads)
	tids := make(chan string, o.GenThreads)
	for q := range o.GenThreads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every thread hands in one TID (empty if it never ran), so
			// that the wait for them below cannot hang.
			told := false
			errc <- t.gen.Do(func() error {
				told = true
				if err := pinThread(o.GenCPU); err != nil {
					tids <- ""
					return err
				}
				tids <- fmt.Sprintf("self/task/%d", unix.Gettid())
				g, err := newGen(t, o, q)
				if err != nil {
					return err
				}
				defer g.close()
				if errno := g.run(budget, deadline, &stop, &gc); errno != 0 {
					return fmt.Errorf("%s: %w", o.Gen, errno)
				}
				return nil
			})
			if !told {
				tids <- ""
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	select {
	case <-time.After(o.Warmup):
	case <-ctx.Done():
		return Run{}, ctx.Err()
	}
	var gens []string
	for range o.GenThreads {
		gens = append(gens, <-tids)
	}
	// The generator's count is read before the sink's and after it at the
	// end, so the sink's window lies inside the generator's: the reads in
	// between (thread times, /proc) take long enough on a loaded machine
	// for frames sent before the window to be counted as forwarded in it.
	s0 := gc.sent.Load()
	c0, _, err := sink.Count()
	if err != nil {
		return Run{}, err
	}
	g0 := threadTimes(gens)
	k0, st0 := gc.calls.Load(), gc.stalled.Load()
	ksoft := ksoftirqd(o.FwdCPU)
	p0, n0 := prog()
	q0 := threadTimes(ksoft)
	cpu0, t0, r0, w0 := readCPUTimes(), time.Now(), ringDrops(), threadTimes(threads)
	select {
	case <-time.After(o.Duration):
	case <-ctx.Done():
		return Run{}, ctx.Err()
	}
	c1, _, err := sink.Count()
	if err != nil {
		return Run{}, err
	}
	k1, st1 := gc.calls.Load(), gc.stalled.Load()
	s1, cpu1, t1, r1, w1 := gc.sent.Load(), readCPUTimes(), time.Now(), ringDrops(), threadTimes(threads)
	g1 := threadTimes(gens)
	q1 := threadTimes(ksoft)
	p1, n1 := prog()
	stop.Store(true)
	wg.Wait()
	close(errc)
	for e := range errc {
		if e != nil {
			return Run{}, fmt.Errorf("generator: %w", e)
		}
	}
	r := Run{Side: side, Sent: s1 - s0, Forwarded: c1 - c0, Seconds: t1.Sub(t0).Seconds(), CPUBusy: busyPercent(cpu0, cpu1), RingDrops: r1 - r0}
	if before := busyPercent(b0, b1); o.FwdCPU < len(before) {
		r.Before = before[o.FwdCPU]
	}
	r.Softirq = 100 * softirqSeconds(cpu0, cpu1, o.FwdCPU) / r.Seconds
	for i := range w1 {
		r.WorkerCPU = append(r.WorkerCPU, 100*(w1[i]-w0[i])/r.Seconds)
	}
	if k1 > k0 {
		r.GenStalled = 100 * float64(st1-st0) / float64(k1-k0)
	}
	if r.Sent > 0 {
		var g float64
		for i := range g1 {
			g += g1[i] - g0[i]
		}
		r.GenNs = g * 1e9 / float64(r.Sent)
	}
	if n1 > n0 {
		r.ProgNs = float64(p1-p0) / float64(n1-n0)
	}
	if r.Forwarded > 0 {
		r.CPUns = busySeconds(cpu0, cpu1, o.FwdCPU) * 1e9 / float64(r.Forwarded)
		work := softirqSeconds(cpu0, cpu1, o.FwdCPU)
		if len(threads) > 0 {
			work = 0
			for i := range w1 {
				work += w1[i] - w0[i]
			}
			// Softirq work the kernel deferred to ksoftirqd: for Linux
			// with RPS it is in the softirq time already.
			for i := range q1 {
				work += q1[i] - q0[i]
			}
		}
		r.WorkNs = work * 1e9 / float64(r.Forwarded)
	}
	return r, nil
}

func newSink(t *topology) (*afxdp.DropCounter, error) {
	var c *afxdp.DropCounter
	err := t.sink.Do(func() (err error) {
		if c, err = afxdp.NewDropCounter(); err != nil {
			return err
		}
		if _, err = c.Attach(t.sinkIf, afxdp.ModeNative); err != nil {
			c.Close()
		}
		return err
	})
	return c, err
}

func runLinux(ctx context.Context, t *topology, sink *afxdp.DropCounter, o FwdOptions) (Run, error) {
	if o.Bridge {
		undo, err := linuxBridge(t)
		if err != nil {
			return Run{}, err
		}
		defer undo()
		if err := teachSink(t); err != nil {
			return Run{}, err
		}
		threads, undo, err := linuxIngress(t, o)
		if err != nil {
			return Run{}, err
		}
		defer undo()
		return measure(ctx, t, sink, o, "linux", threads, nil, nil)
	}
	if err := nsWrite(t.app, "/proc/sys/net/ipv4/ip_forward", "1"); err != nil {
		return Run{}, err
	}
	defer nsWrite(t.app, "/proc/sys/net/ipv4/ip_forward", "0")
	if o.NAT {
		undo, err := linuxNAT(t)
		if err != nil {
			return Run{}, err
		}
		defer undo()
	}
	threads, undo, err := linuxIngress(t, o)
	if err != nil {
		return Run{}, err
	}
	defer undo()
	return measure(ctx, t, sink, o, "linux", threads, nil, nil)
}

// linuxIngress moves Linux's receive work on bnA1 to the appliance CPU:
// RPS for the skbs of the socket generators; for the XDP generator's
// xdp_frames, which bnA1 takes only while it runs NAPI, GRO on and its NAPI
// thread pinned there, as ovfwd's (it then names that thread).
func linuxIngress(t *topology, o FwdOptions) ([]string, func(), error) {
	switch {
	case o.Gen == genXDP:
		undoGRO, err := linuxNAPI(t, o)
		if err != nil {
			return nil, nil, err
		}
		if o.IngressOnGenCPU {
			return nil, undoGRO, nil
		}
		pid, unthread, err := threadIngressNAPI(t, o.FwdCPU)
		if err != nil {
			undoGRO()
			return nil, nil, err
		}
		return napiThreads(pid), func() { unthread(); undoGRO() }, nil
	case o.IngressOnGenCPU:
		return nil, func() {}, nil
	}
	if err := steerRPS(t, o); err != nil {
		return nil, nil, err
	}
	return nil, func() { unsteerRPS(t) }, nil
}

// linuxNAPI gives bnA1 NAPI for Linux's rounds with the XDP generator:
// GRO on (veth_set_features), or with LinuxXDPPass an XDP program that
// passes every frame, which spares Linux GRO's per-flow work.
func linuxNAPI(t *topology, o FwdOptions) (func(), error) {
	if !o.LinuxXDPPass {
		if _, err := t.app.Run("ethtool", "-K", "bnA1", "gro", "on"); err != nil {
			return nil, err
		}
		return func() { _, _ = t.app.Run("ethtool", "-K", "bnA1", "gro", "off") }, nil
	}
	var c *afxdp.DropCounter
	err := t.app.Do(func() error {
		ifi, err := net.InterfaceByName("bnA1")
		if err != nil {
			return err
		}
		// Counts and drops only what goes to an address nothing sends to.
		if c, err = afxdp.NewDropCounterFor(netip.MustParsePrefix("198.18.99.0/24")); err != nil {
			return err
		}
		if _, err = c.Attach(ifi.Index, afxdp.ModeNative); err != nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return func() { c.Close() }, nil
}

// steerRPS moves bnA1's receive softirq to the appliance CPU. A kernel
// without RPS (CONFIG_RPS off: no rps_cpus in sysfs, net/core/net-sysfs.c)
// leaves it where veth raises it, and t.ingressErr says why.
func steerRPS(t *topology, o FwdOptions) error {
	if err := setRPS(t.app, "bnA1", 1<<o.FwdCPU); err != nil {
		t.ingressRefused("RPS", err)
	}
	return nil
}

func unsteerRPS(t *topology) { _ = setRPS(t.app, "bnA1", 0) }

// setRPS writes ifname's RPS CPU mask in ns; tests replace it to inject a
// kernel without RPS.
var setRPS = func(ns *netns.NS, ifname string, mask int) error {
	return nsWrite(ns, "/sys/class/net/"+ifname+"/queues/rx-0/rps_cpus", fmt.Sprintf("%x", mask))
}

// ksoftirqd names the softirq thread of cpu for threadTimes (none if it
// is not found).
func ksoftirqd(cpu int) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, d := range dirs {
		if b, err := os.ReadFile(d); err == nil && strings.TrimSpace(string(b)) == fmt.Sprintf("ksoftirqd/%d", cpu) {
			return []string{filepath.Base(filepath.Dir(d))}
		}
	}
	return nil
}

func medianProg(runs []Run, side string) float64 {
	return medianOf(runs, side, func(r Run) float64 { return r.ProgNs })
}

// medianOf is the median of f over side's runs where it is positive.
func medianOf(runs []Run, side string, f func(Run) float64) float64 {
	var v []float64
	for _, r := range runs {
		if x := f(r); r.Side == side && x > 0 {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func medianNs(runs []Run, side string) float64 {
	var v []float64
	for _, r := range runs {
		if r.Side == side && r.CPUns > 0 {
			v = append(v, r.CPUns)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}
