package metrics

import (
	"runtime"
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// The metric names are the ones the hand-written exposition used before
// client_golang; dashboards and the daemon's tests scrape them.
var (
	portRxPackets = desc("port_rx_packets_total", "Frames received on a port.", "port")
	portRxBytes   = desc("port_rx_bytes_total", "Bytes received on a port.", "port")
	portTxPackets = desc("port_tx_packets_total", "Frames sent on a port.", "port")
	portTxBytes   = desc("port_tx_bytes_total", "Bytes sent on a port.", "port")
	portBackend   = desc("port_backend_total", "A port backend's own counters (kernel ring drops, kick errors, …).", "port", "counter")
	portUp        = desc("port_up", "1 when the port's link is up.", "port", "driver")
	queueInfo     = desc("port_queue_info", "Always 1; the labels say which mode an RX/TX queue runs in.", "port", "queue", "mode")

	drops      = desc("drops_total", "Packets the engine dropped, by reason.", "reason")
	engine     = desc("engine_total", "Other engine events (copies, punts, ICMP errors sent, neighbour solicits, …).", "event")
	routes     = desc("routes", "Routes the control plane installed in the FIB, by source.", "source")
	prefixes   = desc("fib_prefixes", "Distinct prefixes in the FIB.")
	neighbours = desc("neighbours", "Entries in the engine's neighbour table.")
	reloads    = desc("reloads_total", "SIGHUP reloads by result.", "result")

	vpnPeers         = desc("vpn_peers", "Connected VPN clients.")
	vpnPeerRxBytes   = desc("vpn_peer_rx_bytes_total", "Tunnel bytes received from a VPN client.", "peer")
	vpnPeerTxBytes   = desc("vpn_peer_tx_bytes_total", "Tunnel bytes sent to a VPN client.", "peer")
	vpnPeerRxPackets = desc("vpn_peer_rx_packets_total", "Tunnel packets received from a VPN client.", "peer")
	vpnPeerTxPackets = desc("vpn_peer_tx_packets_total", "Tunnel packets sent to a VPN client.", "peer")
	vpnPeerLastSeen  = desc("vpn_peer_last_seen_seconds", "Unix time a VPN client was last heard from.", "peer")
	vpnDrops         = desc("vpn_drops_total", "VPN packets dropped, by reason.", "reason")

	uplinkUp      = desc("uplink_up", "1 while a [[vpn.client]] uplink is connected.", "uplink")
	uplinkCounter = desc("uplink_total", "An uplink's counters (tx_packets, tx_down, tx_errors, rx_packets, rx_drops, rx_spoofed, rx_link_local, attempts).", "uplink", "counter")

	natSessions    = desc("nat_sessions", "Live NAT sessions, by protocol.", "protocol")
	natCounter     = desc("nat_total", "NAT events (translated, untranslated, hairpinned, sessions_created, sessions_expired, blocks_allocated, blocks_released, …).", "event")
	natGauge       = desc("nat_state", "NAT table occupancy (mappings, clients, blocks).", "kind")
	natDrops       = desc("nat_drops_total", "Packets NAT refused, by reason (no_port, table_full, no_session, frag_no_state, unsupported, malformed).", "reason")
	natRate        = desc("nat_translations_per_second", "Packets translated per second (both directions), over the last second or so.")
	natClient      = desc("nat_client_ports", "Outside ports in the port blocks a NAT client holds.", "client", "outside")
	aclPackets     = desc("acl_packets_total", "Packets an [[acl]] rule (or a list's default, rule \"default\") decided; restarts when a reload changes the lists.", "list", "rule", "action")
	ready          = desc("ready", "1 while the appliance is ready: serving, not draining, workers running, links up (its exported routes are announced only then).")
	draining       = desc("draining", "1 while an ovfwd drain is in progress.")
	exportedRoutes = desc("exported_routes", "Routes installed in the [export] kernel table for a routing daemon.")

	startTime = desc("start_time_seconds", "Unix time the appliance started.")
	buildInfo = desc("build_info", "Always 1; the labels say which ovfwd is running and how.", "version", "goversion", "mode", "poll")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("ovfwd_"+name, help, labels, nil)
}

var allDescs = []*prometheus.Desc{
	portRxPackets, portRxBytes, portTxPackets, portTxBytes, portBackend, portUp, queueInfo,
	drops, engine, routes, prefixes, neighbours, reloads,
	vpnPeers, vpnPeerRxBytes, vpnPeerTxBytes, vpnPeerRxPackets, vpnPeerTxPackets, vpnPeerLastSeen, vpnDrops,
	uplinkUp, uplinkCounter,
	natSessions, natCounter, natGauge, natDrops, natRate, natClient,
	aclPackets,
	ready, draining, exportedRoutes,
	startTime, buildInfo,
}

// Collector is a prometheus.Collector that takes one snapshot per scrape.
type Collector struct {
	snap func() status.Snapshot
}

// NewCollector collects from snap, which is called once per Collect.
func NewCollector(snap func() status.Snapshot) *Collector { return &Collector{snap: snap} }

// Describe sends every metric's descriptor: the label names are fixed even
// though the label values (ports, peers, reasons) come and go, so the
// registry can check the collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect sends the metrics of one fresh snapshot.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	e := emitter{ch}
	for _, p := range s.Ports {
		e.counter(portRxPackets, p.Rx.Packets, p.Name)
		e.counter(portRxBytes, p.Rx.Bytes, p.Name)
		e.counter(portTxPackets, p.Tx.Packets, p.Name)
		e.counter(portTxBytes, p.Tx.Bytes, p.Name)
		for _, k := range sortedKeys(p.Backend) {
			e.counter(portBackend, p.Backend[k], p.Name, k)
		}
		e.gauge(portUp, boolValue(p.Link == "up"), p.Name, p.Driver)
		for _, q := range p.Queues {
			e.gauge(queueInfo, 1, p.Name, strconv.Itoa(q.Queue), q.Mode)
		}
	}
	e.counters(drops, s.Drops)
	e.counters(engine, s.Engine)
	r := s.Routes
	e.gauge(routes, float64(r.Connected), "connected")
	e.gauge(routes, float64(r.Static), "static")
	e.gauge(routes, float64(r.Kernel), "kernel")
	e.gauge(routes, float64(r.Tunnel), "tunnel")
	e.gauge(routes, float64(r.Uplink), "uplink")
	e.gauge(prefixes, float64(r.Total))
	e.gauge(neighbours, float64(s.Neighbours))
	e.counter(reloads, uint64(s.Reload.Count), "ok")
	e.counter(reloads, uint64(s.Reload.Failed), "rejected")
	if v := s.VPN; v != nil {
		peers := byName(v.Peers)
		e.gauge(vpnPeers, float64(len(v.Peers)))
		for _, p := range peers {
			e.counter(vpnPeerRxBytes, p.Rx.Bytes, p.Name)
			e.counter(vpnPeerTxBytes, p.Tx.Bytes, p.Name)
			e.counter(vpnPeerRxPackets, p.Rx.Packets, p.Name)
			e.counter(vpnPeerTxPackets, p.Tx.Packets, p.Name)
			if !p.LastSeen.IsZero() {
				e.gauge(vpnPeerLastSeen, unixSeconds(p), p.Name)
			}
		}
		e.counters(vpnDrops, v.Drops)
	}
	for _, u := range s.Uplinks { // names are unique (config)
		e.gauge(uplinkUp, boolValue(u.State == "connected"), u.Name)
		for _, k := range sortedKeys(u.Counters) {
			e.counter(uplinkCounter, u.Counters[k], u.Name, k)
		}
	}
	if n := s.NAT; n != nil {
		for _, k := range sortedKeys(n.Sessions) {
			e.gauge(natSessions, float64(n.Sessions[k]), k)
		}
		for _, k := range sortedKeys(n.Counters) {
			switch k {
			case "mappings", "clients", "blocks":
				e.gauge(natGauge, float64(n.Counters[k]), k)
			default:
				e.counter(natCounter, n.Counters[k], k)
			}
		}
		e.counters(natDrops, n.Drops)
		e.gauge(natRate, n.TranslationsPerSec)
		for _, c := range n.Clients {
			e.gauge(natClient, float64(c.Ports), c.Inside, c.Outside)
		}
	}
	for _, l := range s.ACL {
		for _, r := range l.Rules {
			e.counter(aclPackets, r.Packets, l.Name, r.Name, r.Action)
		}
		e.counter(aclPackets, l.DefaultPackets, l.Name, "default", l.Default)
	}
	e.gauge(ready, boolValue(s.Ready))
	e.gauge(draining, boolValue(s.Drain != nil))
	if s.Export != nil {
		e.gauge(exportedRoutes, float64(len(s.Export.Routes)))
	}
	e.gauge(startTime, float64(s.Started.Unix()))
	e.gauge(buildInfo, 1, s.Version, runtime.Version(), s.Mode, s.Poll)
}

