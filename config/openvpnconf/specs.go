package openvpnconf

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// spec is what import does with one option. apply, when set, reads the
// parameters into the translation and may turn the row into a refusal.
type spec struct {
	verdict Verdict
	keys    string
	note    string
	fatal   bool
	apply   func(t *translator, d Directive, r *Row)
}

func notNeeded(note string) spec { return spec{verdict: NotNeeded, note: note} }
func refused(note string) spec   { return spec{verdict: Refused, note: note} }

const (
	noTCP = "not supported: ovfwd's VPN is UDP only (its data path runs P_DATA_V2 datagrams through the workers); " +
		"serve these clients over UDP (their profiles need proto udp), or keep openvpn for them"
	noScripts = "not supported: ovfwd runs no per-client scripts or plugins; per-client settings are [[vpn.ccd]], " +
		"addresses and routes are in `ovfwd status`"
	noManagement = "not imported: set [management] socket, or listen with password_file, by hand (docs/monitoring.md); " +
		"`ovfwd status` (-json) and `ovfwd kill NAME` also talk to the [status] socket (group ovfwd)"
	unitUser = "the packaged systemd unit runs ovfwd as user ovfwd with only the capabilities it needs"
)

var specs map[string]spec

func init() {
	specs = map[string]spec{
		"port": {verdict: Mapped, keys: "port", apply: func(t *translator, d Directive, r *Row) {
			if n, ok := atoi(d, r, 0, 1, 65535); ok {
				t.v.port = n
				if n < 1024 {
					r.Note = "below 1024: the unit needs CAP_NET_BIND_SERVICE (`ovfwd check` says how)"
				}
			}
		}},
		"lport": {verdict: Mapped, keys: "port", apply: func(t *translator, d Directive, r *Row) {
			if n, ok := atoi(d, r, 0, 1, 65535); ok {
				t.v.port = n
			}
		}},
		"proto": {verdict: Mapped, keys: "listen", note: "udp: the default dual-stack socket; udp4/udp6: one family; any tcp form is refused and import writes nothing (the VPN is UDP only)", apply: func(t *translator, d Directive, r *Row) {
			if !wantArgs(d, r, 1, 1) {
				return
			}
			switch strings.ToLower(d.Args[0]) {
			case "udp":
				r.Verdict, r.Keys, r.Note = NotNeeded, "", "UDP over IPv4 and IPv6 is the default (listen = [\"0.0.0.0\", \"::\"])"
			case "udp4":
				if len(t.v.listen) == 0 {
					t.v.listen = []string{"0.0.0.0"}
				}
			case "udp6":
				if len(t.v.listen) == 0 {
					t.v.listen = []string{"::"}
				}
				r.Note = "an IPv6 socket serves IPv4 clients too (IPV6_V6ONLY off), as openvpn's udp6"
			case "tcp", "tcp-server", "tcp4", "tcp6", "tcp4-server", "tcp6-server":
				refuse(r, noTCP)
				r.Fatal = true
			default:
				refuse(r, "unknown protocol %q", d.Args[0])
				r.Fatal = true
			}
		}},
		"local": {verdict: Mapped, keys: "listen", apply: func(t *translator, d Directive, r *Row) {
			if !wantArgs(d, r, 1, 3) {
				return
			}
			a, err := netip.ParseAddr(d.Args[0])
			if err != nil {
				refuse(r, "%q is not an address: ovfwd listens on addresses, not names", d.Args[0])
				return
			}
			if len(d.Args) > 1 {
				r.Note = "only the address is used: ovfwd listens on one port (`port`)"
			}
			t.v.listen = []string{a.String()}
		}},
		"dev": {verdict: NotNeeded, note: "tun: ovfwd has no tun device, tunnel traffic is routed by its own forwarding table; tap is refused and import writes nothing", apply: func(t *translator, d Directive, r *Row) {
			if len(d.Args) > 0 && strings.HasPrefix(d.Args[0], "tap") {
				refuse(r, "not supported: the VPN is routed (layer 3, dev tun); TAP bridging has no equivalent")
				r.Fatal = true
			}
		}},
		"dev-type": {verdict: NotNeeded, note: "tun is the only kind", apply: func(t *translator, d Directive, r *Row) {
			if len(d.Args) > 0 && d.Args[0] == "tap" {
				refuse(r, "not supported: the VPN is routed (layer 3)")
				r.Fatal = true
			}
		}},
		"dev-node":      notNeeded("ovfwd opens no tun device"),
		"server-bridge": {verdict: Refused, fatal: true, note: "not supported: the VPN is routed (layer 3); bridging clients into a LAN has no equivalent"},
		"mode": {verdict: NotNeeded, note: "ovfwd is always a multi-client server", apply: func(t *translator, d Directive, r *Row) {
			if len(d.Args) == 1 && d.Args[0] != "server" {
				refuse(r, "not supported: only mode server (point-to-point static setups have no equivalent)")
				r.Fatal = true
			}
		}},
		"tls-server":       notNeeded("ovfwd is always the TLS server"),
		"topology":         {verdict: NotNeeded, note: "subnet always: ovfwd pushes topology subnet and every 2.4+ client applies it; net30/p2p client addressing is not reproduced", apply: topology},
		"ca":               {verdict: Mapped, keys: "ca", apply: func(t *translator, d Directive, r *Row) { t.file(d, r, &t.v.ca) }},
		"cert":             {verdict: Mapped, keys: "cert", apply: func(t *translator, d Directive, r *Row) { t.file(d, r, &t.v.cert) }},
		"key":              {verdict: Mapped, keys: "key", apply: func(t *translator, d Directive, r *Row) { t.file(d, r, &t.v.key) }},
		"tls-crypt":        {verdict: Mapped, keys: "tls_crypt", apply: func(t *translator, d Directive, r *Row) { t.file(d, r, &t.v.tlsCrypt) }},
		"tls-crypt-v2":     {verdict: Mapped, keys: "tls_crypt_v2", apply: tlsCryptV2},
		"tls-auth":         {verdict: Mapped, keys: "tls_auth, key_direction", apply: tlsAuth},
		"key-direction":    {verdict: Mapped, keys: "key_direction", apply: keyDirection},
		"auth":             {verdict: Mapped, keys: "tls_auth_digest", apply: func(t *translator, d Directive, r *Row) { t.authLine, t.authArg = d.Line, strings.Join(d.Args, " ") }},
		"crl-verify":       {verdict: Mapped, keys: "crl", apply: crlVerify},
		"dh":               notNeeded("TLS uses ECDHE (X25519, P-256, P-384); no DH parameters"),
		"ecdh-curve":       notNeeded("TLS uses ECDHE with X25519, P-256 and P-384"),
		"tls-groups":       notNeeded("TLS uses ECDHE with X25519, P-256 and P-384"),
		"tls-version-min":  {verdict: NotNeeded, note: "TLS 1.2 is the minimum, 1.3 preferred", apply: tlsVersionMin},
		"tls-version-max":  refused("not configurable: TLS 1.2 and 1.3 are both served"),
		"tls-cipher":       notNeeded("not configurable: Go's TLS 1.2 suites are AEAD with ECDHE only, which is what such lists usually ask for"),
		"tls-ciphersuites": notNeeded("not configurable: Go's TLS 1.3 suites (AES-GCM, CHACHA20-POLY1305)"),
		"tls-cert-profile": notNeeded("not configurable: Go's certificate checks refuse MD5 and short RSA keys"),
		"remote-cert-tls":  notNeeded("always: client certificates must allow TLS client authentication"),
		"verify-client-cert": {verdict: Mapped, keys: "verify_client_cert", apply: func(t *translator, d Directive, r *Row) {
			if !wantArgs(d, r, 1, 1) {
				return
			}
			switch d.Args[0] {
			case "none", "optional", "require":
				t.v.verifyClientCert = d.Args[0]
			default:
				refuse(r, "unknown value %q", d.Args[0])
			}
		}},
		"server":                {verdict: Mapped, keys: "pool_v4", note: "the server takes .1, clients the rest", apply: server},
		"server-ipv6":           {verdict: Mapped, keys: "pool_v6", apply: serverIPv6},
		"ifconfig-pool-persist": {verdict: Mapped, keys: "pool_persist", note: "same file format; the ovfwd user must be able to write its directory (`ovfwd check` says)", apply: poolPersist},
		"ifconfig-pool":         refused("not supported: the pool is the whole `server` subnet; fixed addresses ([[vpn.ccd]]) are reserved out of it"),
		"data-ciphers":          {verdict: Mapped, keys: "ciphers", apply: dataCiphers},
		"ncp-ciphers":           {verdict: Mapped, keys: "ciphers", note: "the 2.4 name of data-ciphers", apply: dataCiphers},
		"cipher":                {verdict: NotNeeded, note: "an AEAD cipher is negotiated from data-ciphers anyway; a CBC cipher is refused (only clients older than 2.4 use it)", apply: cipher},
		"data-ciphers-fallback": refused("not supported: CBC/HMAC data channels (clients older than 2.4, without cipher negotiation)"),
		"ncp-disable":           refused("not supported: clients must negotiate an AEAD cipher (2.4+)"),
		"compress":              {verdict: Mapped, keys: "compress_stub", note: "framing only (compress migrate semantics): ovfwd never compresses", apply: func(t *translator, d Directive, r *Row) { t.v.compress = true }},
		"comp-lzo":              {verdict: Mapped, keys: "compress_stub", note: "framing only: ovfwd never compresses", apply: func(t *translator, d Directive, r *Row) { t.v.compress = true }},
		"allow-compression":     notNeeded("ovfwd never compresses; compress_stub accepts clients that ask for compression framing"),
		"client-to-client":      {verdict: Mapped, keys: "client_to_client", apply: func(t *translator, d Directive, r *Row) { t.v.clientToClient = true }},
		"duplicate-cn":          {verdict: Mapped, keys: "duplicate_cn", apply: func(t *translator, d Directive, r *Row) { t.v.duplicateCN = true }},
		"client-config-dir": {verdict: Mapped, keys: "[[vpn.ccd]]", note: "each file becomes a [[vpn.ccd]] (rows \"ccd …\")", apply: func(t *translator, d Directive, r *Row) {
			if wantArgs(d, r, 1, 1) {
				t.ccdDir, t.ccdLine = t.abs(d.Args[0]), d.Line
			}
		}},
		"ccd-exclusive":            refused("not supported: clients without a [[vpn.ccd]] are admitted (keep clients out with the CRL or verify_client_cert)"),
		"route":                    notNeeded("ovfwd routes an iroute's prefix into the client's tunnel while it is connected; no kernel route is needed"),
		"route-ipv6":               notNeeded("ovfwd routes an iroute's prefix into the client's tunnel while it is connected; no kernel route is needed"),
		"auth-user-pass-verify":    {verdict: Mapped, keys: "auth_user_pass_verify", note: "same contract (credentials file as last argument, exit 0 admits)", apply: authVerify},
		"username-as-common-name":  {verdict: Mapped, keys: "username_as_common_name", apply: func(t *translator, d Directive, r *Row) { t.v.usernameAsCN = true }},
		"client-cert-not-required": {verdict: Mapped, keys: "verify_client_cert", note: "the pre-2.4 spelling of verify-client-cert none", apply: func(t *translator, d Directive, r *Row) { t.v.verifyClientCert = "none" }},
		"script-security":          notNeeded("auth_user_pass_verify runs without it, with a minimal PATH as the ovfwd user"),
		"client-connect":           {verdict: Mapped, keys: "client_connect", note: "same environment and dynamic config file (ifconfig-push, push, iroute, disable); deferred through client_connect_deferred_file", apply: hook(func(v *vpn) *[]string { return &v.clientConnect })},
		"client-disconnect":        {verdict: Mapped, keys: "client_disconnect", note: "same environment, with bytes_received/bytes_sent/time_duration", apply: hook(func(v *vpn) *[]string { return &v.clientDisconnect })},
		"learn-address":            {verdict: Mapped, keys: "learn_address", note: "same arguments (add|delete ADDR CN)", apply: hook(func(v *vpn) *[]string { return &v.learnAddress })},
		"tls-verify":               refused(noScripts),
		"plugin":                   refused(noScripts),
		"up":                       refused(noScripts),
		"down":                     refused(noScripts),
		"route-up":                 refused(noScripts),
		"ipchange":                 refused(noScripts),
		"auth-gen-token":           refused("not supported: clients re-send their password on renegotiation"),
		"keepalive":                {verdict: Mapped, keys: "keepalive_interval, keepalive_timeout", note: "pushed as ping/ping-restart; the server reaps after twice the timeout", apply: keepalive},
		"reneg-sec":                {verdict: Mapped, keys: "reneg_sec", apply: renegSec},
		"hand-window":              {verdict: NotNeeded, note: "fixed at openvpn's default, 60 s; another value is refused", apply: fixedAt(60)},
		"tran-window":              {verdict: NotNeeded, note: "fixed at openvpn's default, 3600 s; another value is refused", apply: fixedAt(3600)},
		"max-clients": {verdict: Mapped, keys: "max_peers", apply: func(t *translator, d Directive, r *Row) {
			if n, ok := atoi(d, r, 0, 1, 1<<20); ok {
				t.v.maxPeers = n
			}
		}},
		"connect-freq":  {verdict: Mapped, keys: "handshake_rate", note: "new handshakes per second", apply: connectFreq},
		"replay-window": {verdict: Mapped, keys: "replay_window", note: "packets, rounded up to a power of two; the time window is not needed", apply: replayWindow},
		"tun-mtu": {verdict: Mapped, keys: "tun_mtu", note: "pushed to clients", apply: func(t *translator, d Directive, r *Row) {
			if n, ok := atoi(d, r, 0, 576, 9000); ok {
				t.v.tunMTU = n
			}
		}},
		"mssfix":               {verdict: Mapped, keys: "appliance.mss_clamp", note: "MSS = mssfix − 92 (outer IPv4+UDP 28, P_DATA_V2 header and tag 24, inner IPv4+TCP 40), clamped both ways on routed traffic", apply: mssfix},
		"fragment":             refused("not supported (data-channel fragmentation): clients rely on PMTU discovery and the MSS clamp"),
		"float":                notNeeded("always: a client's address follows its authenticated data packets"),
		"explicit-exit-notify": notNeeded("always: on stop ovfwd tells every client to reconnect, and honours clients' exit notices"),
		"user":                 notNeeded(unitUser),
		"group":                notNeeded(unitUser),
		"persist-key":          notNeeded("nothing to persist: ovfwd never drops privileges at run time"),
		"persist-tun":          notNeeded("nothing to persist: ovfwd has no tun device"),
		"daemon":               notNeeded("systemd runs ovfwd in the foreground"),
		"writepid":             notNeeded("systemd tracks the process"),
		"nice":                 notNeeded("the data-plane workers set their own priority (the unit's LimitNICE)"),
		"status": refused("not imported: set [status] file and file_interval by hand (docs/monitoring.md), at a path " +
			"the ovfwd user can write, e.g. /run/ovfwd/openvpn-status.log, and point the tools that read it there"),
		"status-version":         refused("not imported: [status] file_version (see status)"),
		"management":             refused(noManagement),
		"management-client-auth": refused("not supported: clients are authenticated by auth_user_pass_verify"),
		"management-hold":        refused("not supported: ovfwd serves clients from its start, with no hold to release"),
		"management-log-cache":   notNeeded("the management interface keeps the last 250 log lines"),
		"verb": {verdict: Mapped, keys: "log.level", note: "0 error, 1-2 warn, 3-4 info, 5+ debug", apply: func(t *translator, d Directive, r *Row) {
			if n, ok := atoi(d, r, 0, 0, 11); ok {
				t.logLevel = logLevel(n)
			}
		}},
		"mute":                  notNeeded("journald rate-limits repeated messages (RateLimitBurst)"),
		"log":                   notNeeded("ovfwd logs to standard error: the journal under systemd"),
		"log-append":            notNeeded("ovfwd logs to standard error: the journal under systemd"),
		"syslog":                notNeeded("ovfwd logs to standard error: the journal under systemd"),
		"sndbuf":                notNeeded("the data path is ovfwd's own (AF_XDP or its mlx5 driver)"),
		"rcvbuf":                notNeeded("the data path is ovfwd's own (AF_XDP or its mlx5 driver)"),
		"txqueuelen":            notNeeded("ovfwd has no tun device"),
		"fast-io":               notNeeded("the data path is ovfwd's own (AF_XDP or its mlx5 driver)"),
		"tun-ipv6":              notNeeded("obsolete since 2.3: IPv6 in the tunnel needs nothing besides server-ipv6"),
		"port-share":            refused("not supported: it shares a TCP port with a web server, and ovfwd's VPN is UDP only"),
		"ignore-unknown-option": notNeeded("import reads every option itself"),
		"setenv":                notNeeded("environment for scripts, which ovfwd does not run"),
		"cd":                    {verdict: Mapped, note: "relative paths are resolved against it"},
		"tls-crypt-v2-verify":   refused("not supported: client keys are checked by their wrapping alone"),
		"tls-crypt-v2-max-age":  refused("not supported"),
		"secret":                {verdict: Refused, fatal: true, note: "not supported: static-key (pre-shared key, no TLS) mode"},
		"ifconfig":              refused("not needed with `server`, and not supported without it: the server takes the pool's .1"),
		"push-reset":            refused("not supported on the server"),
		"push-remove":           refused("not supported: ovfwd pushes only what its own keys say"),
		"max-routes-per-client": notNeeded("iroutes are bounded by the [[vpn.ccd]] entries themselves"),
		"opt-verify":            notNeeded("removed in 2.6"),
		"multihome":             notNeeded("ovfwd answers from the address a client sent to (IP_PKTINFO)"),
	}
}

