package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// Options control Run.
type Options struct {
	Duration time.Duration // traffic time once the lab is up; 0: until Ctrl-C (or ctx)
	// Keep leaves the lab up when Run returns: namespaces, the `ovfwd run`
	// appliance and the openvpn client keep running (their PIDs are
	// printed); Clean (`ovfwd lab -clean`) or the next run removes them.
	Keep bool
	Out  io.Writer // progress and counters; nil: os.Stdout
	// Binary is the ovfwd executable run as the appliance (`ovfwd run`);
	// empty: this process's own executable.
	Binary string
	// Driver is the appliance ports' backend: "" or "afxdp" (AF_XDP in
	// copy mode on the veths). "mlx5-sim" is not wired into this lab yet:
	// appliance/testbed/simlab runs the in-process engine on the model.
	Driver string
	// NoVPN leaves out the openvpn client (it is also left out, with a
	// note, when openvpn is not installed).
	NoVPN bool
}

// Test hooks: the running lab, and its outcome.
var (
	testHookRunning func(*running)
	testHookDone    func(*outcome)
)

// running is a lab that is up.
type running struct {
	st     *state
	tp     *Topology
	daemon *child
	client *child // nil without VPN
	sock   string

	daemonErr error // how the appliance exited (nil: status 0), set by tearDown
}

// outcome is what a run saw.
type outcome struct {
	traffic        *traffic
	tunV4, tunV6   netip.Addr // tun0's addresses (zero without VPN)
	first, last    *status.Snapshot
	countersPrints int
}

// Run builds the lab — host A ⇄ appliance ⇄ host B — and runs the real
// appliance in it: `ovfwd run` from the embedded lab.toml (router mode,
// IPv4 and IPv6, VPN with a PKI made for this run). Host A also runs a
// stock openvpn client. Run then drives routed traffic A→B and tunnel
// traffic from A's tun0 to B's addresses behind the tunnel, and prints the
// appliance's counters once a second until Duration, ctx or an interrupt.
// Unless Keep, it then stops everything it started and removes the
// namespaces and its work directory. Labs of earlier runs whose process is
// gone (crashed or kept) are removed first. Run fails when the lab could
// not be built or the traffic checks failed.
func Run(ctx context.Context, o Options) (err error) {
	out := o.Out
	if out == nil {
		out = os.Stdout
	}
	out = SyncWriter(out) // pings, counters and transfers write concurrently
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	switch o.Driver {
	case "", "afxdp":
	default:
		return fmt.Errorf("lab: driver %q is not supported by this lab yet (afxdp only)", o.Driver)
	}
	bin, err := ovfwdBinary(o.Binary)
	if err != nil {
		return err
	}
	if err := Clean(out); err != nil {
		fmt.Fprintf(out, "lab: cleaning earlier labs: %v\n", err)
	}
	withVPN := !o.NoVPN
	openvpn, lookErr := exec.LookPath("openvpn")
	if withVPN && lookErr != nil {
		fmt.Fprintf(out, "lab: openvpn is not installed (make deps installs it): no VPN client, no tunnel traffic\n")
		withVPN = false
	}

	lr, err := setUp(ctx, out, bin, o.Keep)
	if lr != nil {
		// Keep leaves a lab that came up, even one whose traffic checks
		// failed (that is when one wants to look inside).
		keep := o.Keep && err == nil
		defer func() {
			if keep {
				printKept(out, lr)
				return
			}
			err = errors.Join(err, tearDown(out, lr))
		}()
	}
	if err != nil {
		return err
	}
	res := &outcome{}
	if testHookDone != nil {
		defer func() { testHookDone(res) }()
	}
	if withVPN {
		server := netip.AddrPortFrom(lr.tp.Config.Ports[0].Addrs[0].Addr(), lr.tp.Config.VPNPort)
		profile, err := clientProfile(filepath.Join(lr.st.Dir, "state", "pki"), server)
		if err != nil {
			return err
		}
		if lr.client, err = startChild(lr.st, lr.tp.A, "openvpn", filepath.Join(lr.st.Dir, "openvpn.log"), o.Keep,
			openvpn, "--config", profile); err != nil {
			return err
		}
		if res.tunV4, res.tunV6, err = waitTunnel(ctx, lr.tp.A, lr.client, 30*time.Second); err != nil {
			return err
		}
		fmt.Fprintf(out, "lab: openvpn client %s (pid %d) up on host A: tun0 %s, %s\n", clientName, lr.client.pid(), res.tunV4, res.tunV6)
	}
	if testHookRunning != nil {
		testHookRunning(lr)
	}
	// The timed traffic measures the lab once it carries traffic, not how
	// fast it gets there: first every path must answer (see waitPaths).
	paths := pathsFrom(lr.tp.Config, withVPN)
	if err := waitPaths(ctx, lr.tp.A, paths, pathTimeout, out); err != nil {
		return fmt.Errorf("%w\n%s", err, lr.tails(withVPN))
	}
	if o.Keep {
		printEnter(out, lr)
	}

	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	tr := startTraffic(ctx, lr.tp, lr.tp.Config, out)
	if withVPN {
		tr.startTunnel(ctx, lr.tp, tunnelTargets(lr.tp.Config), out)
	}
	res.traffic = tr
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	start := time.Now()
	prev, _ := status.Fetch(lr.sock, time.Second)
	res.first = prev
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case now := <-tk.C:
			cur, err := status.Fetch(lr.sock, time.Second)
			if err != nil {
				fmt.Fprintf(out, "lab: status: %v\n", err)
				if lr.daemon.done() {
					return fmt.Errorf("lab: ovfwd exited (%v):\n%s", lr.daemon.err, lr.daemon.logTail(3000))
				}
				continue
			}
			if prev != nil {
				printCounters(out, now.Sub(start), prev, cur, tr)
				res.countersPrints++
			}
			prev, res.last = cur, cur
		}
	}
	tr.wait()
	if s, err := status.Fetch(lr.sock, time.Second); err == nil {
		res.last = s
	}
	fmt.Fprintf(out, "lab: %s\n", tr.summary())
	if err := tr.err(); err != nil {
		return fmt.Errorf("%w\n%s", err, lr.tails(withVPN))
	}
	return nil
}

