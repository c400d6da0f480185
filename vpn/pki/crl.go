package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CRLFile is the revocation list `ovfwd pki revoke` writes in a PKI
// directory (easy-rsa keeps its own there under the same name).
const CRLFile = "crl.pem"

// crlValidity is how long a list we sign stays current (NextUpdate). ovfwd
// keeps using a list past it (openvpn, through OpenSSL, would refuse every
// client): revoked stays revoked, nobody else is locked out.
const crlValidity = 10 * 365 * 24 * time.Hour

// CRL is a parsed revocation list, checked against its CA.
type CRL struct {
	issuer     []byte // raw subject of the CA that signed it
	serials    map[string]bool
	NextUpdate time.Time
	Number     *big.Int
	Entries    []x509.RevocationListEntry
}

// Revoked reports whether cert is on the list (same issuer and serial).
func (c *CRL) Revoked(cert *x509.Certificate) bool {
	return c != nil && bytes.Equal(cert.RawIssuer, c.issuer) && c.serials[cert.SerialNumber.String()]
}

// Len is the number of revoked certificates.
func (c *CRL) Len() int { return len(c.serials) }

// ParseCRL parses a PEM ("X509 CRL") or DER revocation list without
// checking its signature.
func ParseCRL(data []byte) (*x509.RevocationList, error) {
	if b, _ := pem.Decode(data); b != nil {
		if b.Type != "X509 CRL" {
			return nil, fmt.Errorf("pki: PEM block %q is not an X509 CRL", b.Type)
		}
		data = b.Bytes
	}
	rl, err := x509.ParseRevocationList(data)
	if err != nil {
		return nil, fmt.Errorf("pki: not a CRL: %v", err)
	}
	return rl, nil
}

