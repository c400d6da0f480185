package daemon

import (
	"net/netip"
	"os"
	"time"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
)

// snapshot is what `ovfwd status` and the metrics endpoint show. It reads
// the engine's published counters and the control plane's tables; the
// workers are never asked for anything.
func (d *daemon) snapshot() status.Snapshot {
	d.mu.Lock()
	cfg, rl := d.cfg, d.rl
	d.mu.Unlock()
	st := d.engine.Stats()
	s := status.Snapshot{
		Version: d.version, PID: os.Getpid(), Started: d.started, Taken: time.Now(),
		Config: d.path, Mode: cfg.Appliance.Mode, Poll: cfg.Appliance.Poll,
		Drops: status.Counters{},
		Engine: status.Counters{
			"copies": st.Copies, "icmp_sent": st.ICMPSent, "icmp_limited": st.ICMPLimited,
			"solicits": st.Solicits, "replies": st.Replies, "punts": st.Punts, "floods": st.Floods,
			"mss_clamped": st.Clamped, "learn_dropped": st.LearnDropped, "mac_table_full": st.MACTableFull,
			"events_dropped":    st.EventsDropped,
			"neighbour_refused": st.NeighRefused, "neighbour_unsolicited": st.NeighUnsolicited,
			"neighbour_table_full": st.NeighTableFull, "neighbour_evicted": st.NeighEvicted,
		},
		Neighbours: d.engine.NeighbourCount(),
		Reload:     rl,
		NAT:        d.natSnapshot(),
		ACL:        d.aclSnapshot(),
	}
	for r := fwd.DropReason(1); r < fwd.NumDropReasons; r++ {
		s.Drops[r.String()] = st.Drops[r]
	}
	ns := d.neigh.stats()
	s.Engine["neighbours_mirrored"], s.Engine["neighbours_mirror_failed"] = ns.ok, ns.fail
	s.Engine["neighbours_mirror_deferred"], s.Engine["neighbours_purged"] = ns.deferred, uint64(ns.purged)
	s.Engine["neighbours_pinned"] = uint64(ns.pinned)
	for q, cpu := range d.cpus {
		w := status.Worker{Queue: q, CPU: cpu}
		if q < len(d.beats) {
			w.Polls = d.beats[q].n.Load()
		}
		s.Workers = append(s.Workers, w)
	}
	for i, pt := range d.ports {
		p := status.Port{
			Name: pt.cfg.Name, Driver: pt.choice.driver, Reason: pt.choice.reason,
			IfName: pt.cfg.IfName, PCI: pt.cfg.PCI, Link: "down", MTU: pt.fp.Info().MTU,
		}
		switch {
		case pt.ifindex == 0:
			p.Link = "unknown"
		case pt.up.Load():
			p.Link = "up"
		}
		for q, m := range pt.queueModes() {
			sq := status.Queue{Queue: q, Mode: m}
			if pt.xdp != nil {
				sq.RxPackets = pt.xdp.QueueRxPackets(q)
			}
			p.Queues = append(p.Queues, sq)
		}
		if i < len(st.Ports) {
			ps := st.Ports[i]
			p.Rx = status.Traffic{Packets: ps.RxPackets, Bytes: ps.RxBytes}
			p.Tx = status.Traffic{Packets: ps.TxPackets, Bytes: ps.TxBytes}
		}
		if pt.xdp != nil {
			xs := pt.xdp.Stats()
			p.Backend = status.Counters{
				"tx_full": xs.Drops[fwd.DropTxFull], "link_down": xs.Drops[fwd.DropLinkDown],
				"kick_errors": xs.KickErrors, "alloc_short": xs.AllocShort, "bad_free": xs.BadFree,
				"kernel_rx_dropped": xs.KernelRxDropped, "kernel_rx_ring_full": xs.KernelRxRingFull,
				"kernel_fill_empty": xs.KernelFillEmpty, "kernel_tx_invalid": xs.KernelTxInvalid,
			}
			// The XDP fast path's counters, on this port's ingress: frames it
			// forwarded in the kernel (never seen by the workers, so not in
			// rx/tx above) and what it handed to the workers, by reason.
			if fs, err := pt.xdp.FastStats(); err == nil && d.fast != nil {
				for k, v := range fs {
					p.Backend["fast_"+afxdp.FastStat(k).String()] = v
				}
			}
		}
		s.Ports = append(s.Ports, p)
	}
	s.Engine["fragment"] = st.HostFragments
	s.Engine["fragmented"] = st.Fragmented
	s.Engine["csum_partial"] = st.CsumPartial
	if d.vpn != nil {
		s.VPN = d.vpn.snapshot()
		s.Engine["vpn_data_via_kernel"] = d.vpn.conn.handed.Load()
	}
	if d.uplinks != nil {
		s.Uplinks = d.uplinks.snapshot()
	}
	s.Engine["uplinked"] = st.Uplinked
	by, lines, installed := d.fib.counts()
	s.Routes = status.Routes{
		Static: by[srcStatic], Kernel: by[srcKernel], Tunnel: by[srcTunnel], Uplink: by[srcUplink], Prefixes: lines,
		Unlisted: len(installed) - len(lines),
	}
	distinct := map[netip.Prefix]bool{}
	if cfg.Appliance.Mode != config.ModeBridge {
		for _, pt := range d.ports {
			for _, a := range pt.cfg.Addresses {
				s.Routes.Connected++
				distinct[a.Masked()] = true
			}
			pt.kernelMu.Lock()
			for a := range pt.kernelAddrs {
				s.Routes.Connected++
				distinct[a.Masked()] = true
			}
			pt.kernelMu.Unlock()
		}
	}
	for _, p := range installed {
		distinct[p] = true
	}
	s.Routes.Total = len(distinct)
	d.scaleOutSnapshot(&s)
	s.Monitoring = d.monitoringCounters()
	return s
}