// pushSpecs are the pushed options, by name (dhcp-option with its kind).
var pushSpecs = map[string]spec{
	"route":                             {verdict: Mapped, keys: "push_routes", apply: pushRoute},
	"route-ipv6":                        {verdict: Mapped, keys: "push_routes", apply: pushRoute},
	"redirect-gateway":                  {verdict: Mapped, keys: "redirect_gateway", note: "for clients to reach the internet through ovfwd its WAN address must translate them: a [[nat]] rule (docs/nat.md)", apply: redirectGateway},
	"dhcp-option DNS":                   {verdict: Mapped, keys: "dns", note: "Windows/macOS clients apply it; Linux clients through an up script", apply: pushDNS},
	"dhcp-option DNS6":                  {verdict: Mapped, keys: "dns", apply: pushDNS},
	"dhcp-option DOMAIN":                {verdict: Mapped, keys: "dns_domain", apply: pushDomain},
	"dhcp-option DOMAIN-SEARCH":         refused("not supported: ovfwd pushes one DOMAIN (dns_domain) and no search list"),
	"dhcp-option ADAPTER_DOMAIN_SUFFIX": refused("not supported: ovfwd pushes one DOMAIN (dns_domain)"),
	"dhcp-option WINS":                  refused("not supported"),
	"dhcp-option NTP":                   refused("not supported"),
	"dhcp-option DISABLE-NBT":           refused("not supported"),
	"block-outside-dns":                 refused("not supported: ovfwd pushes only what it implements; Windows clients may then ask their local resolvers too (add block-outside-dns to the client profiles instead)"),
	"block-ipv6":                        refused("not supported: give clients IPv6 (server-ipv6 and redirect-gateway ipv6) or add block-ipv6 to the client profiles"),
	"tun-ipv6":                          notNeeded("obsolete since 2.3: clients ignore it"),
	"topology":                          notNeeded("ovfwd pushes topology subnet"),
	"ping":                              notNeeded("ovfwd pushes ping/ping-restart from keepalive"),
	"ping-restart":                      notNeeded("ovfwd pushes ping/ping-restart from keepalive"),
	"explicit-exit-notify":              refused("not supported: ovfwd pushes only what it implements; add explicit-exit-notify to the client profiles"),
	"comp-lzo":                          notNeeded("compress_stub pushes the compression framing"),
	"compress":                          notNeeded("compress_stub pushes the compression framing"),
	"persist-key":                       notNeeded("a client-side option; clients keep what their profile says"),
	"persist-tun":                       notNeeded("a client-side option; clients keep what their profile says"),
	"sndbuf":                            notNeeded("clients keep their defaults"),
	"rcvbuf":                            notNeeded("clients keep their defaults"),
}