// tails are the ends of the appliance's and the client's logs, for a
// failed run (the lab removes them unless Keep).
func (lr *running) tails(withVPN bool) string {
	s := fmt.Sprintf("lab: ovfwd log ends:\n%s", lr.daemon.logTail(2000))
	if withVPN && lr.client != nil {
		s += fmt.Sprintf("\nlab: openvpn client log ends:\n%s", lr.client.logTail(2000))
	}
	return s
}

// setUp makes the work directory, the PKI, the config and the
// namespaces, and starts the appliance; the returned lab (non-nil once
// anything was made) must be torn down even when err is set.
func setUp(ctx context.Context, out io.Writer, bin string, keep bool) (*running, error) {
	st := &state{LabPID: os.Getpid(), Dir: filepath.Join(StateRoot, strconv.Itoa(os.Getpid()))}
	var err error
	if st.LabStart, err = procStart(st.LabPID); err != nil {
		return nil, err
	}
	// The appliance runs as packaging/ovfwd.service runs it: the work
	// directory is laid out for the unit's user (config readable, state/
	// and run/ its own), so StateRoot lets that user through.
	u, err := unit.Load()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(StateRoot, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(StateRoot, 0o755); err != nil {
		return nil, err
	}
	if err := u.Layout(st.Dir); err != nil {
		return nil, err
	}
	lr := &running{st: st, sock: filepath.Join(st.Dir, "run", "ovfwd.sock")}
	if err := st.save(); err != nil {
		return lr, err
	}
	if err := pki.Init(filepath.Join(st.Dir, "state", "pki")); err != nil {
		return lr, err
	}
	if err := u.Layout(st.Dir); err != nil { // the PKI is the daemon's state
		return lr, err
	}
	if bin, err = u.Executable(bin, st.Dir); err != nil {
		return lr, err
	}
	cfgPath, cfg, err := writeApplianceConfig(st.Dir)
	if err != nil {
		return lr, err
	}
	// Build names its namespaces as it makes them; record them all before
	// anything runs in them (on failure Build removes what it made).
	tp, err := Build(topologyFor(cfg))
	if err != nil {
		return lr, err
	}
	lr.tp = tp
	st.Namespaces = []string{tp.A.Name, tp.App.Name, tp.B.Name}
	if err := st.save(); err != nil {
		return lr, err
	}
	fmt.Fprintf(out, "lab: router mode, IPv4 + IPv6, VPN on udp/%d; %s\n", tp.Config.VPNPort, tp.Names())
	// Without Keep the appliance gets SIGTERM if the lab dies; either way
	// its PID is in state.json for the next run's Clean.
	if lr.daemon, err = startChild(st, tp.App, "ovfwd", filepath.Join(st.Dir, "ovfwd.log"), keep, u.Argv(bin, "run", "-c", cfgPath)...); err != nil {
		return lr, err
	}
	if err := u.Verify(lr.daemon.pid()); err != nil {
		return lr, fmt.Errorf("%v\n%s", err, lr.daemon.logTail(3000))
	}
	fmt.Fprintf(out, "lab: ovfwd runs as packaging/ovfwd.service runs it: %s\n", u)
	// Ready: every worker polls its queues (before that, the client's
	// first packets would wait unread).
	s, err := waitStatus(ctx, lr.sock, lr.daemon, 20*time.Second, func(s *status.Snapshot) bool { return s.Ready && s.VPN != nil })
	if err != nil {
		return lr, err
	}
	var modes []string
	for _, p := range s.Ports {
		for _, q := range p.Queues {
			modes = append(modes, fmt.Sprintf("%s q%d %s", p.Name, q.Queue, q.Mode))
		}
	}
	fmt.Fprintf(out, "lab: ovfwd run (pid %d) up, config %s, log %s\nlab: queues: %s\n", lr.daemon.pid(), cfgPath, lr.daemon.log, strings.Join(modes, "; "))
	return lr, nil
}

// tearDown stops the client, then the appliance (SIGTERM: clients get
// RESTART, XDP programs are detached), then removes the namespaces and
// the work directory. The appliance must exit cleanly.
func tearDown(out io.Writer, lr *running) error {
	var errs []error
	if lr.client != nil {
		_ = lr.client.stop(3 * time.Second) // openvpn exits 0 on SIGTERM; its status is not ours to judge
	}
	if lr.daemon != nil {
		if lr.daemonErr = lr.daemon.stop(6 * time.Second); lr.daemonErr != nil {
			err := lr.daemonErr
			errs = append(errs, fmt.Errorf("lab: ovfwd did not stop cleanly: %v\n%s", err, lr.daemon.logTail(2000)))
		}
	}
	errs = append(errs, lr.st.remove())
	if lr.tp != nil {
		fmt.Fprintf(out, "lab: removed %s\n", lr.tp.Names())
	}
	return errors.Join(errs...)
}

func printEnter(out io.Writer, lr *running) {
	c := lr.tp.Config
	fmt.Fprintf(out, "lab: enter with\n  sudo ip netns exec %s bash    # host A (%s)\n  sudo ip netns exec %s bash    # appliance (ovfwd status -s %s)\n  sudo ip netns exec %s bash    # host B (%s)\n",
		lr.tp.A.Name, addrList(c.HostA), lr.tp.App.Name, lr.sock, lr.tp.B.Name, addrList(c.HostB))
}

func printKept(out io.Writer, lr *running) {
	var procs []string
	for _, p := range lr.st.Procs {
		procs = append(procs, fmt.Sprintf("%s pid %d", p.Name, p.PID))
	}
	fmt.Fprintf(out, "lab: left up: %s; still running: %s (logs in %s)\n", lr.tp.Names(), strings.Join(procs, ", "), lr.st.Dir)
	printEnter(out, lr)
	fmt.Fprintf(out, "lab: stop and remove it with `sudo ovfwd lab -clean` (or run the lab again)\n")
}

func addrList(h Host) string {
	var s []string
	for _, a := range append(append([]netip.Prefix{}, h.Addrs...), h.Behind...) {
		s = append(s, a.Addr().String())
	}
	return strings.Join(s, ", ")
}

// SyncWriter serialises writes to w from several goroutines (Run's
// pings, counters and transfers, simlab's too).
func SyncWriter(w io.Writer) io.Writer { return &lockedWriter{w: w} }

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
