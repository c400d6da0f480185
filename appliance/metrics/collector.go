package metrics

import (
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// Each name has one unit: a family's label picks among things counted
// the same way (packets, events), never between packets and sessions.
// docs/metrics.md lists them, and the names they replaced; a test keeps it
// in step with what a scrape exposes.
var (
	portRxPackets      = desc("port_rx_packets_total", "Frames received on a port.", "port")
	portRxBytes        = desc("port_rx_bytes_total", "Bytes received on a port.", "port")
	portTxPackets      = desc("port_tx_packets_total", "Frames sent on a port.", "port")
	portTxBytes        = desc("port_tx_bytes_total", "Bytes sent on a port.", "port")
	portBackendPackets = desc("port_backend_packets_total", "Frames an AF_XDP port's backend counted, by counter (ring drops, the XDP fast path's forwards and punts, …).", "port", "counter")
	portBackendEvents  = desc("port_backend_events_total", "An AF_XDP port's backend errors and ring events (kick errors, short allocations, fill ring empty, …).", "port", "counter")
	portFastBytes      = desc("port_fast_bytes_total", "Bytes the XDP fast path forwarded in the kernel on a port's ingress.", "port")
	portUp             = desc("port_up", "1 when the port's link is up.", "port", "driver")
	queueInfo          = desc("port_queue_info", "Always 1; the labels say which mode an RX/TX queue runs in.", "port", "queue", "mode")

	drops          = desc("drops_total", "Packets the engine dropped, by reason.", "reason")
	enginePackets  = desc("engine_packets_total", "Packets the engine handled beyond forwarding (copies, punts, ICMP errors sent, floods, fragments, …).", "event")
	engineEvents   = desc("engine_events_total", "Engine table events (MAC learning refused, event queue overflow, …).", "event")
	neighbourEvent = desc("neighbour_events_total", "Neighbour table events (refused, unsolicited, evicted, mirrored to the kernel, …).", "event")
	neighbourPin   = desc("neighbours_pinned", "Neighbour entries an operator pinned in the kernel (permanent), pinned in the engine too.")
	routes         = desc("routes", "Routes the control plane installed in the FIB, by source.", "source")
	prefixes       = desc("fib_prefixes", "Distinct prefixes in the FIB.")
	neighbours     = desc("neighbours", "Entries in the engine's neighbour table.")
	reloads        = desc("reloads_total", "SIGHUP reloads by result.", "result")

	vpnPeers         = desc("vpn_peers", "Connected VPN clients.")
	vpnPeerRxBytes   = desc("vpn_peer_rx_bytes_total", "Tunnel bytes received from a VPN client's session.", "peer", "client_id")
	vpnPeerTxBytes   = desc("vpn_peer_tx_bytes_total", "Tunnel bytes sent to a VPN client's session.", "peer", "client_id")
	vpnPeerRxPackets = desc("vpn_peer_rx_packets_total", "Tunnel packets received from a VPN client's session.", "peer", "client_id")
	vpnPeerTxPackets = desc("vpn_peer_tx_packets_total", "Tunnel packets sent to a VPN client's session.", "peer", "client_id")
	vpnPeerLastSeen  = desc("vpn_peer_last_seen_seconds", "Unix time a VPN client's session was last heard from.", "peer", "client_id")
	vpnDrops         = desc("vpn_drops_total", "VPN packets dropped, by reason (data_* on the data channel, control_* on the control channel, kernel_data_refused).", "reason")
	vpnRefused       = desc("vpn_sessions_refused_total", "Client logins and sessions the control plane refused or ended, by reason (auth_failed, login_limited, draining, handshake_timeout, …).", "reason")

	uplinkUp       = desc("uplink_up", "1 while a [[vpn.client]] uplink is connected.", "uplink")
	uplinkPackets  = desc("uplink_packets_total", "An uplink's packets (tx_packets, tx_down, tx_errors, rx_packets, rx_drops, rx_spoofed, rx_link_local).", "uplink", "counter")
	uplinkAttempts = desc("uplink_connect_attempts_total", "Connection attempts an uplink made.", "uplink")

	natSessions        = desc("nat_sessions", "Live NAT sessions, by protocol.", "protocol")
	natPackets         = desc("nat_packets_total", "Packets NAT handled (translated, untranslated, hairpinned, fragments_out, fragments_in, handoffs).", "event")
	natSessionsCreated = desc("nat_sessions_created_total", "NAT sessions created.")
	natSessionsExpired = desc("nat_sessions_expired_total", "NAT sessions expired.")
	natBlocksAlloc     = desc("nat_blocks_allocated_total", "Port blocks allocated to NAT clients.")
	natBlocksReleased  = desc("nat_blocks_released_total", "Port blocks released by NAT clients.")
	natBlockLogsLost   = desc("nat_block_logs_lost_total", "Port block log lines lost (the log ring was full or the log writer failed).")
	natMappings        = desc("nat_mappings", "NAT mappings in the table.")
	natClients         = desc("nat_clients", "Inside addresses holding NAT port blocks.")
	natBlocks          = desc("nat_blocks", "NAT port blocks held.")
	natDrops           = desc("nat_drops_total", "Packets NAT refused, by reason (no_port, table_full, no_session, frag_no_state, unsupported, malformed).", "reason")
	natClient          = desc("nat_client_ports", "Outside ports in the port blocks a NAT client holds.", "client", "outside")
	aclPackets         = desc("acl_packets_total", "Packets an [[acl]] rule (or a list's default, rule \"default\") decided; restarts when a reload changes the lists.", "list", "rule", "action")
	ready              = desc("ready", "1 while the appliance is ready: serving, not draining, workers running, links up (its exported routes are announced only then).")
	draining           = desc("draining", "1 while an ovfwd drain is in progress.")
	exportedRoutes     = desc("exported_routes", "Routes installed in the [export] kernel table for a routing daemon.")

	workerPolls = desc("worker_polls_total", "Polls a data-plane worker made; it stops rising when the worker stalls.", "queue")
	buildInfo   = desc("build_info", "Always 1; the labels say which ovfwd is running and how.", "version", "goversion", "mode", "poll")
)

// Which family a status counter goes to, by its key. Keys not listed go
// to the catch-all of their table (engine_events_total, port backend
// events), so a new counter is exposed before it is sorted here.
var (
	enginePacketKeys = set("copies", "icmp_sent", "icmp_limited", "solicits", "replies", "punts", "floods",
		"mss_clamped", "fragment", "fragmented", "csum_partial", "vpn_data_via_kernel", "uplinked")
	neighbourEventKeys = set("neighbour_refused", "neighbour_unsolicited", "neighbour_table_full", "neighbour_evicted",
		"neighbours_mirrored", "neighbours_mirror_failed", "neighbours_mirror_deferred", "neighbours_purged")
	backendPacketKeys = set("tx_full", "link_down", "kernel_rx_dropped", "kernel_rx_ring_full", "kernel_tx_invalid")
	// The control plane's counters that count a session or a login, not
	// a packet (vpn/control's DropReason).
	sessionRefusals = set("auth_failed", "draining", "handshake_bytes", "send_queue", "half_open_source",
		"handshake_timeout", "reneg_refused", "login_limited")
	natSingles = map[string]*prometheus.Desc{
		"sessions_created": natSessionsCreated, "sessions_expired": natSessionsExpired,
		"blocks_allocated": natBlocksAlloc, "blocks_released": natBlocksReleased, "block_logs_lost": natBlockLogsLost,
	}
	natGauges = map[string]*prometheus.Desc{"mappings": natMappings, "clients": natClients, "blocks": natBlocks}
)

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("ovfwd_"+name, help, labels, nil)
}