// byName merges peers that share a name (one certificate connected twice,
// e.g. with duplicate-cn): a metric's labels must be unique within a scrape
// or the registry rejects the whole family. Traffic adds up; last seen is
// the latest. The result is sorted by name.
func byName(peers []status.VPNPeer) []status.VPNPeer {
	out := make([]status.VPNPeer, 0, len(peers))
	at := make(map[string]int, len(peers))
	for _, p := range peers {
		i, seen := at[p.Name]
		if !seen {
			at[p.Name] = len(out)
			out = append(out, status.VPNPeer{Name: p.Name, Rx: p.Rx, Tx: p.Tx, LastSeen: p.LastSeen})
			continue
		}
		m := &out[i]
		m.Rx.Packets += p.Rx.Packets
		m.Rx.Bytes += p.Rx.Bytes
		m.Tx.Packets += p.Tx.Packets
		m.Tx.Bytes += p.Tx.Bytes
		if p.LastSeen.After(m.LastSeen) {
			m.LastSeen = p.LastSeen
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func unixSeconds(p status.VPNPeer) float64 { return float64(p.LastSeen.UnixNano()) / 1e9 }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys(c status.Counters) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// emitter sends const metrics. It uses NewConstMetric rather than
// MustNewConstMetric because label values come from outside (a client
// certificate's common name, a config's port names): a value that is not
// valid UTF-8 becomes an invalid metric the handler reports and skips,
// instead of a panic in the scrape.
type emitter struct{ ch chan<- prometheus.Metric }

func (e emitter) counter(d *prometheus.Desc, v uint64, labels ...string) {
	e.send(d, prometheus.CounterValue, float64(v), labels)
}

func (e emitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.send(d, prometheus.GaugeValue, v, labels)
}

// counters sends one sample of d per named counter, the name as d's label.
func (e emitter) counters(d *prometheus.Desc, c status.Counters) {
	for _, k := range sortedKeys(c) {
		e.counter(d, c[k], k)
	}
}

func (e emitter) send(d *prometheus.Desc, t prometheus.ValueType, v float64, labels []string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	e.ch <- m
}