// fixedAt accepts an option only at the value ovfwd has built in.
func fixedAt(n int) func(t *translator, d Directive, r *Row) {
	return func(t *translator, d Directive, r *Row) {
		if len(d.Args) != 1 || d.Args[0] != strconv.Itoa(n) {
			refuse(r, "not configurable: ovfwd uses %d s", n)
		}
	}
}

func topology(t *translator, d Directive, r *Row) {
	if len(d.Args) == 1 && d.Args[0] != "subnet" {
		r.Verdict = Refused
		r.Note = "not supported: ovfwd pushes topology subnet (each client one address of the pool), which every 2.4+ client applies; net30/p2p /30 pairs are not reproduced"
	}
}

func tlsCryptV2(t *translator, d Directive, r *Row) {
	t.file(d, r, &t.v.tlsCryptV2)
	if len(d.Args) > 1 && d.Args[1] == "force-cookie" {
		r.Note = "always as force-cookie: 2.6+ clients"
	}
}

func tlsAuth(t *translator, d Directive, r *Row) {
	t.file(d, r, &t.v.tlsAuth)
	if len(d.Args) >= 2 {
		n, ok := atoi(d, r, 1, 0, 1)
		if ok {
			t.v.keyDirection = &n
		}
	}
	if r.Verdict == Mapped && r.Note == "" {
		r.Note = "clients keep key-direction 1"
	}
}