var allDescs = []*prometheus.Desc{
	portRxPackets, portRxBytes, portTxPackets, portTxBytes, portBackendPackets, portBackendEvents, portFastBytes, portUp, queueInfo,
	drops, enginePackets, engineEvents, neighbourEvent, neighbourPin, routes, prefixes, neighbours, reloads,
	vpnPeers, vpnPeerRxBytes, vpnPeerTxBytes, vpnPeerRxPackets, vpnPeerTxPackets, vpnPeerLastSeen, vpnDrops, vpnRefused,
	uplinkUp, uplinkPackets, uplinkAttempts,
	natSessions, natPackets, natSessionsCreated, natSessionsExpired, natBlocksAlloc, natBlocksReleased, natBlockLogsLost,
	natMappings, natClients, natBlocks, natDrops, natClient,
	aclPackets,
	ready, draining, exportedRoutes,
	workerPolls, buildInfo,
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
			v := p.Backend[k]
			switch {
			case k == "fast_bytes":
				e.counter(portFastBytes, v, p.Name)
			case backendPacketKeys[k] || strings.HasPrefix(k, "fast_"):
				e.counter(portBackendPackets, v, p.Name, k)
			default:
				e.counter(portBackendEvents, v, p.Name, k)
			}
		}
		e.gauge(portUp, boolValue(p.Link == "up"), p.Name, p.Driver)
		for _, q := range p.Queues {
			e.gauge(queueInfo, 1, p.Name, strconv.Itoa(q.Queue), q.Mode)
		}
	}
	e.counters(drops, s.Drops)
	for _, k := range sortedKeys(s.Engine) {
		v := s.Engine[k]
		switch {
		case k == "neighbours_pinned":
			e.gauge(neighbourPin, float64(v))
		case enginePacketKeys[k]:
			e.counter(enginePackets, v, k)
		case neighbourEventKeys[k]:
			e.counter(neighbourEvent, v, k)
		default:
			e.counter(engineEvents, v, k)
		}
	}
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
		// One series per session, named by its client id (unique since
		// start, as the management interface's CID): a sum over sessions
		// that share a name would fall when one of them leaves, and
		// Prometheus reads a falling counter as a reset.
		e.gauge(vpnPeers, float64(len(v.Peers)))
		for _, p := range v.Peers {
			id := strconv.FormatUint(p.ClientID, 10)
			e.counter(vpnPeerRxBytes, p.Rx.Bytes, p.Name, id)
			e.counter(vpnPeerTxBytes, p.Tx.Bytes, p.Name, id)
			e.counter(vpnPeerRxPackets, p.Rx.Packets, p.Name, id)
			e.counter(vpnPeerTxPackets, p.Tx.Packets, p.Name, id)
			if !p.LastSeen.IsZero() {
				e.gauge(vpnPeerLastSeen, unixSeconds(p), p.Name, id)
			}
		}
		for _, k := range sortedKeys(v.Drops) {
			if r, ok := strings.CutPrefix(k, "control_"); ok && sessionRefusals[r] {
				e.counter(vpnRefused, v.Drops[k], r)
			} else {
				e.counter(vpnDrops, v.Drops[k], k)
			}
		}
	}
	for _, u := range s.Uplinks { // names are unique (config)
		e.gauge(uplinkUp, boolValue(u.State == "connected"), u.Name)
		for _, k := range sortedKeys(u.Counters) {
			if k == "attempts" {
				e.counter(uplinkAttempts, u.Counters[k], u.Name)
			} else {
				e.counter(uplinkPackets, u.Counters[k], u.Name, k)
			}
		}
	}
	if n := s.NAT; n != nil {
		for _, k := range sortedKeys(n.Sessions) {
			e.gauge(natSessions, float64(n.Sessions[k]), k)
		}
		for _, k := range sortedKeys(n.Counters) {
			v := n.Counters[k]
			if d := natGauges[k]; d != nil {
				e.gauge(d, float64(v))
			} else if d := natSingles[k]; d != nil {
				e.counter(d, v)
			} else {
				// translated, hairpinned, fragments, …
				e.counter(natPackets, v, k)
			}
		}
		e.counters(natDrops, n.Drops)
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
	for _, w := range s.Workers {
		e.counter(workerPolls, w.Polls, strconv.Itoa(w.Queue))
	}
	e.gauge(buildInfo, 1, s.Version, runtime.Version(), s.Mode, s.Poll)
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
