package simlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/fwd"
)

// Options control Run.
type Options struct {
	Duration time.Duration // 0: until Ctrl-C (or ctx)
	Out      io.Writer     // progress and counters; nil: os.Stdout
	Config   *lab.Config   // nil: lab.DefaultConfig() (router, IPv4 and IPv6)
}

// Run builds the lab, starts ovfwd on two mlx5-sim ports wired into it,
// sends traffic between the hosts (pings, a paced UDP flow, back-to-back
// checksummed TCP transfers) and prints counters once a second until
// Duration, ctx or an interrupt. It then stops the appliance, reports the
// traffic and anything the models met or still held (an error), and
// removes the namespaces — also when it fails part way.
func Run(ctx context.Context, o Options) (err error) {
	out := o.Out
	if out == nil {
		out = os.Stdout
	}
	out = lab.SyncWriter(out)
	cfg := lab.DefaultConfig()
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
		fmt.Fprintf(out, "simlab: removed %d stale namespaces of an earlier run: %s\n", len(stale), strings.Join(stale, " "))
	}
	tp, err := Build(cfg)
	if err != nil {
		return err
	}
	defer func() {
		tp.Destroy()
		fmt.Fprintf(out, "simlab: removed %s\n", tp.Names())
	}()
	app, err := StartAppliance(tp.App, []string{IfWireA, IfWireB}, cfg)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			err = errors.Join(err, app.Close())
		}
	}()
	fmt.Fprintf(out, "simlab: %s on mlx5-sim (%d queue(s) per port), %s\n", modeName(cfg.Mode), len(app.Engine.Workers()), tp.Names())

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
	tr.wg.Wait()
	fmt.Fprintf(out, "simlab: %s\n", tr.summary())
	closed = true
	if cerr := app.Close(); cerr != nil {
		return fmt.Errorf("simlab: the model reports: %w", cerr)
	}
	for i, d := range app.Devices {
		fmt.Fprintf(out, "simlab: port %d: model drops before an RQ %+v; closed with no errors and nothing leaked\n", i, d.Stats)
	}
	return tr.err()
}

func modeName(m fwd.Mode) string {
	if m == fwd.ModeBridge {
		return "bridge"
	}
	return "router"
}

// traffic is what Run drives between the hosts, A to B.
type traffic struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	pings   []string
	pingBad int
	udp     lab.UDPFlow
	tcp     lab.Transfers
}

const (
	simUDPPPS     = 2000
	simTCPBytes   = 8 << 20
	simUDPMaxSent = 1 << 24
)

func startTraffic(ctx context.Context, tp *Topology, cfg lab.Config, out io.Writer) *traffic {
	tr := &traffic{}
	for _, dst := range cfg.HostB.Addrs {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			res, err := tp.A.Run("ping", "-c", "3", "-i", "0.2", "-W", "2", dst.Addr().String())
			line := fmt.Sprintf("ping %s: ok", dst.Addr())
			tr.mu.Lock()
			if err != nil {
				line = fmt.Sprintf("ping %s: FAILED: %s", dst.Addr(), lastLine(res))
				tr.pingBad++
			}
			tr.pings = append(tr.pings, line)
			tr.mu.Unlock()
			fmt.Fprintf(out, "simlab: %s\n", line)
		}()
	}
	if len(cfg.HostB.Addrs) == 0 {
		return tr
	}
	dst := cfg.HostB.Addrs[0].Addr()
	tr.wg.Add(2)
	go func() {
		defer tr.wg.Done()
		_ = tr.udp.Run(ctx, tp.A, tp.B, dst, simUDPPPS, simUDPMaxSent)
	}()
	go func() {
		defer tr.wg.Done()
		lab.TransferLoop(ctx, tp.A, tp.B, []netip.Addr{dst}, simTCPBytes, &tr.mu, &tr.tcp)
	}()
	return tr
}

func (tr *traffic) summary() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return fmt.Sprintf("%s; udp %d sent %d received; %s",
		strings.Join(tr.pings, "; "), tr.udp.Sent.Load(), tr.udp.Received.Load(), tr.tcp.Summary("tcp", simTCPBytes))
}

// err fails the run when traffic that should cross the lab did not.
func (tr *traffic) err() error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.pingBad > 0 || tr.tcp.Bad > 0 {
		return fmt.Errorf("simlab: %d pings and %d TCP transfers failed", tr.pingBad, tr.tcp.Bad)
	}
	return nil
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
	for _, w := range app.Wires {
		st := w.Stats()
		for _, c := range []struct {
			what string
			n    uint64
		}{{"rx_truncated", st.RxTruncated}, {"rx_kernel", st.RxKernelDrops}, {"rx_errors", st.RxErrors},
			{"tx_ring", st.TxDropped}, {"tx_errors", st.TxErrors}} {
			if c.n > 0 {
				fmt.Fprintf(&b, " wire %s:%s=%d", w.Name(), c.what, c.n)
				any = true
			}
		}
	}
	if !any {
		b.WriteString(" none")
	}
	fmt.Fprintf(&b, " | udp %d/%d", tr.udp.Received.Load(), tr.udp.Sent.Load())
	fmt.Fprintln(out, b.String())
}