func keyDirection(t *translator, d Directive, r *Row) {
	if n, ok := atoi(d, r, 0, 0, 1); ok {
		t.v.keyDirection = &n
	}
}

func crlVerify(t *translator, d Directive, r *Row) {
	if len(d.Args) > 1 && d.Args[1] == "dir" {
		refuse(r, "not supported: a directory of revoked serials; give a CRL file (easyrsa gen-crl)")
		return
	}
	t.file(d, r, &t.v.crl)
	if r.Verdict == Mapped {
		r.Note = "re-read within a second of changing"
	}
}

func tlsVersionMin(t *translator, d Directive, r *Row) {
	if len(d.Args) > 0 && d.Args[0] != "1.0" && d.Args[0] != "1.1" && d.Args[0] != "1.2" {
		refuse(r, "not configurable: TLS 1.2 is accepted as well as 1.3")
	}
}

func server(t *translator, d Directive, r *Row) {
	if !wantArgs(d, r, 2, 3) {
		return
	}
	p, err := netmask(d.Args[0], d.Args[1])
	if err != nil {
		refuse(r, "%v", err)
		r.Fatal = true
		return
	}
	if p.Bits() > 29 {
		refuse(r, "pool %v is too small: ovfwd wants a /29 or larger", p)
		r.Fatal = true
		return
	}
	if len(d.Args) == 3 {
		refuse(r, "nopool is not supported: every client gets a pool address unless its [[vpn.ccd]] fixes one")
		return
	}
	t.v.pool4 = p.Masked()
}

