package config

import (
	"net"
	"net/netip"
	"time"
)

// Config is one decoded, validated ovfwd.toml. Every field holds its default
// when the file does not set it (see Default and packaging/ovfwd.toml).
type Config struct {
	File       string // the file it came from, as given to Load or Parse
	Appliance  Appliance
	Ports      []Port
	Routes     []Route
	VPN        VPN
	Netlink    Netlink
	Export     Export
	Metrics    Metrics
	Status     Status
	Management Management
	Log        Log
	NAT        []NAT
	NATOptions NATOptions
	ACL        []ACL
	ACLGroups  []ACLGroup

	lines lineIndex // key → line in File, for Line
}

// Modes of [appliance] mode.
const (
	ModeRouter = "router" // L3: longest-prefix match, neighbours, ICMP errors
	ModeBridge = "bridge" // L2: MAC learning and flooding between ports
)

// Poll modes of [appliance] poll.
const (
	PollBusy     = "busy"     // workers spin: lowest latency, one full CPU each
	PollAdaptive = "adaptive" // workers back off when idle: CPU near zero without traffic
)

// Appliance is [appliance]: what the box is and how its workers run.
type Appliance struct {
	Mode string // ModeRouter (default) or ModeBridge
	// Workers are the CPUs the data-plane workers are pinned to, one worker
	// per CPU, worker q serving RX queue q of every port. Empty (the
	// default) lets the appliance use every online CPU.
	Workers []int
	Poll    string // PollAdaptive (default) or PollBusy
	Batch   int    // packets per RX/TX burst, 32..256, default 64
	// MSSClamp is the largest TCP MSS let through in a SYN; larger ones are
	// rewritten. 0 (the default) leaves SYNs alone: a plain router has no
	// reason to touch them. With VPN tunnels 1360 is a safe value.
	MSSClamp int
	// ICMPRate is the most ICMP/ICMPv6 errors (time exceeded, unreachable,
	// packet too big) sent per second; 0 sends none. Default 1000.
	ICMPRate int
	// NeighbourReachable is how long a resolved ARP/ND entry is used before
	// it is confirmed again. Default 30s.
	NeighbourReachable time.Duration
	// NeighbourTimeout is how long resolution of an unknown next hop is
	// tried before its held packets are dropped. Default 3s.
	NeighbourTimeout time.Duration
	// NeighbourHold is how many packets are held per unresolved neighbour.
	// Default 4.
	NeighbourHold int
	// NeighbourTable bounds the ARP/ND entries the engine keeps; when it is
	// full, unconfirmed entries go first. Default 16384.
	NeighbourTable int
	// GleanSourceRate and GleanSourceBurst: how many resolutions of
	// unknown neighbours one LAN sender may start per second and at once;
	// GleanPortRate and GleanPortBurst: the same for a port as a whole.
	// Defaults 50, 64, 500, 256.
	GleanSourceRate  int
	GleanSourceBurst int
	GleanPortRate    int
	GleanPortBurst   int
	// BridgeAging is how long a learned MAC stays without traffic from it.
	// Default 300s.
	BridgeAging time.Duration
	// FastPath is the in-kernel XDP fast path of AF_XDP ports (router
	// and bridge modes): FastPathAuto (default) on copy-mode ports, FastPathXDP on
	// every AF_XDP port, FastPathOff nowhere.
	FastPath string
}

// Fast path settings of [appliance] fast_path.
const (
	FastPathAuto = "auto" // on for AF_XDP ports in copy mode, where no userspace path beats it
	FastPathXDP  = "xdp"  // on for every AF_XDP port, zero-copy ones too
	FastPathOff  = "off"
)

// Drivers of [[port]] driver.
const (
	DriverAuto      = "auto"       // vfio when pci is a ConnectX on vfio-pci, else afxdp, else afxdp-copy
	DriverVFIO      = "vfio"       // ovfwd's userspace mlx5 driver; needs pci
	DriverAFXDP     = "afxdp"      // AF_XDP, zero-copy when the NIC driver can; needs ifname
	DriverAFXDPCopy = "afxdp-copy" // AF_XDP in copy mode; needs ifname
	DriverMLX5Sim   = "mlx5-sim"   // the mlx5 device model, for labs and tests
)

