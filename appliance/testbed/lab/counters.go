package lab

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// printCounters prints one second of the appliance's counters, from two
// status snapshots: per port pps and Mb/s, drops by reason (engine and
// port backends, totals), tunnel pps and every VPN peer.
func printCounters(out io.Writer, elapsed time.Duration, prev, cur *status.Snapshot, tr *traffic) {
	secs := cur.Taken.Sub(prev.Taken).Seconds()
	if secs <= 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%4.0fs]", elapsed.Seconds())
	for i, p := range cur.Ports {
		if i >= len(prev.Ports) {
			break
		}
		q := prev.Ports[i]
		fmt.Fprintf(&b, " %s rx %6.0f pps %7.2f Mb/s tx %6.0f pps %7.2f Mb/s |", p.Name,
			rate(p.Rx.Packets, q.Rx.Packets, secs), rate(p.Rx.Bytes, q.Rx.Bytes, secs)*8/1e6,
			rate(p.Tx.Packets, q.Tx.Packets, secs), rate(p.Tx.Bytes, q.Tx.Bytes, secs)*8/1e6)
	}
	var drops []string
	add := func(prefix string, c status.Counters) {
		for name, n := range c {
			if n > 0 {
				drops = append(drops, fmt.Sprintf("%s%s=%d", prefix, name, n))
			}
		}
	}
	add("", cur.Drops)
	for _, p := range cur.Ports {
		add(p.Name+":", p.Backend)
	}
	if cur.VPN != nil {
		add("vpn:", cur.VPN.Drops)
	}
	sort.Strings(drops)
	fmt.Fprintf(&b, " drops: %s", orNone(strings.Join(drops, " ")))
	fmt.Fprintf(&b, " | udp %d/%d", tr.udp.Received.Load(), tr.udp.Sent.Load())
	if cur.VPN != nil {
		var tun float64
		for _, p := range cur.VPN.Peers {
			var q status.VPNPeer
			if qp := findPeer(prev, p.Name, p.Real); qp != nil {
				q = *qp
			}
			tun += rate(p.Rx.Packets, q.Rx.Packets, secs) + rate(p.Tx.Packets, q.Tx.Packets, secs)
		}
		fmt.Fprintf(&b, " | tunnel %.0f pps, %d peers", tun, len(cur.VPN.Peers))
		for _, p := range cur.VPN.Peers {
			seen := "never"
			if !p.LastSeen.IsZero() {
				seen = cur.Taken.Sub(p.LastSeen).Round(time.Millisecond).String() + " ago"
			}
			fmt.Fprintf(&b, "\n        vpn %s real %s addrs %s rx %d pkts %s tx %d pkts %s last seen %s",
				p.Name, p.Real, strings.Join(p.Addrs, ","), p.Rx.Packets, bytesText(p.Rx.Bytes), p.Tx.Packets, bytesText(p.Tx.Bytes), seen)
		}
	}
	fmt.Fprintln(out, b.String())
}

// rate is a counter's per-second change; a counter that went backwards
// (the appliance restarted) counts as zero.
func rate(cur, prev uint64, secs float64) float64 {
	if cur < prev {
		return 0
	}
	return float64(cur-prev) / secs
}

func findPeer(s *status.Snapshot, name, real string) *status.VPNPeer {
	if s == nil || s.VPN == nil {
		return nil
	}
	for i := range s.VPN.Peers {
		if p := &s.VPN.Peers[i]; p.Name == name && p.Real == real {
			return p
		}
	}
	return nil
}

func bytesText(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