func serverIPv6(t *translator, d Directive, r *Row) {
	if !wantArgs(d, r, 1, 1) {
		return
	}
	p, err := netip.ParsePrefix(d.Args[0])
	if err != nil || !p.Addr().Is6() || p.Bits() > 124 {
		refuse(r, "%q is not an IPv6 prefix of /124 or larger", d.Args[0])
		return
	}
	t.v.pool6 = p.Masked()
	r.Note = "clients from ::1000, as openvpn"
}

func poolPersist(t *translator, d Directive, r *Row) {
	if !wantArgs(d, r, 1, 2) {
		return
	}
	t.v.poolPersist = t.abs(d.Args[0])
	if len(d.Args) == 2 {
		r.Note += "; written when leases change (the seconds parameter is not needed)"
	}
}

var aead = map[string]string{"AES-256-GCM": "AES-256-GCM", "AES-128-GCM": "AES-128-GCM", "CHACHA20-POLY1305": "CHACHA20-POLY1305"}

func dataCiphers(t *translator, d Directive, r *Row) {
	if !wantArgs(d, r, 1, 1) {
		return
	}
	var kept, dropped []string
	for _, c := range strings.Split(d.Args[0], ":") {
		c = strings.ToUpper(strings.TrimPrefix(c, "?"))
		if name, ok := aead[c]; ok {
			if !contains(kept, name) {
				kept = append(kept, name)
			}
		} else if c != "" {
			dropped = append(dropped, c)
		}
	}
	if len(kept) == 0 {
		refuse(r, "no AEAD cipher in the list: ovfwd's data channel is AES-256-GCM, AES-128-GCM or CHACHA20-POLY1305")
		return
	}
	t.v.ciphers = kept
	if len(dropped) > 0 {
		r.Note = "dropped " + strings.Join(dropped, ", ") + ": only AEAD ciphers are supported"
	}
}