// Port is one [[port]].
type Port struct {
	Name   string // unique; used in routes, logs and metrics
	Driver string // one of the Driver constants; default DriverAuto
	PCI    string // PCI function, canonical "0000:03:00.0"; needed by vfio
	IfName string // kernel interface name; needed by afxdp and afxdp-copy
	Queues int    // RX/TX queue pairs to use; 0 (default) = all the device has
	MTU    int    // default 1500
	// Addresses are the port's own addresses with their subnet, e.g.
	// 198.18.0.1/24; each subnet is a connected route in router mode.
	Addresses []netip.Prefix
	// VLANs are the 802.1Q VLANs the port is a member of in bridge mode;
	// empty (default) = untagged frames only.
	VLANs []int
	MAC   net.HardwareAddr // nil (default) = the device's own
	AFXDP AFXDP
	MLX5  MLX5
}

// Values of [port.afxdp] zerocopy and xdp_mode, and of [port.mlx5] cqe_compression.
const (
	Auto = "auto"
	On   = "on"
	Off  = "off"

	XDPNative  = "native"
	XDPGeneric = "generic"

	CQECompressionBasic    = "basic"
	CQECompressionEnhanced = "enhanced"

	TxEdgeReuse = "reuse" // open a smaller MPWQE in the room left before a fragment edge
	TxEdgeNOP   = "nop"   // pad to the edge with NOPs (the old policy, for measurement)
)

// AFXDP is [port.afxdp], used when the port runs on AF_XDP.
type AFXDP struct {
	FrameSize int    // UMEM frame size, 2048 or 4096 (default)
	Frames    int    // UMEM frames per queue, power of two, default 4096
	RxRing    int    // ring sizes, powers of two 64..16384, default 2048 each
	TxRing    int    //
	FillRing  int    //
	CompRing  int    //
	ZeroCopy  string // Auto (default: try, then fall back to copy), On (must), Off
	XDPMode   string // Auto (default: native, then generic), XDPNative, XDPGeneric
}

// MLX5 is [port.mlx5], used when the port runs on the userspace mlx5 driver
// (vfio or mlx5-sim). Zero in StridesPerWQE or LogStrideSize means "auto":
// derived from the MTU and the device caps.
type MLX5 struct {
	RQLogSize        int    // log2 of striding-RQ WQEs, 2..13, default 6
	StridesPerWQE    int    // power of two 8..65536, or 0 = auto (default)
	LogStrideSize    int    // 6..13 (64 B..8 KiB), or 0 = auto (default)
	SQLogSize        int    // log2 of SQ WQEBBs, 6..15, default 10
	TxFragmentSize   int    // SQ fragment bytes, power of two ≥ 64, default 4096 (64 WQEBBs)
	PrefetchDistance int    // stride-ahead prefetch distance, 0 = off, default 4
	CQECompression   string // Auto (default), Off, CQECompressionBasic, CQECompressionEnhanced
	TxEdgePolicy     string // TxEdgeReuse (default) or TxEdgeNOP
}

// Route is one [[route]]: a static route.
type Route struct {
	Prefix netip.Prefix
	// Via is the next hop; invalid (zero) for a route straight out of Port.
	Via netip.Addr
	// Port is the egress port; when the file leaves it out it is filled
	// in with the port whose subnet holds Via.
	Port   string
	Metric int // lower wins among routes to one prefix; default 0
}

// Ciphers the data channel offers, by OpenVPN name.
const (
	CipherAES256GCM        = "AES-256-GCM"
	CipherAES128GCM        = "AES-128-GCM"
	CipherChaCha20Poly1305 = "CHACHA20-POLY1305"
)

