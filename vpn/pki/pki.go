// Package pki makes what an ovfwd VPN server and its clients need: a CA, a
// server certificate, a tls-crypt key, and per-client certificates with a
// ready-to-use inline .ovpn profile that stock openvpn 2.6 accepts
// (with remote-cert-tls server: openvpn doc/man-sections/tls-options.rst).
// All keys are ECDSA P-256. Functions are safe to call
// from one goroutine at a time per directory.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/ovfwd/ovfwd/vpn/statickey"
)

// File names inside a PKI directory.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	ServerCertFile = "server.crt"
	ServerKeyFile  = "server.key"
	TLSCryptFile   = "tls-crypt.key" // also usable as a tls-auth key
	ClientsDir     = "clients"
)

// ServerName is the server certificate's common name and DNS name.
const ServerName = "ovfwd-server"

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 825 * 24 * time.Hour
)

// Init creates dir (if needed) and a new CA, server certificate and key,
// and tls-crypt key in it. It refuses to overwrite an existing CA.
func Init(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, CACertFile)); err == nil {
		return fmt.Errorf("pki: %s already exists", filepath.Join(dir, CACertFile))
	}
	if _, _, err := PrepareDir(dir); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "ovfwd VPN CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := sign(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	// remote-cert-tls server needs a keyUsage extension and EKU serverAuth.
	srvKey, srvDER, err := leaf(ca, caKey, ServerName, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	var tc statickey.Key
	if _, err := rand.Read(tc[:]); err != nil {
		return err
	}
	tcText, _ := tc.MarshalText()
	for _, f := range []struct {
		name string
		data []byte
		mode fs.FileMode
	}{
		{CAKeyFile, keyPEM(caKey), 0o600},
		{ServerKeyFile, keyPEM(srvKey), 0o600},
		{TLSCryptFile, tcText, 0o600},
		{ServerCertFile, certPEM(srvDER), 0o644},
		{CACertFile, certPEM(caDER), 0o644}, // last: its presence means "initialised"
	} {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// PrepareDir makes dir (mode 0700) or, when it exists, takes write access
// away from group and others: whoever can write the directory can replace
// the CA key and the certificates in it. It returns the old and new mode
// when it changed one. A directory ovfwd cannot chmod (someone else's)
// and writable by others is refused.
func PrepareDir(dir string) (old, now fs.FileMode, err error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return 0, 0, err
	}
	if !fi.IsDir() {
		return 0, 0, fmt.Errorf("pki: %s is not a directory", dir)
	}
	old = fi.Mode().Perm()
	if old&0o022 == 0 {
		return 0, 0, nil
	}
	now = old &^ 0o022
	if err := os.Chmod(dir, now); err != nil {
		return 0, 0, fmt.Errorf("pki: %s is writable by others (mode %#o) and its mode cannot be fixed: %w (fix: chmod go-w %s, or use another directory)", dir, old, err, dir)
	}
	return old, now, nil
}

func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, priv *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
}

func leaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, eku x509.ExtKeyUsage) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(leafValidity),
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{eku},
	}
	if eku == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{cn}
	}
	der, err := sign(tmpl, ca, &key.PublicKey, caKey)
	return key, der, err
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err) // P-256 keys always marshal
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// Server is what the VPN server loads from a PKI directory.
type Server struct {
	Certificate tls.Certificate
	ClientCAs   *x509.CertPool
	StaticKey   statickey.Key
}

// Load reads the server's certificate, key, CA and tls-crypt key.
func Load(dir string) (*Server, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, ServerCertFile), filepath.Join(dir, ServerKeyFile))
	if err != nil {
		return nil, fmt.Errorf("pki: %v", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("pki: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("pki: no certificate in %s", CACertFile)
	}
	tcText, err := os.ReadFile(filepath.Join(dir, TLSCryptFile))
	if err != nil {
		return nil, fmt.Errorf("pki: %v", err)
	}
	sk, err := statickey.Parse(tcText)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %v", TLSCryptFile, err)
	}
	return &Server{Certificate: cert, ClientCAs: pool, StaticKey: sk}, nil
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, nil, nil, err
	}
	keyPEMBytes, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, nil, err
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(keyPEMBytes)
	if cb == nil || kb == nil {
		return nil, nil, nil, errors.New("pki: bad CA PEM")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, nil, errors.New("pki: CA key is not ECDSA")
	}
	return ca, ek, caPEM, nil
}
