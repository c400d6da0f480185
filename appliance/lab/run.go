package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/netns"
	"github.com/ovfwd/ovfwd/fwd"
)

// testHookStarted lets a test see the running appliance.
var testHookStarted func(*Appliance)

// Options control Run.
type Options struct {
	Duration time.Duration // 0: until Ctrl-C (or ctx)
	Keep     bool          // leave the namespaces up when Run returns
	Out      io.Writer     // progress and counters; nil: os.Stdout
	Config   *Config       // nil: DefaultConfig()
}

// Run builds the lab, starts ovfwd on the appliance's ports, sends traffic
// between the hosts and prints counters once a second until Duration, ctx
// or an interrupt, then removes everything it made (unless Keep). Stale
// namespaces of a crashed earlier run are removed first.
func Run(ctx context.Context, o Options) error {
	out := o.Out
	if out == nil {
		out = os.Stdout
	}
	out = &lockedWriter{w: out} // pings, counters and port logs write concurrently
	cfg := DefaultConfig()
	if o.Config != nil {
		cfg = *o.Config
	}
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	if stale := netns.Sweep(); len(stale) > 0 {
		fmt.Fprintf(out, "lab: removed %d stale namespaces of an earlier run: %s\n", len(stale), strings.Join(stale, " "))
	}
	tp, err := Build(cfg)
	if err != nil {
		return err
	}
	defer func() {
		if o.Keep {
			fmt.Fprintf(out, "lab: left up (%s); ovfwd has stopped, so nothing forwards until it runs again. `ip netns del` each to remove, or run the lab again.\n", tp.Names())
			return
		}
		tp.Destroy()
		fmt.Fprintf(out, "lab: removed %s\n", tp.Names())
	}()
	logf := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	app, err := StartAppliance(tp.App, []string{ifAppA, ifAppB}, cfg, logf)
	if err != nil {
		return err
	}
	defer app.Close()
	if testHookStarted != nil {
		testHookStarted(app)
	}
	fmt.Fprintf(out, "lab: %s mode, %s\n", modeName(cfg.Mode), tp.Names())
	if o.Keep {
		fmt.Fprintf(out, "lab: enter with\n  sudo ip netns exec %s bash    # host A (%s)\n  sudo ip netns exec %s bash    # appliance\n  sudo ip netns exec %s bash    # host B (%s)\n",
			tp.A.Name, addrList(cfg.HostA), tp.App.Name, tp.B.Name, addrList(cfg.HostB))
	}

	tr := startTraffic(ctx, tp, cfg, out)
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	prev := app.Engine.Stats()
	last := time.Now()
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case now := <-tk.C:
			cur := app.Engine.Stats()
			printCounters(out, app, prev, cur, now.Sub(last).Seconds(), tr)
			prev, last = cur, now
		}
	}
	tr.wait()
	fmt.Fprintf(out, "lab: %s\n", tr.summary())
	return nil
}

func modeName(m fwd.Mode) string {
	if m == fwd.ModeBridge {
		return "bridge"
	}
	return "router"
}

func addrList(h Host) string {
	var s []string
	for _, a := range h.Addrs {
		s = append(s, a.Addr().String())
	}
	return strings.Join(s, ", ")
}

// traffic is what Run drives between the hosts: pings (IPv4 and IPv6), a
// paced UDP flow and back-to-back checksummed TCP transfers, A to B.
type traffic struct {
	wg       sync.WaitGroup
	mu       sync.Mutex
	pings    []string
	udp      UDPFlow
	tcpOK    int
	tcpBad   int
	tcpBytes int64
	tcpErr   error
}

const (
	labUDPPPS     = 2000
	labTCPBytes   = 8 << 20
	labUDPMaxSent = 1 << 24
)

