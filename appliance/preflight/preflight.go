// Package preflight checks what `ovfwd check` promises beyond the config
// file's syntax: that the files the daemon reads hold what their keys say
// (the key matches the certificate, the CA verifies it, each key file
// parses), that the programs it runs and the directories it writes are
// usable, and that sizes agree — all as the process running it, which
// `ovfwd check` makes the unit's user (AsUser).
package preflight

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
	"github.com/ovfwd/ovfwd/vpn/statickey"
	"golang.org/x/sys/unix"
)

// Report is what Check found: Errors stop the daemon (or a client) from
// working; Warnings may, depending on what the host grants beyond the
// packaged unit.
type Report struct {
	Errors, Warnings config.ErrorList
}

type checker struct {
	c   *config.Config
	rep Report
	now time.Time
}

// unprivilegedPortStart is where the kernel's bind(2) needs no
// CAP_NET_BIND_SERVICE (net.ipv4.ip_unprivileged_port_start); a variable
// for tests.
var unprivilegedPortStart = "/proc/sys/net/ipv4/ip_unprivileged_port_start"

// Check examines c, loaded by config.Load (which has opened every key
// file), as this process's user.
func Check(c *config.Config) Report {
	k := &checker{c: c, now: time.Now()}
	v := &c.VPN
	if v.Enabled {
		caPool := k.ca("vpn.ca", v.CA)
		k.pair("vpn.cert", "vpn.key", v.Cert, v.Key, caPool, x509.ExtKeyUsageServerAuth)
		k.staticKey("vpn.tls_crypt", v.TLSCrypt)
		k.staticKey("vpn.tls_auth", v.TLSAuth)
		if v.TLSCryptV2 != "" {
			if data, ok := k.read("vpn.tls_crypt_v2", v.TLSCryptV2); ok {
				if _, err := control.ParseTLSCryptV2ServerKey(data); err != nil {
					k.errorf("vpn.tls_crypt_v2", "point it at the server key from openvpn --genkey tls-crypt-v2-server (or ovfwd pki tls-crypt-v2)", "%s: %v", v.TLSCryptV2, err)
				}
			}
		}
		if v.CRL != "" && caPool != nil {
			if _, err := pki.LoadCRL(v.CRL, caPool.pem); err != nil {
				k.errorf("vpn.crl", "make it with the CA of ca (easyrsa gen-crl, or ovfwd pki revoke)", "%s: %v", v.CRL, err)
			}
		}
		for _, h := range []struct {
			key string
			cmd []string
		}{{"vpn.client_connect", v.Hooks.ClientConnect}, {"vpn.client_disconnect", v.Hooks.ClientDisconnect}, {"vpn.learn_address", v.Hooks.LearnAddress}} {
			if len(h.cmd) > 0 {
				k.program(h.key, h.cmd[0])
			}
		}
		if len(v.AuthUserPassVerify) > 0 {
			k.program("vpn.auth_user_pass_verify", v.AuthUserPassVerify[0])
		}
		if v.PoolPersist != "" {
			k.writableFile("vpn.pool_persist", v.PoolPersist)
		}
		k.sizes()
		k.port()
	}
	for i, cl := range v.Clients {
		key := func(s string) string { return fmt.Sprintf("vpn.client[%d].%s", i, s) }
		caPool := k.ca(key("ca"), cl.CA)
		k.pair(key("cert"), key("key"), cl.Cert, cl.Key, caPool, x509.ExtKeyUsageClientAuth)
		k.staticKey(key("tls_crypt"), cl.TLSCrypt)
	}
	return k.rep
}

func (k *checker) entry(key, fix, format string, args ...any) *config.Error {
	return &config.Error{File: k.c.File, Line: k.c.Line(key), Key: key, Msg: fmt.Sprintf(format, args...), Fix: fix}
}

func (k *checker) errorf(key, fix, format string, args ...any) {
	k.rep.Errors = append(k.rep.Errors, k.entry(key, fix, format, args...))
}

func (k *checker) warnf(key, fix, format string, args ...any) {
	k.rep.Warnings = append(k.rep.Warnings, k.entry(key, fix, format, args...))
}

// read reads a file as the daemon will, reporting why it cannot.
func (k *checker) read(key, path string) ([]byte, bool) {
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		return data, true
	case errors.Is(err, fs.ErrPermission):
		k.errorf(key, config.PermissionFix(path, config.AccessRead), "cannot read %s: permission denied", path)
	default:
		k.errorf(key, "correct the path", "cannot read %s: %v", path, unwrap(err))
	}
	return nil, false
}

type caPool struct {
	pool *x509.CertPool
	pem  []byte
}