func cipher(t *translator, d Directive, r *Row) {
	if !wantArgs(d, r, 1, 1) {
		return
	}
	if _, ok := aead[strings.ToUpper(d.Args[0])]; ok {
		r.Note = "2.6 negotiates the data cipher from data-ciphers; cipher is only the fallback for clients that cannot"
		return
	}
	refuse(r, "%s is only used with clients older than 2.4 (no cipher negotiation), which ovfwd does not serve: "+
		"2.4+ clients with this profile line negotiate an AEAD cipher (AES-256-GCM) and connect unchanged", d.Args[0])
}

func authVerify(t *translator, d Directive, r *Row) {
	if !wantArgs(d, r, 2, 2) {
		return
	}
	if d.Args[1] != "via-file" {
		refuse(r, "only via-file is supported (via-env would put the password in the environment)")
		return
	}
	// openvpn splits the command on spaces itself (argv_parse_cmd).
	cmd := strings.Fields(d.Args[0])
	if len(cmd) == 0 {
		refuse(r, "empty command")
		return
	}
	if !strings.HasPrefix(cmd[0], "/") {
		cmd[0] = t.abs(cmd[0])
	}
	t.v.authVerify = cmd
}

// hook maps a script option to its [vpn] command, split on spaces as
// openvpn splits it (argv_parse_cmd), a relative program made absolute.
func hook(field func(*vpn) *[]string) func(t *translator, d Directive, r *Row) {
	return func(t *translator, d Directive, r *Row) {
		if !wantArgs(d, r, 1, 1) {
			return
		}
		cmd := strings.Fields(d.Args[0])
		if len(cmd) == 0 {
			refuse(r, "empty command")
			return
		}
		if !strings.HasPrefix(cmd[0], "/") {
			cmd[0] = t.abs(cmd[0])
		}
		*field(&t.v) = cmd
	}
}

