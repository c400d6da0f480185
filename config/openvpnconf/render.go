package openvpnconf

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"
)

// render writes the ovfwd.toml: a header listing every row, then the
// tables. Only keys the file set are written; the rest keep ovfwd's
// defaults, which packaging/ovfwd.toml documents.
func (t *translator) render() []byte {
	var b strings.Builder
	src := t.o.Source
	if src == "" {
		src = "server.conf"
	}
	fmt.Fprintf(&b, "# Written by `ovfwd import %s`.\n# What became of each option:\n", src)
	for _, r := range t.rows {
		where := "      "
		if r.Line > 0 {
			where = fmt.Sprintf("%5d:", r.Line)
		}
		line := fmt.Sprintf("#%s %s: %s", where, oneLine(orOption(r)), r.Verdict)
		if r.Keys != "" {
			line += " → " + r.Keys
		}
		if r.Note != "" {
			line += " (" + oneLine(r.Note) + ")"
		}
		b.WriteString(line + "\n")
	}
	b.WriteString("\n[appliance]\nmode = \"router\"\n")
	if t.mss > 0 {
		fmt.Fprintf(&b, "mss_clamp = %d\n", t.mss)
	}
	if len(t.o.Ports) == 0 {
		b.WriteString("\n# A server.conf names no network ports: add one [[port]] per NIC ovfwd serves\n" +
			"# (or run ovfwd import -port IFNAME=ADDR/LEN …), e.g.\n" +
			"# [[port]]\n# name = \"wan\"\n# ifname = \"eth0\"\n# addresses = [\"192.0.2.10/24\"]\n")
	}
	for _, p := range t.o.Ports {
		fmt.Fprintf(&b, "\n[[port]]\nname = %s\nifname = %s\n", quote(p.IfName), quote(p.IfName))
		if len(p.Addresses) > 0 {
			fmt.Fprintf(&b, "addresses = %s\n", list(p.Addresses))
		}
	}
	v := &t.v
	b.WriteString("\n[vpn]\nenabled = true\n")
	kv := func(k string, val any) { fmt.Fprintf(&b, "%s = %v\n", k, val) }
	str := func(k, s string) {
		if s != "" {
			kv(k, quote(s))
		}
	}
	if len(v.listen) > 0 {
		kv("listen", list(v.listen))
	}
	if v.port != 0 {
		kv("port", v.port)
	}
	str("ca", v.ca)
	str("cert", v.cert)
	str("key", v.key)
	str("tls_crypt", v.tlsCrypt)
	str("tls_auth", v.tlsAuth)
	str("tls_crypt_v2", v.tlsCryptV2)
	if v.tlsAuth != "" {
		if v.keyDirection != nil {
			kv("key_direction", *v.keyDirection)
		}
		str("tls_auth_digest", v.authDigest)
	}
	str("crl", v.crl)
	if v.pool4.IsValid() {
		kv("pool_v4", quote(v.pool4.String()))
	}
	if v.pool6.IsValid() {
		kv("pool_v6", quote(v.pool6.String()))
	}
	str("pool_persist", v.poolPersist)
	if len(v.pushRoutes) > 0 {
		kv("push_routes", list(v.pushRoutes))
	}
	if len(v.redirect) > 0 {
		kv("redirect_gateway", list(v.redirect))
	}
	if len(v.dns) > 0 {
		kv("dns", list(v.dns))
	}
	str("dns_domain", v.dnsDomain)
	if len(v.ciphers) > 0 {
		kv("ciphers", list(v.ciphers))
	}
	if v.keepalive[0] > 0 {
		kv("keepalive_interval", quote(fmt.Sprintf("%ds", v.keepalive[0])))
		kv("keepalive_timeout", quote(fmt.Sprintf("%ds", v.keepalive[1])))
	}
	if v.renegSec != nil {
		kv("reneg_sec", *v.renegSec)
	}
	if v.maxPeers > 0 {
		kv("max_peers", v.maxPeers)
	} else if n := t.poolCapacity(); n > 0 && n < 1024 {
		// ovfwd's default max_peers (1024) is more than a small pool
		// holds; openvpn's max-clients default does not apply either.
		fmt.Fprintf(&b, "max_peers = %d # the pool's client addresses\n", n)
	}
	if v.handshakeRate > 0 {
		kv("handshake_rate", v.handshakeRate)
	}
	if v.replayWindow > 0 {
		kv("replay_window", v.replayWindow)
	}
	if v.tunMTU > 0 {
		kv("tun_mtu", v.tunMTU)
	}
	if v.compress {
		kv("compress_stub", true)
	}
	if v.clientToClient {
		kv("client_to_client", true)
	}
	if v.duplicateCN {
		kv("duplicate_cn", true)
	}
	if len(v.authVerify) > 0 {
		kv("auth_user_pass_verify", list(v.authVerify))
	}
	for _, h := range []struct {
		key string
		cmd []string
	}{{"client_connect", v.clientConnect}, {"client_disconnect", v.clientDisconnect}, {"learn_address", v.learnAddress}} {
		if len(h.cmd) > 0 {
			kv(h.key, list(h.cmd))
		}
	}
	if v.usernameAsCN {
		kv("username_as_common_name", true)
	}
	str("verify_client_cert", v.verifyClientCert)
	for _, c := range v.ccd {
		fmt.Fprintf(&b, "\n[[vpn.ccd]]\ncommon_name = %s\n", quote(c.cn))
		if c.v4.IsValid() {
			kv("ipv4", quote(c.v4.String()))
		}
		if c.v6.IsValid() {
			kv("ipv6", quote(c.v6.String()))
		}
		if len(c.pushRoutes) > 0 {
			kv("push_routes", list(c.pushRoutes))
		}
		if len(c.iroutes) > 0 {
			kv("iroutes", list(c.iroutes))
		}
		if c.disable {
			kv("disable", true)
		}
	}
	if t.logLevel != "" {
		fmt.Fprintf(&b, "\n[log]\nlevel = %s\n", quote(t.logLevel))
	}
	return []byte(b.String())
}

// poolCapacity is the client addresses of the pools: the smaller one when
// both are set, since every client takes one of each.
func (t *translator) poolCapacity() int {
	n := 0
	for _, p := range []netip.Prefix{t.v.pool4, t.v.pool6} {
		if p.IsValid() {
			if h := poolHosts(p); n == 0 || h < n {
				n = h
			}
		}
	}
	return n
}

func orOption(r Row) string {
	if r.Text != "" {
		return r.Text
	}
	return r.Option
}

// oneLine makes s fit a TOML comment: valid UTF-8, no control characters.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// quote is a TOML basic string.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || r == utf8.RuneError:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func list[T any](vs []T) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = quote(fmt.Sprint(v))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
