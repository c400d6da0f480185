package vpnload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// Options configures Run. Zero fields take the defaults.
type Options struct {
	// Target is TargetOvfwd, TargetOpenVPN, or "both" (the default):
	// runs then alternate between the two servers.
	Target      string
	Clients     int           // concurrent clients, default 100
	PayloadSize int           // UDP payload bytes per packet, default 64
	Duration    time.Duration // traffic per run, default 5 s
	Runs        int           // runs per target, default 3
	// PerClientPPS caps each client's offered rate; 0 offers as fast as
	// the generator can.
	PerClientPPS int
	// Parallel is how many handshakes are started at once, default 256.
	Parallel int
	// Generator is how the clients' traffic is put on the wire:
	// GenRaw (the default) or GenSocket.
	Generator string
	// GenThreads is the raw generator's thread count, default 4.
	GenThreads int
	// GenPresealMB is how much memory the raw generator may fill with
	// packets sealed before each unpaced measured window (sent first,
	// then it seals on the fly); default 256, -1 seals everything on
	// the fly.
	GenPresealMB int

	OvfwdBin string // default $OVFWD_BIN, else built into a temp dir
	// OvfwdBinB, when set, is a second ovfwd build measured against
	// OvfwdBin: each ovfwd run is followed by one of it (TargetOvfwdB),
	// same clients, same settings, and the summary gives B's ratios to A.
	OvfwdBinB   string
	OvfwdDriver string // port driver, default "afxdp-copy"
	OvfwdPoll   string // worker poll mode, "busy" or "adaptive"; default the daemon's
	OpenVPNBin  string // default /usr/sbin/openvpn
	// ServerCPU pins the server (process and, for ovfwd, its worker) to
	// one CPU so both servers get the same core; -1 leaves it unpinned.
	// Zero means the default, CPU 1.
	ServerCPU int
	// GenCPU pins this process (the generator, the clients, their
	// handshakes) to one CPU for the run, apart from the server's; -1
	// leaves it unpinned. The default is CPU 0.
	GenCPU int
	// IngressOnServer moves the server port's receive work (see the
	// package doc) from the generator's CPU to ServerCPU, as bench fwd
	// does: ovfwd's p0 NAPI as a thread pinned there, RPS for openvpn.
	// Then each server's CPU figure includes its receive work and the
	// generator only sends.
	IngressOnServer  bool
	Keepalive        time.Duration // server keepalive interval, default 10 s
	KeepaliveTimeout time.Duration // default 60 s
	HandshakeTimeout time.Duration // for all clients to connect, default 60 s

	Logf func(format string, args ...any)
}