// VPN is [vpn]: the OpenVPN-compatible server and site-to-site uplinks.
// Paths are resolved against the directory of the config file.
type VPN struct {
	Enabled bool // runs the server role; default false
	// Listen addresses (dual-stack by default: 0.0.0.0 and ::).
	Listen []netip.Addr
	Port   int // UDP port, default 1194

	CA, Cert, Key string // PEM paths, required when enabled
	// Exactly one of TLSCrypt (tls-crypt v1 key, recommended) and TLSAuth
	// (tls-auth key, with KeyDirection 0 or 1, default 0) is set when enabled.
	TLSCrypt      string
	TLSAuth       string
	KeyDirection  int
	TLSAuthDigest string // tls-auth HMAC (openvpn's auth): "SHA1" (default), "SHA256" or "SHA512"
	TLSCryptV2    string // tls-crypt-v2 server key; instead of TLSCrypt/TLSAuth

	PoolV4, PoolV6 netip.Prefix   // client address pools; at least one when enabled
	PushRoutes     []netip.Prefix // pushed to clients as route / route-ipv6
	Ciphers        []string       // offered data ciphers, default all three

	KeepaliveInterval time.Duration // default 10s
	KeepaliveTimeout  time.Duration // default 60s, at least twice the interval
	RenegSec          int           // seconds between data key renegotiations, default 3600, 0 = never

	MaxPeers    int // default 1024
	MaxHalfOpen int // handshakes in progress at once, default 256
	// Per source (IPv4 address, IPv6 /64): handshakes in progress, default 16.
	MaxHalfOpenPerSource int
	HandshakeTimeout     time.Duration // a key's TLS handshake, default 10s
	HandshakeRate        int           // new handshakes accepted per second, default 200
	ReplayWindow         int           // packets, power of two ≥ 64, default 2048
	TunMTU               int           // pushed tun-mtu, default 1500
	CompressStub         bool          // accept clients configured with comp-lzo no / compress (framing only); default true

	// Operator policy (openvpn's client-to-client, duplicate-cn,
	// crl-verify, ifconfig-pool-persist, push "redirect-gateway" and
	// "dhcp-option"); all reloadable on SIGHUP.
	ClientToClient  bool         // peers may reach each other through ovfwd; default false
	DuplicateCN     bool         // several sessions per common name; default false: a new one replaces the old
	CRL             string       // PEM or DER CRL of the CA; "" = none
	PoolPersist     string       // file keeping each common name's pool addresses across restarts; "" = off
	RedirectGateway []string     // "ipv4" and/or "ipv6": push redirect-gateway def1 [ipv6]
	DNS             []netip.Addr // pushed dhcp-option DNS / DNS6
	DNSDomain       string       // pushed dhcp-option DOMAIN

	// Username/password authentication (openvpn's auth-user-pass-verify
	// via-file, deferred; username-as-common-name; verify-client-cert).
	AuthUserPassVerify   []string      // command and leading arguments; empty = off
	AuthTimeout          time.Duration // default 30s
	AuthConcurrency      int           // commands at once, default 64
	AuthFailLimit        int           // failed logins per source address per window, default 5; 0 = no limit
	AuthFailWindow       time.Duration // default 60s
	UsernameAsCommonName bool
	VerifyClientCert     string // "require" (default), "optional" or "none"

	Hooks VPNHooks // client_connect, client_disconnect, learn_address (hooks.go)

	Clients []VPNClient
	IRoutes []VPNIRoute
	CCD     []VPNCCD
}

// verify_client_cert values.
const (
	VerifyRequire  = "require"
	VerifyOptional = "optional"
	VerifyNone     = "none"
)

// VPNCCD is one [[vpn.ccd]]: settings for the client whose certificate
// carries CommonName, as a file in openvpn's client-config-dir
// (ifconfig-push, ifconfig-ipv6-push, push "route", iroute, disable).
type VPNCCD struct {
	CommonName string
	IPv4, IPv6 netip.Addr     // fixed tunnel addresses, inside the pools
	PushRoutes []netip.Prefix // pushed to this client besides [vpn] push_routes
	IRoutes    []netip.Prefix // networks behind this client, as [[vpn.iroute]] routes
	Disable    bool           // refuse this client (AUTH_FAILED)
	Group      string         // its [[acl]] group (ingress "group:NAME")
}

// VPNIRoute is one [[vpn.iroute]]: networks behind one client (a site-to-site
// peer), as openvpn's iroute in a client-config-dir file. While a client
// whose certificate carries CommonName is connected, Routes lead into its
// tunnel and it may send from addresses in them.
type VPNIRoute struct {
	CommonName string
	Routes     []netip.Prefix
}

// DefaultUplinkMTU is an uplink's inner MTU unless [[vpn.client]] mtu says
// otherwise: a 1500-byte path minus the outer IPv6, UDP and P_DATA_V2
// header and tag (40+8+8+16), rounded down as WireGuard's 1420 is.
const DefaultUplinkMTU = 1420

// VPNClient is one [[vpn.client]]: a site-to-site uplink where ovfwd is the
// OpenVPN client. Uplinks run whether or not the server role is enabled.
type VPNClient struct {
	Name     string
	Remote   string // "host:port"; host may be a DNS name
	CA       string
	Cert     string
	Key      string
	TLSCrypt string
	Routes   []netip.Prefix // prefixes reached through this uplink
	MTU      int            // largest inner IP packet, 1280..2048, default DefaultUplinkMTU
}

// Netlink is [netlink]: mirroring the kernel's view into the FIB.
type Netlink struct {
	Routes     bool // mirror the kernel routes of Table; default false
	Table      int  // kernel routing table, default 254 (main)
	Neighbours bool // mirror kernel neighbours; default false
}

