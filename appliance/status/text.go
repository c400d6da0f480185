package status

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// WriteText prints s for an operator.
func WriteText(w io.Writer, s *Snapshot) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "ovfwd %s, pid %d, up %s, config %s\n", s.Version, s.PID, s.Taken.Sub(s.Started).Round(time.Second), s.Config)
	ready := "ready"
	if !s.Ready {
		ready = "not ready: " + s.NotReady
	}
	fmt.Fprintf(b, "%s\n", ready)
	if dr := s.Drain; dr != nil {
		fmt.Fprintf(b, "draining since %s, %d clients left", dr.Since.Format(time.RFC3339), dr.Peers)
		if !dr.Deadline.IsZero() {
			fmt.Fprintf(b, ", deadline %s", dr.Deadline.Format(time.RFC3339))
		}
		b.WriteString("\n")
	}
	if e := s.Export; e != nil {
		fmt.Fprintf(b, "export: table %d protocol %d: %s\n", e.Table, e.Protocol, orNone(strings.Join(e.Routes, " ")))
		if e.Error != "" {
			fmt.Fprintf(b, "  last error: %s\n", e.Error)
		}
	}
	fmt.Fprintf(b, "mode %s, %d workers (%s polling)", s.Mode, len(s.Workers), s.Poll)
	for _, wk := range s.Workers {
		if wk.CPU >= 0 {
			fmt.Fprintf(b, " q%d→cpu%d", wk.Queue, wk.CPU)
		}
	}
	b.WriteString("\n\nports:\n")
	for _, p := range s.Ports {
		where := p.IfName
		if p.PCI != "" {
			where = p.PCI
		}
		fmt.Fprintf(b, "  %s (%s) driver %s, link %s, mtu %d — %s\n", p.Name, where, p.Driver, p.Link, p.MTU, p.Reason)
		for _, q := range p.Queues {
			fmt.Fprintf(b, "    queue %d: %s\n", q.Queue, q.Mode)
		}
		fmt.Fprintf(b, "    rx %d packets %d bytes, tx %d packets %d bytes\n", p.Rx.Packets, p.Rx.Bytes, p.Tx.Packets, p.Tx.Bytes)
		if line := nonZero(p.Backend); line != "" {
			fmt.Fprintf(b, "    backend: %s\n", line)
		}
	}
	fmt.Fprintf(b, "\ndrops: %s\n", orNone(nonZero(s.Drops)))
	fmt.Fprintf(b, "engine: %s\n", orNone(nonZero(s.Engine)))
	r := s.Routes
	fmt.Fprintf(b, "routes: %d (connected %d, static %d, kernel %d, tunnel %d, uplink %d), neighbours %d\n",
		r.Total, r.Connected, r.Static, r.Kernel, r.Tunnel, r.Uplink, s.Neighbours)
	for _, p := range r.Prefixes {
		fmt.Fprintf(b, "  %s\n", p)
	}
	if r.Unlisted > 0 {
		fmt.Fprintf(b, "  … and %d more\n", r.Unlisted)
	}
	if v := s.VPN; v != nil {
		fmt.Fprintf(b, "\nvpn on %s: %d peers\n", strings.Join(v.Listen, ", "), len(v.Peers))
		for _, p := range v.Peers {
			fmt.Fprintf(b, "  %s from %s, %s: rx %d B, tx %d B, last seen %s\n", p.Name, p.Real,
				strings.Join(p.Addrs, " "), p.Rx.Bytes, p.Tx.Bytes, p.LastSeen.Format(time.RFC3339))
		}
		if line := nonZero(v.Drops); line != "" {
			fmt.Fprintf(b, "  drops: %s\n", line)
		}
	}
	if len(s.Uplinks) > 0 {
		b.WriteString("\nuplinks:\n")
		for _, u := range s.Uplinks {
			fmt.Fprintf(b, "  %s to %s: %s", u.Name, u.Remote, u.State)
			if len(u.Addrs) > 0 {
				fmt.Fprintf(b, " as %s", strings.Join(u.Addrs, " "))
			}
			fmt.Fprintf(b, ", routes %s, mtu %d\n    %s\n", strings.Join(u.Routes, " "), u.MTU, orNone(nonZero(u.Counters)))
		}
	}
	if n := s.NAT; n != nil {
		fmt.Fprintf(b, "\nnat: sessions tcp %d udp %d icmp %d\n", n.Sessions["tcp"], n.Sessions["udp"], n.Sessions["icmp"])
		for _, r := range n.Rules {
			fmt.Fprintf(b, "  rule %s: %s out of %s as %s ports %s\n", r.Name, strings.Join(r.Sources, " "), r.Port, strings.Join(r.Outside, " "), r.Ports)
		}
		fmt.Fprintf(b, "  %s\n  drops: %s\n", orNone(nonZero(n.Counters)), orNone(nonZero(n.Drops)))
		for _, c := range n.Clients {
			name := ""
			if c.Name != "" {
				name = " (" + c.Name + ")"
			}
			fmt.Fprintf(b, "  client %s%s: %s ports %s (%d ports)\n", c.Inside, name, c.Outside, strings.Join(c.Blocks, " "), c.Ports)
		}
	}
	if s.Monitoring != nil {
		fmt.Fprintf(b, "\nmonitoring: %s\n", orNone(nonZero(s.Monitoring)))
	}
	for _, l := range s.ACL {
		fmt.Fprintf(b, "\nacl %s (%s):", l.Name, strings.Join(l.Ingress, " "))
		for _, r := range l.Rules {
			fmt.Fprintf(b, " %s %s %d,", r.Name, r.Action, r.Packets)
		}
		fmt.Fprintf(b, " default %s %d\n", l.Default, l.DefaultPackets)
	}
	fmt.Fprintf(b, "\nreloads: %d ok, %d rejected", s.Reload.Count, s.Reload.Failed)
	if s.Reload.LastError != "" {
		fmt.Fprintf(b, "; last rejected: %s", s.Reload.LastError)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// nonZero lists the non-zero counters of c as "name=value", sorted by name.
func nonZero(c Counters) string {
	var names []string
	for k, v := range c {
		if v != 0 {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(parts, " ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
