package hooks

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// Client is what the environment of a client's commands is made from.
type Client struct {
	CommonName string // as the session knows it (the username with username-as-common-name)
	Username   string // "" without auth_user_pass_verify
	Real       netip.AddrPort
	VPNIPv4    netip.Addr
	Bits4      int // the IPv4 pool's prefix length (ifconfig_pool_netmask)
	VPNIPv6    netip.Addr
	Bits6      int
	Cert       *x509.Certificate // nil without one
	Since      time.Time
	PeerInfo   string // the client's IV_*/UV_* lines
}

// Server is the part of the environment every command shares.
type Server struct {
	Dev            string // openvpn's dev: the name ovfwd reports for its tunnel
	Config         string // the configuration file's path
	Port           int    // the UDP port it listens on
	TunMTU         int
	Local4, Local6 netip.Addr // the server's own tunnel addresses (the pools' first)
	Started        time.Time
}

// path is the commands' PATH: openvpn passes its own environment on, ovfwd
// a fixed minimal one (the unit's environment is not the operator's).
const path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Env is the environment openvpn gives scriptType for c, with the names
// and formats of its env_set.c, misc.c setenv_* and multi.c
// multi_client_connect_setenv / multi_set_virtual_addr_env /
// setenv_stats, and ssl_verify.c's X509_0_*/tls_serial_0 for the
// client's certificate.
func (s *Server) Env(scriptType string, c *Client) []string {
	env := []string{
		path,
		"script_type=" + scriptType,
		"dev=" + s.Dev,
		"config=" + s.Config,
		"dev_type=tun",
		"proto_1=udp",
		"local_port_1=" + strconv.Itoa(s.Port), "remote_port_1=" + strconv.Itoa(s.Port),
		"redirect_gateway=0", // the server's own routes are never redirected
		"tun_mtu=" + strconv.Itoa(s.TunMTU),
		// A systemd service: not daemonised, its output to the journal.
		"daemon=0", "daemon_log_redirect=0",
		"daemon_start_time=" + strconv.FormatInt(s.Started.Unix(), 10),
		"daemon_pid=" + strconv.Itoa(os.Getpid()),
		"script_context=init",
		"common_name=" + printable(c.CommonName),
	}
	if c.Username != "" {
		env = append(env, "username="+printable(c.Username))
	}
	// setenv_trusted / setenv_sockaddr: IPv4 (mapped or not) as trusted_ip,
	// IPv6 as trusted_ip6; the untrusted_ names carry the same address.
	ip, port := c.Real.Addr().Unmap(), strconv.Itoa(int(c.Real.Port()))
	if ip.Is4() {
		env = append(env, "trusted_ip="+ip.String(), "untrusted_ip="+ip.String())
	} else {
		env = append(env, "trusted_ip6="+ip.String(), "untrusted_ip6="+ip.String())
	}
	env = append(env, "trusted_port="+port, "untrusted_port="+port)
	if s.Local4.IsValid() {
		env = append(env, "ifconfig_local="+s.Local4.String(), "ifconfig_netmask="+netmask(c.Bits4))
	}
	if s.Local6.IsValid() {
		env = append(env, "ifconfig_ipv6_local="+s.Local6.String(), "ifconfig_ipv6_netbits="+strconv.Itoa(c.Bits6),
			"ifconfig_pool_local_ip6="+s.Local6.String())
	}
	if c.VPNIPv4.IsValid() {
		env = append(env, "ifconfig_pool_remote_ip="+c.VPNIPv4.String())
		if c.Bits4 > 0 {
			env = append(env, "ifconfig_pool_netmask="+netmask(c.Bits4))
		}
	}
	if c.VPNIPv6.IsValid() {
		env = append(env, "ifconfig_pool_remote_ip6="+c.VPNIPv6.String(), "ifconfig_pool_ip6_netbits="+strconv.Itoa(c.Bits6))
	}
	// time_string(created, 0, false): local time, "%Y-%m-%d %H:%M:%S".
	env = append(env, "time_ascii="+c.Since.Local().Format("2006-01-02 15:04:05"), "time_unix="+strconv.FormatInt(c.Since.Unix(), 10))
	if c.Cert != nil {
		env = append(env, "X509_0_CN="+printable(c.Cert.Subject.CommonName),
			"tls_serial_0="+c.Cert.SerialNumber.String(), "tls_serial_hex_0="+colonHex(serialBytes(c.Cert)))
		if len(c.Cert.Raw) > 0 {
			sha1sum, sha256sum := sha1.Sum(c.Cert.Raw), sha256.Sum256(c.Cert.Raw)
			env = append(env, "tls_digest_0="+colonHex(sha1sum[:]), "tls_digest_sha256_0="+colonHex(sha256sum[:]))
		}
	}
	for _, l := range strings.Split(c.PeerInfo, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && (strings.HasPrefix(k, "IV_") || strings.HasPrefix(k, "UV_")) && validName(k) {
			env = append(env, k+"="+printable(v))
		}
	}
	return env
}

// DisconnectEnv adds setenv_stats' totals and the session's length
// (multi.c setenv_stats, multi_client_disconnect_setenv).
func (s *Server) DisconnectEnv(c *Client, rx, tx uint64, now time.Time) []string {
	return append(s.Env("client-disconnect", c),
		"bytes_received="+strconv.FormatUint(rx, 10), "bytes_sent="+strconv.FormatUint(tx, 10),
		"time_duration="+strconv.FormatInt(int64(now.Sub(c.Since)/time.Second), 10))
}

func netmask(bits int) string {
	var m [4]byte
	for i := 0; i < bits && i < 32; i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(m).String()
}

func serialBytes(c *x509.Certificate) []byte {
	if b := c.SerialNumber.Bytes(); len(b) > 0 {
		return b
	}
	return []byte{0}
}

// colonHex is format_hex_ex(b, 1, ':'): lower-case bytes joined by colons,
// as openvpn writes serials and digests (ssl_verify.c
// verify_cert_set_env, backend_x509_get_serial_hex).
func colonHex(b []byte) string {
	const hex = "0123456789abcdef"
	var sb strings.Builder
	for i, x := range b {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteByte(hex[x>>4])
		sb.WriteByte(hex[x&15])
	}
	return sb.String()
}

// printable replaces control characters with '_': a certificate's name
// may hold a newline, and an environment value must stay one value.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}

func validName(k string) bool {
	for _, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