// ca reads the CA file: PEM certificates, at least one a CA.
func (k *checker) ca(key, path string) *caPool {
	if path == "" {
		return nil
	}
	data, ok := k.read(key, path)
	if !ok {
		return nil
	}
	certs, what := certificates(data)
	if len(certs) == 0 {
		k.errorf(key, "point it at the CA certificate (easy-rsa: pki/ca.crt)", "%s holds no certificate (%s)", path, what)
		return nil
	}
	p := &caPool{pool: x509.NewCertPool(), pem: data}
	cas := 0
	for _, c := range certs {
		if c.IsCA {
			p.pool.AddCert(c)
			cas++
		}
	}
	if cas == 0 {
		k.errorf(key, "point it at the CA certificate (easy-rsa: pki/ca.crt), not a server or client certificate",
			"%s holds no CA certificate (%s is not a CA)", path, certs[0].Subject.CommonName)
		return nil
	}
	return p
}

// pair checks a certificate and its key as tls.LoadX509KeyPair (what the
// daemon calls) does, and that the CA verifies the certificate for use.
func (k *checker) pair(certKey, keyKey, certPath, keyPath string, ca *caPool, use x509.ExtKeyUsage) {
	if certPath == "" || keyPath == "" {
		return
	}
	certPEM, ok1 := k.read(certKey, certPath)
	keyPEM, ok2 := k.read(keyKey, keyPath)
	if !ok1 || !ok2 {
		return
	}
	certs, what := certificates(certPEM)
	if len(certs) == 0 {
		k.errorf(certKey, "point it at the server's certificate (easy-rsa: pki/issued/NAME.crt)", "%s holds no certificate (%s)", certPath, what)
		return
	}
	leaf := certs[0]
	if msg := keyProblem(keyPEM); msg != "" {
		k.errorf(keyKey, "point it at the private key of cert (easy-rsa: pki/private/NAME.key); an encrypted key: openssl pkey -in KEY -out KEY.plain",
			"%s: %s", keyPath, msg)
		return
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		k.errorf(keyKey, fmt.Sprintf("use the key made with %s's certificate (same name under pki/private/)", leaf.Subject.CommonName),
			"%s does not match the certificate %s (%s): %v", keyPath, certPath, leaf.Subject.CommonName, err)
		return
	}
	if ca == nil {
		return
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: ca.pool, Intermediates: inter, CurrentTime: k.now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		k.errorf(certKey, "use a certificate signed by the CA in ca (or the CA that signed this one)", "%s (%s) is not verified by the CA: %v", certPath, leaf.Subject.CommonName, err)
		return
	}
	// Stock clients' remote-cert-tls server (and ovfwd for its clients)
	// require the extended key usage: a certificate without one fails too.
	if !hasUsage(leaf, use) {
		want := "TLS server authentication (easyrsa build-server-full)"
		if use == x509.ExtKeyUsageClientAuth {
			want = "TLS client authentication (easyrsa build-client-full)"
		}
		k.errorf(certKey, "issue a certificate for "+want, "%s (%s) does not allow %s: peers refuse it", certPath, leaf.Subject.CommonName, want)
	}
}

func hasUsage(c *x509.Certificate, use x509.ExtKeyUsage) bool {
	for _, u := range c.ExtKeyUsage {
		if u == use || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

// certificates parses every CERTIFICATE block; what says what else the
// file held.
func certificates(data []byte) ([]*x509.Certificate, string) {
	var out []*x509.Certificate
	var types []string
	for {
		b, rest := pem.Decode(data)
		if b == nil {
			break
		}
		data = rest
		if b.Type != "CERTIFICATE" {
			types = append(types, b.Type)
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, c)
		} else {
			types = append(types, "a certificate that does not parse: "+err.Error())
		}
	}
	if len(types) == 0 {
		types = []string{"no PEM block"}
	}
	return out, strings.Join(types, ", ")
}

// keyProblem says why keyPEM is not a private key the daemon can use.
func keyProblem(keyPEM []byte) string {
	b, _ := pem.Decode(keyPEM)
	switch {
	case bytes.Contains(keyPEM, []byte(statickey.Begin)):
		return "an OpenVPN static key (tls-crypt/tls-auth), not a private key"
	case b == nil:
		return "no PEM private key"
	case b.Type == "ENCRYPTED PRIVATE KEY" || b.Headers["Proc-Type"] != "":
		return "the key is encrypted: ovfwd cannot ask for its passphrase"
	case !strings.HasSuffix(b.Type, "PRIVATE KEY"):
		return fmt.Sprintf("a %s, not a private key", b.Type)
	}
	return ""
}

// staticKey checks a tls-crypt / tls-auth key file.
func (k *checker) staticKey(key, path string) {
	if path == "" {
		return
	}
	data, ok := k.read(key, path)
	if !ok {
		return
	}
	if _, err := statickey.Parse(data); err != nil {
		k.errorf(key, "point it at the key from openvpn --genkey tls-crypt (or secret) — easy-rsa's ta.key / tc.key, or ovfwd pki init's tls-crypt.key",
			"%s is not an OpenVPN static key: %v", path, err)
	}
}

// program checks that path is a regular file this process may execute.
func (k *checker) program(key, path string) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrPermission):
		k.errorf(key, config.PermissionFix(path, config.AccessExecute), "cannot reach %s: permission denied", path)
		return
	case err != nil:
		k.errorf(key, "install the program there, or correct the path", "%s: %v", path, unwrap(err))
		return
	case !st.Mode().IsRegular():
		k.errorf(key, "name the program itself", "%s is not a regular file", path)
		return
	}
	if unix.Access(path, unix.X_OK) != nil {
		k.errorf(key, config.PermissionFix(path, config.AccessRead|config.AccessExecute), "%s is not executable by uid %d", path, os.Getuid())
	}
}