// LoadCRL reads the list at path and checks it was signed by one of the
// CA certificates in caPEM, as openvpn's crl-verify does.
func LoadCRL(path string, caPEM []byte) (*CRL, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rl, err := ParseCRL(data)
	if err != nil {
		return nil, err
	}
	cas, err := parseCerts(caPEM)
	if err != nil {
		return nil, err
	}
	for _, ca := range cas {
		if bytes.Equal(ca.RawSubject, rl.RawIssuer) && rl.CheckSignatureFrom(ca) == nil {
			c := &CRL{issuer: rl.RawIssuer, serials: map[string]bool{}, NextUpdate: rl.NextUpdate, Number: rl.Number, Entries: rl.RevokedCertificateEntries}
			for _, e := range rl.RevokedCertificateEntries {
				c.serials[e.SerialNumber.String()] = true
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("pki: %s is not signed by the CA", path)
}

func parseCerts(pemData []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, pemData = pem.Decode(pemData)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("pki: %v", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("pki: no certificate found")
	}
	return out, nil
}

// Revoke adds the certificate(s) issued to name in dir to dir/crl.pem,
// signed with the CA key, and returns the list's path. dir is an ovfwd
// PKI (ca.crt, ca.key, clients/NAME.crt or the certificate inside
// clients/NAME.ovpn) or an easy-rsa one (ca.crt, private/ca.key,
// issued/NAME.crt; index.txt is marked too, so a later `easyrsa gen-crl`
// keeps the entry). certFile, if set, names the certificate instead.
func Revoke(dir, name, certFile string) (string, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return "", fmt.Errorf("pki: %v", err)
	}
	cas, err := parseCerts(caPEM)
	if err != nil {
		return "", err
	}
	ca := cas[0]
	signer, err := loadCAKey(dir)
	if err != nil {
		return "", err
	}
	certs, err := issuedTo(dir, name, certFile)
	if err != nil {
		return "", err
	}
	now := time.Now()
	tmpl := &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: now, NextUpdate: now.Add(crlValidity)}
	seen := map[string]bool{}
	path := filepath.Join(dir, CRLFile)
	if data, err := os.ReadFile(path); err == nil {
		old, err := ParseCRL(data)
		if err != nil {
			return "", fmt.Errorf("pki: existing %s: %v", path, err)
		}
		if err := old.CheckSignatureFrom(ca); err != nil {
			return "", fmt.Errorf("pki: existing %s is not signed by this CA: %v", path, err)
		}
		tmpl.RevokedCertificateEntries = old.RevokedCertificateEntries
		for _, e := range old.RevokedCertificateEntries {
			seen[e.SerialNumber.String()] = true
		}
		if old.Number != nil {
			tmpl.Number = new(big.Int).Add(old.Number, big.NewInt(1))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	added := 0
	for _, c := range certs {
		if !bytes.Equal(c.RawIssuer, ca.RawSubject) || c.CheckSignatureFrom(ca) != nil {
			return "", fmt.Errorf("pki: the certificate of %q (serial %s) was not issued by this CA", name, c.SerialNumber)
		}
		if seen[c.SerialNumber.String()] {
			continue
		}
		seen[c.SerialNumber.String()] = true
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{SerialNumber: c.SerialNumber, RevocationTime: now})
		added++
	}
	if added == 0 {
		return path, fmt.Errorf("pki: %q is already revoked", name)
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca, signer)
	if err != nil {
		return "", fmt.Errorf("pki: signing the CRL: %v", err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o644); err != nil {
		return "", err
	}
	if err := markEasyRSAIndex(dir, certs, now); err != nil {
		return path, err
	}
	return path, nil
}

// loadCAKey reads the CA's private key: ovfwd's ca.key or easy-rsa's
// private/ca.key, PKCS#8, PKCS#1 (RSA) or SEC 1 (EC), unencrypted.
func loadCAKey(dir string) (crypto.Signer, error) {
	var data []byte
	var path string
	for _, p := range []string{filepath.Join(dir, CAKeyFile), filepath.Join(dir, "private", "ca.key")} {
		if b, err := os.ReadFile(p); err == nil {
			data, path = b, p
			break
		}
	}
	if data == nil {
		return nil, fmt.Errorf("pki: no CA key in %s (ca.key or private/ca.key)", dir)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("pki: %s is not PEM", path)
	}
	if strings.Contains(b.Type, "ENCRYPTED") || b.Headers["Proc-Type"] != "" {
		return nil, fmt.Errorf("pki: %s is encrypted: decrypt a copy (openssl pkey -in %s -out ca-plain.key) and revoke with that, or use easyrsa revoke", path, path)
	}
	var k any
	var err error
	switch b.Type {
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %v", path, err)
	}
	switch k := k.(type) {
	case *rsa.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		return k, nil
	case ed25519.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("pki: %s: unsupported key type %T", path, k)
}

// issuedTo finds the certificates issued to name.
func issuedTo(dir, name, certFile string) ([]*x509.Certificate, error) {
	if certFile != "" {
		data, err := os.ReadFile(certFile)
		if err != nil {
			return nil, err
		}
		return parseCerts(data)
	}
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("pki: bad client name %q", name)
	}
	var out []*x509.Certificate
	for _, p := range []string{
		filepath.Join(dir, ClientsDir, name+".crt"),
		filepath.Join(dir, ClientsDir, name+".ovpn"),
		filepath.Join(dir, "issued", name+".crt"),
	} {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if strings.HasSuffix(p, ".ovpn") {
			data = inlineBlock(data, "cert")
		}
		cs, err := parseCerts(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
		out = append(out, cs[0])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pki: no certificate for %q in %s (clients/%s.crt, clients/%s.ovpn or issued/%s.crt); name one with -cert FILE", name, dir, name, name, name)
	}
	return out, nil
}

// inlineBlock is the body of <tag>…</tag> in an .ovpn profile.
func inlineBlock(profile []byte, tag string) []byte {
	s := string(profile)
	i := strings.Index(s, "<"+tag+">")
	j := strings.Index(s, "</"+tag+">")
	if i < 0 || j < i {
		return nil
	}
	return []byte(s[i+len(tag)+2 : j])
}

// markEasyRSAIndex marks certs revoked in an easy-rsa index.txt (the
// OpenSSL ca database: status V→R and the revocation time), if dir has one.
func markEasyRSAIndex(dir string, certs []*x509.Certificate, at time.Time) error {
	path := filepath.Join(dir, "index.txt")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	serials := map[string]bool{}
	for _, c := range certs {
		serials[strings.ToUpper(c.SerialNumber.Text(16))] = true
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) < 6 || f[0] != "V" {
			continue
		}
		if serials[strings.TrimLeft(strings.ToUpper(f[3]), "0")] {
			f[0], f[2] = "R", at.UTC().Format("060102150405Z")
			lines[i] = strings.Join(f, "\t")
		}
	}
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600)
}