func keepalive(t *translator, d Directive, r *Row) {
	if !wantArgs(d, r, 2, 2) {
		return
	}
	a, ok1 := atoi(d, r, 0, 1, 3600)
	if !ok1 {
		return
	}
	b, ok2 := atoi(d, r, 1, 2, 7200)
	if !ok2 {
		return
	}
	if b < 2*a {
		refuse(r, "ovfwd wants the timeout at least twice the interval (as openvpn warns)")
		return
	}
	t.v.keepalive = [2]int{a, b}
}

func renegSec(t *translator, d Directive, r *Row) {
	if n, ok := atoi(d, r, 0, 0, 7*24*3600); ok {
		t.v.renegSec = &n
	}
}

func connectFreq(t *translator, d Directive, r *Row) {
	if !wantArgs(d, r, 2, 2) {
		return
	}
	n, ok := atoi(d, r, 0, 1, 100_000)
	if !ok {
		return
	}
	s, ok := atoi(d, r, 1, 1, 3600)
	if !ok {
		return
	}
	t.v.handshakeRate = max(1, (n+s-1)/s)
}

func replayWindow(t *translator, d Directive, r *Row) {
	n, ok := atoi(d, r, 0, 1, 65536)
	if !ok {
		return
	}
	w := 64
	for w < n {
		w <<= 1
	}
	t.v.replayWindow = w
}

