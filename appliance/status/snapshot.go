package status

import "time"

// Snapshot is the appliance's state at one moment.
type Snapshot struct {
	Version    string    `json:"version"`
	PID        int       `json:"pid"`
	Started    time.Time `json:"started"`
	Taken      time.Time `json:"taken"`
	Config     string    `json:"config"`
	Mode       string    `json:"mode"` // router or bridge
	Poll       string    `json:"poll"` // busy or adaptive
	Workers    []Worker  `json:"workers"`
	Ports      []Port    `json:"ports"`
	Drops      Counters  `json:"drops"`  // engine drops by reason, all ports
	Engine     Counters  `json:"engine"` // other engine counters (punts, icmp_sent, …)
	Routes     Routes    `json:"routes"`
	Neighbours int       `json:"neighbours"` // entries in the engine's neighbour table
	VPN        *VPN      `json:"vpn,omitempty"`
	Uplinks    []Uplink  `json:"uplinks,omitempty"`
	NAT        *NAT      `json:"nat,omitempty"`
	ACL        []ACL     `json:"acl,omitempty"`
	Reload     Reload    `json:"reload"`
	// Ready: serving, not draining, every worker running and every port's
	// link up; the exported routes are announced only while it holds.
	Ready    bool    `json:"ready"`
	NotReady string  `json:"not_ready,omitempty"` // why not: "starting: worker 0 not polling yet", draining, stopping, "port p0 link down", "worker 1 stalled (…)", "recovering from: …"
	Drain    *Drain  `json:"drain,omitempty"`
	Export   *Export `json:"export,omitempty"`
	// Monitoring is the management interface's and the status file's
	// counters (nil when neither is on).
	Monitoring Counters `json:"monitoring,omitempty"`
}

// Drain is an `ovfwd drain` in progress.
type Drain struct {
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline,omitempty"` // zero: none; clients left then are told to reconnect elsewhere
	Peers    int       `json:"peers"`              // clients still connected
}

// Export is [export]: the routes installed for a routing daemon.
type Export struct {
	Table    int      `json:"table"`
	Protocol int      `json:"protocol"`
	Routes   []string `json:"routes"`
	Error    string   `json:"error,omitempty"` // the last failure to install or withdraw
}

// Counters are named counters; names are Prometheus-friendly (snake_case).
type Counters map[string]uint64

// Worker is one data-plane worker: queue q of every port.
type Worker struct {
	Queue int    `json:"queue"`
	CPU   int    `json:"cpu"`   // -1: not pinned
	Polls uint64 `json:"polls"` // the worker's loop count: it stops when the worker stalls
}

// Port is one configured port.
type Port struct {
	Name    string   `json:"name"`
	Driver  string   `json:"driver"` // the backend actually used: afxdp, afxdp-copy, vfio, mlx5-sim
	Reason  string   `json:"reason"` // why that backend
	IfName  string   `json:"ifname,omitempty"`
	PCI     string   `json:"pci,omitempty"`
	Link    string   `json:"link"` // up, down or unknown
	MTU     int      `json:"mtu"`
	Queues  []Queue  `json:"queues"`
	Rx      Traffic  `json:"rx"`
	Tx      Traffic  `json:"tx"`
	Backend Counters `json:"backend,omitempty"` // the port's own counters (kernel ring drops, kick errors, …)
}

// Queue is one RX/TX queue pair of a port and the mode it runs in.
type Queue struct {
	Queue     int    `json:"queue"`
	Mode      string `json:"mode"`                 // e.g. "copy, generic XDP (why…)"
	RxPackets uint64 `json:"rx_packets,omitempty"` // frames its AF_XDP socket received (the worker of this queue polls it)
}

// Traffic is a packet and byte count.
type Traffic struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// Routes counts the FIB's routes by source.
type Routes struct {
	Connected int `json:"connected"` // port subnets
	Static    int `json:"static"`    // [[route]] sections
	Kernel    int `json:"kernel"`    // mirrored from the kernel table
	Tunnel    int `json:"tunnel"`    // VPN peers' addresses and iroutes
	Uplink    int `json:"uplink"`    // [[vpn.client]] routes
	Total     int `json:"total"`     // distinct prefixes in the FIB
	// Prefixes lists the first 1,000 routes the control plane installed, as
	// "prefix via nexthop dev port (source)".
	Prefixes []string `json:"prefixes,omitempty"`
	Unlisted int      `json:"unlisted,omitempty"` // installed routes beyond the first 1,000, not listed
}