func startTraffic(ctx context.Context, tp *Topology, cfg Config, out io.Writer) *traffic {
	tr := &traffic{}
	for _, dst := range cfg.HostB.Addrs {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			res, err := tp.A.Run("ping", "-c", "3", "-i", "0.2", "-W", "2", dst.Addr().String())
			line := fmt.Sprintf("ping %s: ok", dst.Addr())
			if err != nil {
				line = fmt.Sprintf("ping %s: FAILED: %s", dst.Addr(), lastLine(res))
			}
			tr.mu.Lock()
			tr.pings = append(tr.pings, line)
			tr.mu.Unlock()
			fmt.Fprintf(out, "lab: %s\n", line)
		}()
	}
	if len(cfg.HostB.Addrs) == 0 {
		return tr
	}
	dst := cfg.HostB.Addrs[0].Addr()
	tr.wg.Add(2)
	go func() {
		defer tr.wg.Done()
		_ = tr.udp.Run(ctx, tp.A, tp.B, dst, labUDPPPS, labUDPMaxSent)
	}()
	go func() {
		defer tr.wg.Done()
		for ctx.Err() == nil {
			res, err := TCPTransfer(ctx, tp.A, tp.B, dst, labTCPBytes, 30*time.Second)
			if ctx.Err() != nil {
				return // cut short by the end of the run: not a failure
			}
			tr.mu.Lock()
			switch {
			case err != nil:
				tr.tcpBad++
				tr.tcpErr = err
			case res.OK(labTCPBytes):
				tr.tcpOK++
				tr.tcpBytes += res.Bytes
			default:
				tr.tcpBad++
				tr.tcpErr = fmt.Errorf("checksum mismatch after %d bytes", res.Bytes)
			}
			tr.mu.Unlock()
		}
	}()
	return tr
}

func (tr *traffic) wait() { tr.wg.Wait() }

func (tr *traffic) summary() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	s := fmt.Sprintf("%s; udp %d sent %d received; tcp %d transfers of %d MiB ok, %d failed",
		strings.Join(tr.pings, "; "), tr.udp.Sent.Load(), tr.udp.Received.Load(), tr.tcpOK, labTCPBytes>>20, tr.tcpBad)
	if tr.tcpErr != nil {
		s += fmt.Sprintf(" (last: %v)", tr.tcpErr)
	}
	return s
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func printCounters(out io.Writer, app *Appliance, prev, cur fwd.Stats, secs float64, tr *traffic) {
	var b strings.Builder
	for i, p := range cur.Ports {
		q := prev.Ports[i]
		fmt.Fprintf(&b, "%s rx %6.0f pps %7.2f Mb/s tx %6.0f pps %7.2f Mb/s | ", app.Ports[i].Info().Name,
			float64(p.RxPackets-q.RxPackets)/secs, float64(p.RxBytes-q.RxBytes)*8/secs/1e6,
			float64(p.TxPackets-q.TxPackets)/secs, float64(p.TxBytes-q.TxBytes)*8/secs/1e6)
	}
	b.WriteString("drops:")
	any := false
	for r, n := range cur.Drops {
		if n > 0 {
			fmt.Fprintf(&b, " %s=%d", fwd.DropReason(r), n)
			any = true
		}
	}
	for _, p := range app.Ports {
		st := p.Stats()
		for r, n := range st.Drops {
			if n > 0 {
				fmt.Fprintf(&b, " %s:%s=%d", p.Info().Name, fwd.DropReason(r), n)
				any = true
			}
		}
		if k := st.KernelRxRingFull + st.KernelRxDropped; k > 0 {
			fmt.Fprintf(&b, " %s:xsk_rx_dropped=%d", p.Info().Name, k)
			any = true
		}
	}
	if !any {
		b.WriteString(" none")
	}
	ok, failed := app.Mirrored()
	fmt.Fprintf(&b, " | udp %d/%d | neigh mirrored %d (failed %d)", tr.udp.Received.Load(), tr.udp.Sent.Load(), ok, failed)
	fmt.Fprintln(out, b.String())
}

// lockedWriter serialises writes from Run's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
