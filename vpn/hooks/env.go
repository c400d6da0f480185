package hooks

import (
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
	Dev    string // openvpn's dev: the name ovfwd reports for its tunnel
	Config string // the configuration file's path
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
			"tls_serial_0="+c.Cert.SerialNumber.String(), "tls_serial_hex_0="+serialHex(c.Cert))
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

// serialHex is format_hex_ex(serial, 1, ':'): lower-case bytes joined by
// colons (ssl_verify_openssl.c backend_x509_get_serial_hex).
func serialHex(c *x509.Certificate) string {
	b := c.SerialNumber.Bytes()
	if len(b) == 0 {
		b = []byte{0}
	}
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