// VPN is the OpenVPN server's state.
type VPN struct {
	Listen []string  `json:"listen"`
	Peers  []VPNPeer `json:"peers"`
	Drops  Counters  `json:"drops,omitempty"`
}

// VPNPeer is one connected client.
type VPNPeer struct {
	Name     string    `json:"name"`
	Group    string    `json:"group,omitempty"` // its [[acl]] group
	Real     string    `json:"real"`            // UDP address
	Addrs    []string  `json:"addrs"`
	Rx       Traffic   `json:"rx"`
	Tx       Traffic   `json:"tx"`
	LastSeen time.Time `json:"last_seen"`
	ClientID uint64    `json:"client_id"` // the management interface's CID: unique per connection since start
	PeerID   uint32    `json:"peer_id"`
	Username string    `json:"username,omitempty"` // the authenticated username; "" without auth_user_pass_verify
	Cipher   string    `json:"cipher,omitempty"`   // the data channel's cipher, as openvpn names it
	Since    time.Time `json:"connected_since"`
	IRoutes  []string  `json:"iroutes,omitempty"` // networks routed to this client
	// LinkRx and LinkTx count the data channel's datagrams as on the wire
	// (Rx/Tx plus each packet's header, packet id and tag): openvpn's
	// "Bytes Received/Sent" without its keepalives and control packets.
	LinkRx uint64 `json:"link_rx_bytes"`
	LinkTx uint64 `json:"link_tx_bytes"`
}

// Uplink is one [[vpn.client]] site-to-site uplink.
type Uplink struct {
	Name     string   `json:"name"`
	Remote   string   `json:"remote"`
	State    string   `json:"state"`           // connecting or connected
	Addrs    []string `json:"addrs,omitempty"` // pushed tunnel addresses
	Routes   []string `json:"routes"`
	MTU      int      `json:"mtu"`
	Counters Counters `json:"counters"` // tx_packets, tx_down, tx_errors, rx_packets, rx_drops, rx_spoofed, rx_link_local, attempts
}

// Reload is the SIGHUP history.
type Reload struct {
	Count     int       `json:"count"`  // successful reloads
	Failed    int       `json:"failed"` // rejected configs
	Last      time.Time `json:"last,omitempty"`
	LastError string    `json:"last_error,omitempty"`
}

// NAT is the NAT44 state ([[nat]]).
type NAT struct {
	Rules    []NATRule   `json:"rules"`
	Sessions Counters    `json:"sessions"` // live sessions by protocol: tcp, udp, icmp
	Counters Counters    `json:"counters"` // translated, untranslated, hairpinned, sessions_created, blocks_allocated, …
	Drops    Counters    `json:"drops"`    // no_port, table_full, no_session, frag_no_state, unsupported, malformed
	Clients  []NATClient `json:"clients"`
}

// NATRule is one [[nat]] rule as it runs.
type NATRule struct {
	Name    string   `json:"name"`
	Sources []string `json:"sources"`
	Port    string   `json:"port"`
	Outside []string `json:"outside"`
	Ports   string   `json:"ports"`
}

// NATClient is one inside address holding port blocks.
type NATClient struct {
	Inside  string   `json:"inside"`
	Name    string   `json:"name,omitempty"` // VPN certificate common name
	Outside string   `json:"outside"`
	Blocks  []string `json:"blocks"` // port ranges
	Ports   int      `json:"ports"`  // ports in those blocks
}

// ACL is one [[acl]] list with the packets each rule decided.
type ACL struct {
	Name           string    `json:"name"`
	Ingress        []string  `json:"ingress"`
	Default        string    `json:"default"`
	Rules          []ACLRule `json:"rules"`
	DefaultPackets uint64    `json:"default_packets"` // decided by the default
}

// ACLRule is one rule of a list.
type ACLRule struct {
	Name    string `json:"name"`
	Action  string `json:"action"`
	Packets uint64 `json:"packets"`
}