// writableFile checks that the daemon can replace path (write a temporary
// file beside it and rename it) and read it back.
func (k *checker) writableFile(key, path string) {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrPermission):
		k.errorf(key, config.PermissionFix(dir, config.AccessWrite|config.AccessExecute), "cannot reach %s: permission denied", dir)
		return
	case err != nil:
		k.errorf(key, "create the directory (mkdir -p "+dir+" && chgrp ovfwd "+dir+" && chmod 0770 "+dir+"), or use /var/lib/ovfwd, the unit's state directory", "directory %s: %v", dir, unwrap(err))
		return
	case !st.IsDir():
		k.errorf(key, "use a path in a directory", "%s is not a directory", dir)
		return
	}
	if unix.Access(dir, unix.W_OK|unix.X_OK) != nil {
		k.errorf(key, config.PermissionFix(dir, config.AccessWrite|config.AccessExecute)+"; or use /var/lib/ovfwd, the unit's state directory",
			"the daemon cannot write in %s (it replaces the file atomically)", dir)
		return
	}
	if _, err := os.Stat(path); err == nil && unix.Access(path, unix.R_OK) != nil {
		k.errorf(key, config.PermissionFix(path, config.AccessRead|config.AccessWrite), "cannot read %s", path)
	}
}

// sizes: max_peers must fit the pools, each peer taking an address of
// each pool (openvpn's max-clients has no such bound: its last clients
// fail for want of an address rather than as "server full").
func (k *checker) sizes() {
	v := &k.c.VPN
	for _, p := range []struct {
		key string
		p   netip.Prefix
	}{{"vpn.pool_v4", v.PoolV4}, {"vpn.pool_v6", v.PoolV6}} {
		if !p.p.IsValid() {
			continue
		}
		// Fixed ([[vpn.ccd]]) addresses are in the pool too: one per peer.
		n := poolHosts(p.p)
		if v.MaxPeers > n {
			key := "vpn.max_peers"
			if !k.c.Has(key) {
				key = p.key
			}
			k.errorf(key, fmt.Sprintf("set max_peers = %d in [vpn] (or a larger pool)", max(n, 1)),
				"max_peers %d is more than %s %v holds (%d client addresses): the last clients would be refused for want of an address, not counted as a full server",
				v.MaxPeers, p.key[4:], p.p, n)
		}
	}
}

// poolHosts is the client addresses of a pool: all but the network, the
// server's .1 and (IPv4) the broadcast address.
func poolHosts(p netip.Prefix) int {
	host := p.Addr().BitLen() - p.Bits()
	if host > 30 {
		return 1 << 30
	}
	n := 1<<host - 2
	if p.Addr().Is4() {
		n--
	}
	return n
}

// port warns when the packaged unit, which has no CAP_NET_BIND_SERVICE,
// cannot bind the VPN port.
func (k *checker) port() {
	v := &k.c.VPN
	start := 1024
	if b, err := os.ReadFile(unprivilegedPortStart); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			start = n
		}
	}
	if v.Port >= start {
		return
	}
	key := "vpn.port"
	if !k.c.Has(key) {
		key = "vpn"
	}
	k.warnf(key, fmt.Sprintf("systemctl edit ovfwd and add AmbientCapabilities=CAP_NET_BIND_SERVICE and CapabilityBoundingSet=CAP_NET_BIND_SERVICE (the unit's lists grow), or sysctl net.ipv4.ip_unprivileged_port_start=%d, or use a port from %d", v.Port, start),
		"port %d is below %d: the packaged unit has no CAP_NET_BIND_SERVICE, so the daemon cannot bind it", v.Port, start)
}

func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