func mssfix(t *translator, d Directive, r *Row) {
	if len(d.Args) == 0 {
		t.mss = 1450 - 92
		return
	}
	n, ok := atoi(d, r, 0, 0, 9000)
	if !ok {
		return
	}
	if n == 0 {
		r.Verdict, r.Keys, r.Note = NotNeeded, "", "mssfix 0 is off, as ovfwd's default"
		return
	}
	if n-92 < 536 {
		refuse(r, "mssfix %d leaves an MSS below 536", n)
		return
	}
	t.mss = n - 92
}

func pushRoute(t *translator, d Directive, r *Row) {
	p, err := routePrefix(d)
	if err != nil {
		refuse(r, "%v", err)
		return
	}
	if !contains(t.v.pushRoutes, p) {
		t.v.pushRoutes = append(t.v.pushRoutes, p)
	}
}

func redirectGateway(t *translator, d Directive, r *Row) {
	v4, v6 := true, false
	var ignored []string
	for _, f := range d.Args {
		switch f {
		case "def1":
		case "ipv6":
			v6 = true
		case "!ipv4":
			v4 = false
		case "bypass-dhcp", "bypass-dns":
			ignored = append(ignored, f)
		default:
			ignored = append(ignored, f)
		}
	}
	if v4 && !contains(t.v.redirect, "ipv4") {
		t.v.redirect = append(t.v.redirect, "ipv4")
	}
	if v6 && !contains(t.v.redirect, "ipv6") {
		t.v.redirect = append(t.v.redirect, "ipv6")
	}
	if len(ignored) > 0 {
		r.Note = "def1 always; not pushed: " + strings.Join(ignored, ", ") + ". " + r.Note
	}
}

func pushDNS(t *translator, d Directive, r *Row) {
	if len(d.Args) != 2 {
		refuse(r, "dhcp-option %s takes one address", d.Args[0])
		return
	}
	a, err := netip.ParseAddr(d.Args[1])
	if err != nil {
		refuse(r, "%q is not an address", d.Args[1])
		return
	}
	if (t.v.pool4.IsValid() && t.v.pool4.Contains(a)) || (t.v.pool6.IsValid() && t.v.pool6.Contains(a)) {
		r.Note = fmt.Sprintf("%v is in the VPN pool: no ovfwd address answers there (the pool's .1 is not an address of the box); point clients at a resolver on a port's subnet", a)
	}
	if !contains(t.v.dns, a) {
		t.v.dns = append(t.v.dns, a)
	}
}

func pushDomain(t *translator, d Directive, r *Row) {
	if len(d.Args) != 2 {
		refuse(r, "dhcp-option DOMAIN takes one name")
		return
	}
	if t.v.dnsDomain != "" {
		refuse(r, "ovfwd pushes one DOMAIN; %s is already pushed", t.v.dnsDomain)
		return
	}
	t.v.dnsDomain = d.Args[1]
}

func contains[T comparable](list []T, v T) bool {
	for _, e := range list {
		if e == v {
			return true
		}
	}
	return false
}

// TableRow is one option of Table.
type TableRow struct {
	Option  string
	Verdict Verdict
	Keys    string
	Note    string
}

// Table is every option import knows, sorted: what the docs list.
func Table() []TableRow {
	var out []TableRow
	for name, s := range specs {
		out = append(out, TableRow{name, s.verdict, s.keys, s.note})
	}
	for name, s := range pushSpecs {
		out = append(out, TableRow{"push \"" + name + "\"", s.verdict, s.keys, s.note})
	}
	for tag, f := range inlineFiles {
		out = append(out, TableRow{"<" + tag + ">", Mapped, f.key, "written to " + f.name + " beside the output"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Option < out[j].Option })
	return out
}
