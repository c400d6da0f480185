package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// traffic is what Run drives: routed A→B traffic (pings over IPv4 and
// IPv6, a paced UDP flow, back-to-back checksummed TCP transfers) and,
// with the VPN, tunnel traffic from host A's tun0 to host B's addresses
// behind the tunnel (pings, then alternating IPv4/IPv6 TCP transfers).
type traffic struct {
	wg  sync.WaitGroup
	udp UDPFlow

	mu      sync.Mutex
	pings   []pingResult
	plain   Transfers
	tunnel  Transfers
	tunnels bool // tunnel traffic was started
}

type pingResult struct {
	dst    netip.Addr
	tunnel bool
	ok     bool
	detail string
}

const (
	labUDPPPS      = 2000
	labUDPMaxSent  = 1 << 24
	labTCPBytes    = 8 << 20
	labTunnelBytes = 4 << 20
)

// path is an address host A must reach before the timed traffic starts.
type path struct {
	dst    netip.Addr
	tunnel bool
}

func (p path) String() string {
	if p.tunnel {
		return p.dst.String() + " (tunnel)"
	}
	return p.dst.String() + " (routed)"
}

// pathsFrom is what Run's traffic goes to: host B's addresses, and with
// the VPN those behind its tunnel.
func pathsFrom(cfg Config, withVPN bool) []path {
	var out []path
	for _, a := range cfg.HostB.Addrs {
		out = append(out, path{dst: a.Addr()})
	}
	if withVPN {
		for _, a := range tunnelTargets(cfg) {
			out = append(out, path{dst: a, tunnel: true})
		}
	}
	return out
}

// pathTimeout bounds waitPaths: three of the appliance's resolution
// attempts (neighbour_timeout, 3 s each) and then some.
const pathTimeout = 10 * time.Second

// waitPaths waits until every path answers a ping from ns, at most
// timeout for all. A freshly built lab has resolved nothing: the hosts
// and the appliance must resolve their next hops (ARP/ND) and the
// client's tunnel must carry its first packets. A real client rides that
// out with its own retransmissions (TCP retries a SYN for about two
// minutes); the lab's transfers give up after 5 s, so it lets the paths
// converge first, and says how long each took. Each try is one echo
// (ping stops at the first error, such as the appliance's host
// unreachable when a resolution attempt failed); a path that does not
// answer in time fails the run.
func waitPaths(ctx context.Context, ns *netns.NS, paths []path, timeout time.Duration, out io.Writer) error {
	errs := make([]error, len(paths))
	took := make([]time.Duration, len(paths))
	start := time.Now()
	deadline := start.Add(timeout)
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res string
			var err error
			for try := 0; try < 1000 && ctx.Err() == nil; try++ {
				if res, err = ns.Run("ping", "-n", "-c", "1", "-W", "1", p.dst.String()); err == nil {
					took[i] = time.Since(start)
					return
				}
				if !time.Now().Before(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			errs[i] = fmt.Errorf("lab: %s: no answer from host A in %v: %s", p, timeout, lastLine(res))
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var s []string
	for i, p := range paths {
		s = append(s, fmt.Sprintf("%s %v", p, took[i].Round(time.Millisecond)))
	}
	fmt.Fprintf(out, "lab: paths answer: %s\n", strings.Join(s, ", "))
	return nil
}

func startTraffic(ctx context.Context, tp *Topology, cfg Config, out io.Writer) *traffic {
	tr := &traffic{}
	for _, dst := range cfg.HostB.Addrs {
		tr.ping(tp, dst.Addr(), false, out)
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
		TransferLoop(ctx, tp.A, tp.B, []netip.Addr{dst}, labTCPBytes, &tr.mu, &tr.plain)
	}()
	return tr
}

// startTunnel adds the tunnel traffic: host A's routes to dsts go through
// tun0 (the pushed routes), so these pings and transfers are VPN traffic.
func (tr *traffic) startTunnel(ctx context.Context, tp *Topology, dsts []netip.Addr, out io.Writer) {
	if len(dsts) == 0 {
		return
	}
	tr.mu.Lock()
	tr.tunnels = true
	tr.mu.Unlock()
	for _, dst := range dsts {
		tr.ping(tp, dst, true, out)
	}
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		TransferLoop(ctx, tp.A, tp.B, dsts, labTunnelBytes, &tr.mu, &tr.tunnel)
	}()
}

func (tr *traffic) ping(tp *Topology, dst netip.Addr, tunnel bool, out io.Writer) {
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		res, err := tp.A.Run("ping", "-c", "3", "-i", "0.2", "-W", "2", dst.String())
		r := pingResult{dst: dst, tunnel: tunnel, ok: err == nil}
		if err != nil {
			r.detail = lastLine(res)
		}
		tr.mu.Lock()
		tr.pings = append(tr.pings, r)
		tr.mu.Unlock()
		fmt.Fprintf(out, "lab: %s\n", r)
	}()
}

func (r pingResult) String() string {
	via := "routed"
	if r.tunnel {
		via = "tunnel"
	}
	if r.ok {
		return fmt.Sprintf("ping %s (%s): ok", r.dst, via)
	}
	return fmt.Sprintf("ping %s (%s): FAILED: %s", r.dst, via, r.detail)
}

func (tr *traffic) wait() { tr.wg.Wait() }

func (tr *traffic) summary() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var parts []string
	for _, p := range tr.pings {
		parts = append(parts, p.String())
	}
	parts = append(parts, fmt.Sprintf("udp %d sent %d received", tr.udp.Sent.Load(), tr.udp.Received.Load()))
	parts = append(parts, tr.plain.Summary("routed tcp", labTCPBytes))
	if tr.tunnels {
		parts = append(parts, tr.tunnel.Summary("tunnel tcp", labTunnelBytes))
	}
	return strings.Join(parts, "; ")
}

// err is the run's verdict: every ping answered, no transfer failed, and
// the UDP flow got through.
func (tr *traffic) err() error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var errs []error
	for _, p := range tr.pings {
		if !p.ok {
			errs = append(errs, errors.New(p.String()))
		}
	}
	if tr.plain.Bad > 0 {
		errs = append(errs, fmt.Errorf("lab: %d routed TCP transfers failed: %v", tr.plain.Bad, tr.plain.LastErr))
	}
	if tr.tunnel.Bad > 0 {
		errs = append(errs, fmt.Errorf("lab: %d tunnel TCP transfers failed: %v", tr.tunnel.Bad, tr.tunnel.LastErr))
	}
	if tr.udp.Sent.Load() > 0 && tr.udp.Received.Load() == 0 {
		errs = append(errs, fmt.Errorf("lab: none of %d UDP datagrams arrived", tr.udp.Sent.Load()))
	}
	return errors.Join(errs...)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
