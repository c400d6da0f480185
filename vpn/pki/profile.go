package pki

import (
	"crypto/ecdsa"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Profile chooses what a client's .ovpn says.
type Profile struct {
	Name    string   // client certificate common name and file name
	Remotes []string // "host:port" or "[v6]:port", tried in order
	// TLSAuth selects tls-auth (key-direction 1) instead of tls-crypt; the
	// server must then use tls-auth with key direction 0.
	TLSAuth bool
	// Auth is the tls-auth digest line ("SHA256"); empty keeps openvpn's SHA1.
	Auth string
	// Ciphers is the data-ciphers list; empty means
	// AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305.
	Ciphers string
	Extra   []string // extra config lines, e.g. "verb 4"
	// NoCert leaves out the client certificate and key, for a server with
	// verify_client_cert = "none" (username/password only).
	NoCert bool
	// TLSCryptV2 is the client's own tls-crypt-v2 key (PEM, from
	// control.TLSCryptV2ServerKey.NewTLSCryptV2ClientKey); when set it
	// replaces the shared tls-crypt key in the profile.
	TLSCryptV2 []byte
}

// TLSCryptV2File is the tls-crypt-v2 server key's name in a PKI directory.
const TLSCryptV2File = "tls-crypt-v2.key"

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Client issues a certificate for name and writes dir/clients/NAME.ovpn
// with everything inline, using tls-crypt. It returns the profile's path.
func Client(dir, name string, remotes ...string) (string, error) {
	return ClientProfile(dir, Profile{Name: name, Remotes: remotes})
}

// ClientProfile is Client with the profile's options spelled out.
func ClientProfile(dir string, p Profile) (string, error) {
	if !validName.MatchString(p.Name) {
		return "", fmt.Errorf("pki: bad client name %q", p.Name)
	}
	if len(p.Remotes) == 0 {
		return "", fmt.Errorf("pki: client %s: no remote", p.Name)
	}
	var remoteLines []string
	for _, r := range p.Remotes {
		host, port, err := net.SplitHostPort(r)
		if err != nil {
			return "", fmt.Errorf("pki: remote %q: %v", r, err)
		}
		remoteLines = append(remoteLines, fmt.Sprintf("remote %s %s", host, port))
	}
	ca, caKey, caPEM, err := loadCA(dir)
	if err != nil {
		return "", fmt.Errorf("pki: %v (run pki init first)", err)
	}
	var key *ecdsa.PrivateKey
	var der []byte
	if !p.NoCert {
		if key, der, err = leaf(ca, caKey, p.Name, x509.ExtKeyUsageClientAuth); err != nil {
			return "", err
		}
	}
	tc, err := os.ReadFile(filepath.Join(dir, TLSCryptFile))
	if err != nil {
		return "", err
	}
	ciphers := p.Ciphers
	if ciphers == "" {
		ciphers = "AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# ovfwd client profile for %s\n", p.Name)
	b.WriteString("client\ndev tun\nproto udp\n")
	for _, l := range remoteLines {
		b.WriteString(l + "\n")
	}
	b.WriteString("nobind\nremote-cert-tls server\n")
	fmt.Fprintf(&b, "data-ciphers %s\n", ciphers)
	wrapTag := "tls-crypt"
	if p.TLSAuth {
		wrapTag = "tls-auth"
		b.WriteString("key-direction 1\n")
		if p.Auth != "" {
			fmt.Fprintf(&b, "auth %s\n", p.Auth)
		}
	}
	for _, l := range p.Extra {
		b.WriteString(l + "\n")
	}
	inline := func(tag string, body []byte) {
		fmt.Fprintf(&b, "<%s>\n%s</%s>\n", tag, strings.TrimRight(string(body), "\n")+"\n", tag)
	}
	inline("ca", caPEM)
	if !p.NoCert {
		inline("cert", certPEM(der))
		inline("key", keyPEM(key))
	}
	if len(p.TLSCryptV2) > 0 {
		wrapTag, tc = "tls-crypt-v2", p.TLSCryptV2
	}
	inline(wrapTag, tc)

	out := filepath.Join(dir, ClientsDir)
	if err := os.MkdirAll(out, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(out, p.Name+".ovpn")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// ClientFiles issues a certificate for name and writes it and its key as
// PEM files, dir/clients/NAME.crt and NAME.key, for a [[vpn.client]]
// uplink of another ovfwd (which names files rather than a profile). It
// returns both paths.
func ClientFiles(dir, name string) (certPath, keyPath string, err error) {
	if !validName.MatchString(name) {
		return "", "", fmt.Errorf("pki: bad client name %q", name)
	}
	ca, caKey, _, err := loadCA(dir)
	if err != nil {
		return "", "", fmt.Errorf("pki: %v (run pki init first)", err)
	}
	key, der, err := leaf(ca, caKey, name, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return "", "", err
	}
	out := filepath.Join(dir, ClientsDir)
	if err := os.MkdirAll(out, 0o700); err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(out, name+".crt"), filepath.Join(out, name+".key")
	if err := os.WriteFile(certPath, certPEM(der), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyPath, keyPEM(key), 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}