// Export is [export]: what the appliance owns (its VPN pools, the iroutes of
// connected clients), installed into a kernel routing table for a routing
// daemon to announce while the appliance is ready.
type Export struct {
	Enabled  bool   // default false
	Device   string // TUN device the routes lead to, default "ovfwd-export"
	Table    int    // kernel routing table, default 200; not [netlink] table
	Protocol int    // rtm_protocol of the routes, 5..255, default 201
	Metric   int    // route priority, default 0
	// Routes are announced with the pools while ready, e.g. an anycast
	// prefix several appliances serve (the upstream spreads it by ECMP).
	Routes []netip.Prefix
	// WorkerStall is how long a data-plane worker may go without
	// completing a poll before the appliance counts as failed and
	// withdraws its routes; default 3 s.
	WorkerStall time.Duration
}

// Metrics is [metrics]: the Prometheus endpoint.
type Metrics struct {
	// Listen is the HTTP address; invalid (zero) when the file sets "" (off).
	// Default 127.0.0.1:9469.
	Listen netip.AddrPort
	// Socket, when set (an absolute path), also serves the endpoint on a
	// unix socket, for hosts where no TCP listener may be open. Default "".
	Socket string
}

// Status is [status]: the unix socket `ovfwd status` talks to.
type Status struct {
	Socket string // absolute path, default /run/ovfwd/ovfwd.sock, "" = off
	File   StatusFile
	// ReadGroup's members may read the status; WriteGroup's may also
	// kill and drain (and run the management interface's write commands).
	// "": no read group (the socket's mode decides who reads), and the
	// daemon's own group writes.
	ReadGroup, WriteGroup string
}

// Log is [log].
type Log struct {
	Level  string // debug, info (default), warn, error
	Format string // text (default) or json
}

// Default is the configuration of an empty file.
func Default() *Config {
	return &Config{
		Appliance: Appliance{
			Mode:               ModeRouter,
			Poll:               PollAdaptive,
			Batch:              64,
			ICMPRate:           1000,
			NeighbourReachable: 30 * time.Second,
			NeighbourTimeout:   3 * time.Second,
			NeighbourHold:      4,
			NeighbourTable:     16384,
			GleanSourceRate:    50,
			GleanSourceBurst:   64,
			GleanPortRate:      500,
			GleanPortBurst:     256,
			BridgeAging:        300 * time.Second,
			FastPath:           FastPathAuto,
		},
		VPN: VPN{
			Listen:               []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()},
			Port:                 1194,
			Ciphers:              []string{CipherAES256GCM, CipherAES128GCM, CipherChaCha20Poly1305},
			KeepaliveInterval:    10 * time.Second,
			KeepaliveTimeout:     60 * time.Second,
			RenegSec:             3600,
			MaxPeers:             1024,
			MaxHalfOpen:          256,
			MaxHalfOpenPerSource: 16,
			HandshakeTimeout:     10 * time.Second,
			HandshakeRate:        200,
			ReplayWindow:         2048,
			TunMTU:               1500,
			CompressStub:         true,
			TLSAuthDigest:        "SHA1",
			AuthTimeout:          30 * time.Second,
			AuthConcurrency:      64,
			AuthFailLimit:        5,
			AuthFailWindow:       60 * time.Second,
			VerifyClientCert:     VerifyRequire,
			Hooks:                defaultVPNHooks(),
		},
		Netlink:    Netlink{Table: 254},
		Export:     Export{Device: "ovfwd-export", Table: 200, Protocol: 201, WorkerStall: 3 * time.Second},
		Metrics:    Metrics{Listen: netip.MustParseAddrPort("127.0.0.1:9469")},
		Status:     Status{Socket: "/run/ovfwd/ovfwd.sock", File: DefaultStatusFile()},
		Management: DefaultManagement(),
		Log:        Log{Level: "info", Format: "text"},
		NATOptions: DefaultNATOptions(),
	}
}

func defaultPort() Port {
	return Port{
		Driver: DriverAuto,
		MTU:    1500,
		AFXDP: AFXDP{
			FrameSize: 4096, Frames: 4096,
			RxRing: 2048, TxRing: 2048, FillRing: 2048, CompRing: 2048,
			ZeroCopy: Auto, XDPMode: Auto,
		},
		MLX5: MLX5{
			RQLogSize:        6,
			SQLogSize:        10,
			TxFragmentSize:   4096,
			PrefetchDistance: 4,
			CQECompression:   Auto,
			TxEdgePolicy:     TxEdgeReuse,
		},
	}
}