func (o *Options) defaults() error {
	if o.Target == "" {
		o.Target = "both"
	}
	if o.Generator == "" {
		o.Generator = GenRaw
	}
	switch o.Generator {
	case GenRaw, GenSocket:
	default:
		return fmt.Errorf("vpnload: unknown generator %q", o.Generator)
	}
	switch o.Target {
	case "both", TargetOvfwd, TargetOpenVPN:
	default:
		return fmt.Errorf("vpnload: unknown target %q", o.Target)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Clients, 100)
	def(&o.PayloadSize, 64)
	def(&o.Runs, 3)
	def(&o.Parallel, 256)
	def(&o.GenThreads, 4)
	def(&o.GenPresealMB, 256)
	def(&o.ServerCPU, 1)
	if o.GenCPU >= 0 && o.GenCPU == o.ServerCPU {
		return fmt.Errorf("vpnload: generator and server both on CPU %d", o.GenCPU)
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Second
	}
	if o.Keepalive == 0 {
		o.Keepalive = 10 * time.Second
	}
	if o.KeepaliveTimeout == 0 {
		o.KeepaliveTimeout = 60 * time.Second
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 60 * time.Second
	}
	if o.OvfwdDriver == "" {
		o.OvfwdDriver = "afxdp-copy"
	}
	if o.OpenVPNBin == "" {
		o.OpenVPNBin = "/usr/sbin/openvpn"
	}
	switch {
	case o.Clients < 1 || o.Clients > 1021:
		return fmt.Errorf("vpnload: %d clients; the pool holds 1 to 1021", o.Clients)
	case o.PayloadSize < 0 || o.PayloadSize > 1400:
		return fmt.Errorf("vpnload: payload %d bytes; 0 to 1400", o.PayloadSize)
	case o.GenPresealMB < -1 || o.GenPresealMB > 4096:
		return fmt.Errorf("vpnload: preseal %d MB; -1 (none) to 4096", o.GenPresealMB)
	case o.Runs > 100 || o.Duration > 10*time.Minute:
		return errors.New("vpnload: at most 100 runs of 10 minutes")
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// Result is one run against one server.
type Result struct {
	Target    string
	Clients   int // configured
	Connected int // completed the handshake

	HandshakeSeconds float64 // until every client was connected
	HandshakesPerSec float64
	HandshakeCPU     float64 // server CPU seconds spent while the clients connected

	Generator  string  // GenRaw or GenSocket
	Seconds    float64 // traffic duration
	Offered    uint64  // packets the generator put on the wire (raw: tried to)
	OfferedPPS float64 // offered per second: delivered well below it means the server was the limit
	Refused    uint64  // raw generator: frames the link to the server refused (counted in Offered and Loss)
	// GenCPUPerMpkt is the bench process's CPU seconds (the generator,
	// and the link's receive work the kernel does in its context) per
	// million offered packets; GenCPUSeconds/Seconds near 1 means the
	// generator's core was full.
	GenCPUSeconds float64
	GenCPUPerMpkt float64
	// The offered window is from the generator's first packet to its
	// last: Delivered and ServerCPUSeconds are read at its two ends, so
	// PPS, Gbps and CPUPerMpkt cover it exactly. What was still queued
	// when it closed arrives in the drain (drainWait) after it, counted
	// apart.
	Delivered       uint64  // packets the sink received in the offered window
	PPS             float64 // delivered per second of the offered window
	Gbps            float64 // delivered inner IP bits per second
	Loss            float64 // 1 - (delivered in the window and the drain)/offered
	DrainDelivered  uint64  // packets the sink received in the drain
	DrainCPUSeconds float64 // server CPU in the drain

	ServerCPUSeconds float64 // server process user+system time in the offered window
	// ServerSplit is where the server's CPU (Options.ServerCPU) went in the
	// offered window: the process's user and system time, and the CPU's
	// softirq, idle and other shares (CPUSplit); GenSplit is the
	// generator's CPU, where the veth runs the server port's receive work
	// in softirq. Both zero when unpinned.
	ServerSplit    CPUSplit
	GenSplit       CPUSplit
	CPUPerMpkt     float64 // ServerCPUSeconds per million packets Delivered
	IdleRSSPerPeer float64 // server RSS growth per connected idle client, bytes

	Note string // where packets went (ovfwd: port, engine and VPN counters)
}

// Run measures the target server(s) and writes a table of medians and
// ratios to w. It needs root (namespaces, AF_XDP).
func Run(ctx context.Context, w io.Writer, o Options) ([]Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	targets := []string{o.Target}
	if o.Target == "both" {
		targets = []string{TargetOvfwd, TargetOpenVPN}
	}
	if o.OvfwdBinB != "" {
		if !slices.Contains(targets, TargetOvfwd) {
			return nil, errors.New("vpnload: an ovfwd B build needs the ovfwd target")
		}
		targets = slices.Insert(targets, 1, TargetOvfwdB)
	}
	dir, err := os.MkdirTemp("", "vpnload")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if slices.Contains(targets, TargetOvfwd) && o.OvfwdBin == "" {
		if o.OvfwdBin, err = netns.OvfwdBinary(dir); err != nil {
			return nil, err
		}
	}
	if err := layout(dir); err != nil {
		return nil, err
	}
	if u, _ := loadUnit(); slices.Contains(targets, TargetOvfwd) {
		fmt.Fprintf(w, "ovfwd runs as packaging/ovfwd.service runs it: %s\n", u)
	}
	if err := pki.Init(pkiIn(dir)); err != nil {
		return nil, err
	}
	cfgs, err := clientConfigs(pkiIn(dir), o.Clients)
	if err != nil {
		return nil, err
	}
	t, err := buildTopology()
	if err != nil {
		return nil, err
	}
	defer t.destroy()
	if o.GenCPU >= 0 {
		restore, err := netns.PinProcess(o.GenCPU)
		if err != nil {
			return nil, fmt.Errorf("vpnload: generator on CPU %d: %w", o.GenCPU, err)
		}
		defer restore()
	}

	var results []Result
	for run := 0; run < o.Runs; run++ {
		for _, target := range targets {
			if err := ctx.Err(); err != nil {
				return results, err
			}
			r, err := runOnce(ctx, t, dir, cfgs, target, &o)
			if err != nil {
				return results, fmt.Errorf("%s run %d: %w", target, run+1, err)
			}
			o.Logf("%s run %d: %s %s", target, run+1, r.line(), r.Note)
			fmt.Fprintf(w, "%-8s run %d  %s\n", target, run+1, r.line())
			results = append(results, r)
		}
	}
	writeSummary(w, results, targets, &o)
	return results, nil
}

func (r Result) line() string {
	return fmt.Sprintf("%4d/%d clients in %5.2fs (%6.0f hs/s, cpu %5.2fs)  %s offered %9.0f pkt/s (refused %d, gen cpu %4.0f%%, %5.2f cpu-s/Mpkt)  delivered %9.0f pkt/s  %6.3f Gb/s  server cpu %5.2fs (%3.0f%%)  %7.2f cpu-s/Mpkt  drain +%d pkt +%.2f cpu-s  loss %5.1f%%  rss/peer %6.0f B",
		r.Connected, r.Clients, r.HandshakeSeconds, r.HandshakesPerSec, r.HandshakeCPU,
		r.Generator, r.OfferedPPS, r.Refused, 100*r.GenCPUSeconds/r.Seconds, r.GenCPUPerMpkt,
		r.PPS, r.Gbps, r.ServerCPUSeconds, 100*r.ServerCPUSeconds/r.Seconds, r.CPUPerMpkt,
		r.DrainDelivered, r.DrainCPUSeconds, 100*r.Loss, r.IdleRSSPerPeer) +
		fmt.Sprintf("  [server %s] [gen cpu softirq %3.0f%% idle %3.0f%%]", r.ServerSplit, 100*r.GenSplit.Softirq, 100*r.GenSplit.Idle)
}

// drainWait is how long queues get to empty after the offered window.
const drainWait = 300 * time.Millisecond

// runOnce starts the target, connects every client, offers traffic and
// stops everything again. dir is the work directory (see startOvfwd).
func runOnce(ctx context.Context, t *topology, dir string, cfgs []control.ClientConfig, target string, o *Options) (Result, error) {
	r := Result{Target: target, Clients: len(cfgs)}
	var srv *server
	var err error
	switch target {
	case TargetOvfwd:
		srv, err = startOvfwd(t, dir, o.OvfwdBin, o)
	case TargetOvfwdB:
		srv, err = startOvfwd(t, dir, o.OvfwdBinB, o)
	default:
		srv, err = startOpenVPN(t, pkiIn(dir), o)
	}
	if err != nil {
		return r, err
	}
	defer srv.stop()
	if o.IngressOnServer && o.ServerCPU >= 0 {
		napi, undo, err := t.ingressOnServer(target, o.ServerCPU)
		if err != nil {
			return r, err
		}
		defer undo()
		if napi != 0 {
			// The NAPI thread does the server's receive work: its time is
			// the server's, as the RPS softirq's is openvpn's.
			srv.helpers = append(srv.helpers, napi)
		}
	}
	rss0, _ := srv.rssBytes()

	hcpu0, _ := srv.cpuSeconds()
	hctx, cancel := context.WithTimeout(ctx, o.HandshakeTimeout)
	start := time.Now()
	clients, dialErr := dialAll(hctx, t.cli, cfgs, o.Parallel)
	cancel()
	r.HandshakeSeconds = time.Since(start).Seconds()
	if hcpu1, err := srv.cpuSeconds(); err == nil {
		r.HandshakeCPU = hcpu1 - hcpu0
	}
	defer closeAll(clients)
	for _, c := range clients {
		if c != nil {
			r.Connected++
		}
	}
	r.HandshakesPerSec = float64(r.Connected) / r.HandshakeSeconds
	if r.Connected == 0 {
		return r, fmt.Errorf("no client connected: %v\n%s", dialErr, tail(srv.log(), 2000))
	}
	if dialErr != nil {
		o.Logf("%s: %d of %d clients connected; first failure: %v", target, r.Connected, r.Clients, dialErr)
	}
	time.Sleep(500 * time.Millisecond) // idle: let the server settle
	if rss1, err := srv.rssBytes(); err == nil && rss0 > 0 {
		r.IdleRSSPerPeer = (float64(rss1) - float64(rss0)) / float64(r.Connected)
	}

	// Warm-up: resolve the sink's neighbour entry and fill caches before
	// the counted window.
	offer(clients, o.PayloadSize, 50, 300*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	var raw *rawGen
	if o.Generator == GenRaw {
		if raw, err = newRawGen(t, clients, o.PayloadSize, o.GenThreads); err != nil {
			return r, err
		}
		defer raw.close()
		if o.PerClientPPS == 0 && o.GenPresealMB > 0 {
			raw.preseal(o.GenPresealMB << 20) // before the window: not charged to it
		}
	}
	r.Generator = o.Generator
	sink0, err := t.sinkPackets()
	if err != nil {
		return r, err
	}
	u0, err := readUsage(srv, o)
	if err != nil {
		return r, err
	}
	gcpu0 := selfCPUSeconds()
	tStart := time.Now()
	var sent uint64
	if raw != nil {
		var failed uint64
		sent, r.Refused, failed, err = raw.offer(o.PerClientPPS, o.Duration)
		if err != nil {
			return r, err
		}
		if failed > 0 {
			o.Logf("%s: raw generator: %d packets not sealed (a client was reconnecting)", target, failed)
		}
		sent += r.Refused
	} else {
		sent, _ = offer(clients, o.PayloadSize, o.PerClientPPS, o.Duration)
	}
	r.Seconds = time.Since(tStart).Seconds()
	u1, err := readUsage(srv, o)
	if err != nil {
		return r, err
	}
	sink1, err := t.sinkPackets()
	if err != nil {
		return r, err
	}
	r.GenCPUSeconds = selfCPUSeconds() - gcpu0
	r.OfferedPPS = float64(sent) / r.Seconds
	if sent > 0 {
		r.GenCPUPerMpkt = r.GenCPUSeconds / (float64(sent) / 1e6)
	}
	time.Sleep(drainWait)
	cpu2, err := srv.cpuSeconds()
	if err != nil {
		return r, err
	}
	sink2, err := t.sinkPackets()
	if err != nil {
		return r, err
	}
	r.Offered, r.Delivered, r.DrainDelivered = sent, sink1-sink0, sink2-sink1
	r.PPS = float64(r.Delivered) / r.Seconds
	r.Gbps = r.PPS * float64(28+o.PayloadSize) * 8 / 1e9
	if r.Offered > 0 {
		r.Loss = max(0, 1-float64(r.Delivered+r.DrainDelivered)/float64(r.Offered))
	}
	r.ServerCPUSeconds, r.DrainCPUSeconds = u1.proc.seconds()-u0.proc.seconds(), cpu2-u1.proc.seconds()
	if o.ServerCPU >= 0 {
		r.ServerSplit = split(u0.proc, u1.proc, u0.serverCPU, u1.serverCPU, r.Seconds)
	}
	if u1.sched.wait >= u0.sched.wait && r.Seconds > 0 {
		r.ServerSplit.Wait = float64(u1.sched.wait-u0.sched.wait) / 1e9 / r.Seconds
	}
	if o.GenCPU >= 0 {
		r.GenSplit = split(procTimes{}, procTimes{}, u0.genCPU, u1.genCPU, r.Seconds)
	}
	if srv.status != "" {
		r.Note = ovfwdCounters(srv.status)
	}
	if r.Delivered > 0 {
		r.CPUPerMpkt = r.ServerCPUSeconds / (float64(r.Delivered) / 1e6)
	}
	return r, nil
}

// usage is what the server and the CPUs of server and generator have
// used so far, read at both ends of the measured window.
type usage struct {
	proc              procTimes
	serverCPU, genCPU cpuTimes
	sched             schedTimes
}

func readUsage(srv *server, o *Options) (u usage, err error) {
	if u.proc, err = srv.times(); err != nil {
		return u, err
	}
	if u.serverCPU, err = readCPUTimes(o.ServerCPU); err != nil {
		return u, err
	}
	if u.genCPU, err = readCPUTimes(o.GenCPU); err != nil {
		return u, err
	}
	u.sched, err = srv.sched()
	return u, err
}

func writeSummary(w io.Writer, results []Result, targets []string, o *Options) {
	med := map[string]Result{}
	srvShare, genShare := map[string]float64{}, map[string]float64{} // of a core, during traffic
	for _, target := range targets {
		var m Result
		m.Target = target
		pick := func(f func(Result) float64) float64 { return medianOf(results, target, f) }
		m.PPS = pick(func(r Result) float64 { return r.PPS })
		m.OfferedPPS = pick(func(r Result) float64 { return r.OfferedPPS })
		m.Gbps = pick(func(r Result) float64 { return r.Gbps })
		m.CPUPerMpkt = pick(func(r Result) float64 { return r.CPUPerMpkt })
		m.HandshakesPerSec = pick(func(r Result) float64 { return r.HandshakesPerSec })
		m.Loss = pick(func(r Result) float64 { return r.Loss })
		m.IdleRSSPerPeer = pick(func(r Result) float64 { return r.IdleRSSPerPeer })
		med[target] = m
		srvShare[target] = pick(func(r Result) float64 { return r.ServerCPUSeconds / r.Seconds })
		genShare[target] = pick(func(r Result) float64 { return r.GenCPUSeconds / r.Seconds })
	}
	fmt.Fprintf(w, "\nmedians: %d clients, %d B UDP payload (%d B inner IP), %v per run, server on %s, generator on %s, %s generator%s\n",
		o.Clients, o.PayloadSize, 28+o.PayloadSize, o.Duration, cpuName(o.ServerCPU), cpuName(o.GenCPU), o.Generator, genThreads(o))
	if o.IngressOnServer {
		fmt.Fprintf(w, "server port's receive work on %s (ovfwd: p0's NAPI thread pinned there; openvpn: RPS)\n", cpuName(o.ServerCPU))
	} else {
		fmt.Fprintf(w, "server port's receive work on the generator's CPU (the veth runs it in the sender's softirq)\n")
	}
	fmt.Fprintf(w, "each server: a session (scheduler autogroup) of its own, data path at nice %d (ovfwd's workers; openvpn's nice option)\n", runner.WorkerNice)
	fmt.Fprintf(w, "pkt/s, Gb/s, cpu-s/Mpkt, srv-cpu: over the offered window only (sink count and the server's utime+stime read as the generator starts and stops; sealing ahead is before it); loss: offered vs delivered by the end of a %v drain after it (each run's line shows the drain)\n", drainWait)
	fmt.Fprintf(w, "%-8s %12s %12s %9s %13s %14s %8s %12s %8s %8s\n", "target", "offered/s", "pkt/s", "Gb/s", "cpu-s/Mpkt", "handshakes/s", "loss", "rss/peer", "gen-cpu", "srv-cpu")
	for _, target := range targets {
		m := med[target]
		fmt.Fprintf(w, "%-8s %12.0f %12.0f %9.3f %13.2f %14.0f %7.1f%% %10.0f B %7.0f%% %7.0f%%\n",
			target, m.OfferedPPS, m.PPS, m.Gbps, m.CPUPerMpkt, m.HandshakesPerSec, 100*m.Loss, m.IdleRSSPerPeer,
			100*genShare[target], 100*srvShare[target])
	}
	fmt.Fprintln(w, "(offered well above pkt/s with srv-cpu near 100%: the server was the limit; offered close to pkt/s with gen-cpu near 100%: the generator was)")
	if o.ServerCPU >= 0 {
		writeSplit(w, results, targets, o)
	}
	ratio := func(x, y float64) float64 {
		if y == 0 {
			return 0
		}
		return x / y
	}
	for _, vs := range [][2]string{{TargetOvfwd, TargetOpenVPN}, {TargetOvfwdB, TargetOpenVPN}, {TargetOvfwdB, TargetOvfwd}} {
		if !slices.Contains(targets, vs[0]) || !slices.Contains(targets, vs[1]) {
			continue
		}
		a, b := med[vs[0]], med[vs[1]]
		fmt.Fprintf(w, "%s/%s: %.2fx pkt/s, %.2fx CPU per packet, %.2fx handshakes/s\n", vs[0], vs[1],
			ratio(a.PPS, b.PPS), ratio(a.CPUPerMpkt, b.CPUPerMpkt), ratio(a.HandshakesPerSec, b.HandshakesPerSec))
	}
}

// selfCPUSeconds is this process's user+system time so far.
func selfCPUSeconds() float64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func cpuName(cpu int) string {
	if cpu < 0 {
		return "any CPU"
	}
	return fmt.Sprintf("cpu %d", cpu)
}

func genThreads(o *Options) string {
	if o.Generator == GenRaw && o.PerClientPPS == 0 {
		return fmt.Sprintf(" (%d threads, up to %d MB sealed ahead)", o.GenThreads, max(0, o.GenPresealMB))
	}
	if o.Generator == GenRaw {
		return fmt.Sprintf(" (%d threads, paced)", o.GenThreads)
	}
	return ""
}

// medianOf is the median of f over target's results.
func medianOf(results []Result, target string, f func(Result) float64) float64 {
	var v []float64
	for _, r := range results {
		if r.Target == target {
			v = append(v, f(r))
		}
	}
	return median(v)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// ovfwdCounters summarises the daemon's non-zero counters.
func ovfwdCounters(sock string) string {
	st, err := status.Fetch(sock, time.Second)
	if err != nil {
		return "status: " + err.Error()
	}
	var b strings.Builder
	for _, p := range st.Ports {
		fmt.Fprintf(&b, "[%s rx %d tx %d", p.Name, p.Rx.Packets, p.Tx.Packets)
		writeCounters(&b, p.Backend)
		b.WriteString("] ")
	}
	b.WriteString("[drops")
	writeCounters(&b, st.Drops)
	b.WriteString("] ")
	if st.VPN != nil {
		b.WriteString("[vpn drops")
		writeCounters(&b, st.VPN.Drops)
		b.WriteString("]")
	}
	return b.String()
}

func writeCounters(b *strings.Builder, c status.Counters) {
	names := slices.Sorted(maps.Keys(c))
	for _, n := range names {
		if c[n] != 0 {
			fmt.Fprintf(b, " %s=%d", n, c[n])
		}
	}
}

// writeSplit prints, per target, the medians of where the server's CPU went
// over the offered window (CPUSplit) and the process's user and system
// time per delivered packet.
func writeSplit(w io.Writer, results []Result, targets []string, o *Options) {
	fmt.Fprintf(w, "\nwhere %s went (the server's CPU; /proc/PID/stat utime, stime and /proc/stat %s over the offered window; medians):\n",
		cpuName(o.ServerCPU), strings.ReplaceAll(cpuName(o.ServerCPU), " ", ""))
	fmt.Fprintf(w, "%-8s %9s %9s %12s %12s %9s %9s %9s %9s %14s\n", "target", "srv-user", "srv-sys", "user ns/pkt", "sys ns/pkt", "waiting", "softirq", "idle", "other", "gen-softirq")
	for _, target := range targets {
		pick := func(f func(Result) float64) float64 { return medianOf(results, target, f) }
		perPkt := func(share float64, r Result) float64 {
			if r.Delivered == 0 {
				return 0
			}
			return share * r.Seconds / float64(r.Delivered) * 1e9
		}
		fmt.Fprintf(w, "%-8s %8.0f%% %8.0f%% %12.0f %12.0f %8.0f%% %8.0f%% %8.0f%% %8.0f%% %13.0f%%\n", target,
			100*pick(func(r Result) float64 { return r.ServerSplit.ProcUser }),
			100*pick(func(r Result) float64 { return r.ServerSplit.ProcSystem }),
			pick(func(r Result) float64 { return perPkt(r.ServerSplit.ProcUser, r) }),
			pick(func(r Result) float64 { return perPkt(r.ServerSplit.ProcSystem, r) }),
			100*pick(func(r Result) float64 { return r.ServerSplit.Wait }),
			100*pick(func(r Result) float64 { return r.ServerSplit.Softirq }),
			100*pick(func(r Result) float64 { return r.ServerSplit.Idle }),
			100*pick(func(r Result) float64 { return r.ServerSplit.Other }),
			100*pick(func(r Result) float64 { return r.GenSplit.Softirq }))
	}
	fmt.Fprintln(w, "(srv-user, srv-sys: the server process; waiting: its threads runnable but waiting for a CPU (schedstat), high when other load starved it; softirq: every softirq tick on its CPU, also those inside the server's system calls, which srv-sys counts too; idle: its CPU idle, what is left when the generator is the limit; other: busy time that was not the server's; gen-softirq: the generator's CPU in softirq, where the veth runs the server port's receive work)")
}
