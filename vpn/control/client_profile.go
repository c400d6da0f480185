package control

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/statickey"
)

// ParseProfile reads the parts of an .ovpn client profile that a Client
// uses: the first "remote" (an address literal; no DNS), inline <ca>,
// <cert>, <key>, <tls-crypt> or <tls-auth> (with key-direction and auth),
// data-ciphers and reneg-sec. Other directives are ignored; file
// references instead of inline blocks are not supported.
func ParseProfile(text []byte) (ClientConfig, error) {
	var cfg ClientConfig
	var caPEM, certPEM, keyPEM, wrapKey []byte
	proto := "udp"
	port := "1194"
	var remotes [][]string
	lines := strings.Split(string(text), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "<") && strings.HasSuffix(line, ">") && !strings.HasPrefix(line, "</") {
			tag := line[1 : len(line)-1]
			var body strings.Builder
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "</"+tag+">"; i++ {
				body.WriteString(lines[i])
				body.WriteByte('\n')
			}
			if i == len(lines) {
				return cfg, fmt.Errorf("control: profile: <%s> not closed", tag)
			}
			b := []byte(body.String())
			switch tag {
			case "ca":
				caPEM = b
			case "cert":
				certPEM = b
			case "key":
				keyPEM = b
			case "tls-crypt":
				wrapKey, cfg.Wrap = b, WrapTLSCrypt
			case "tls-auth":
				wrapKey, cfg.Wrap = b, WrapTLSAuth
			}
			continue
		}
		f := strings.Fields(line)
		switch f[0] {
		case "remote":
			if len(f) > 1 {
				remotes = append(remotes, f[1:])
			}
		case "port", "rport":
			if len(f) > 1 {
				port = f[1]
			}
		case "proto":
			if len(f) > 1 {
				proto = f[1]
			}
		case "key-direction":
			if len(f) > 1 && f[1] == "1" {
				cfg.KeyDirection = KeyDir1
			} else if len(f) > 1 && f[1] == "0" {
				cfg.KeyDirection = KeyDir0
			}
		case "auth":
			if len(f) > 1 && strings.EqualFold(f[1], "SHA256") {
				cfg.AuthDigest = DigestSHA256
			}
		case "data-ciphers", "ncp-ciphers":
			if len(f) > 1 {
				for name := range strings.SplitSeq(f[1], ":") {
					if c := cipherByName(name); c != vpn.CipherNone {
						cfg.Ciphers = append(cfg.Ciphers, c)
					}
				}
			}
		case "reneg-sec":
			if len(f) > 1 {
				if v, err := strconv.Atoi(f[1]); err == nil {
					cfg.RenegSec = secondsOrNever(v)
				}
			}
		}
	}
	if !strings.HasPrefix(proto, "udp") {
		return cfg, fmt.Errorf("control: profile: proto %s is not supported", proto)
	}
	if len(remotes) == 0 {
		return cfg, errors.New("control: profile has no remote")
	}
	host, rport := remotes[0][0], port
	if len(remotes[0]) > 1 {
		rport = remotes[0][1]
	}
	var err error
	if cfg.Remote, err = netip.ParseAddrPort(net.JoinHostPort(host, rport)); err != nil {
		return cfg, fmt.Errorf("control: profile: remote %s %s: want an address literal", host, rport)
	}
	if caPEM == nil || certPEM == nil || keyPEM == nil {
		return cfg, errors.New("control: profile needs inline <ca>, <cert> and <key>")
	}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(caPEM) {
		return cfg, errors.New("control: profile: no certificate in <ca>")
	}
	if cfg.Certificate, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return cfg, fmt.Errorf("control: profile: %v", err)
	}
	if wrapKey == nil {
		cfg.Wrap = WrapNone
	} else if cfg.WrapKey, err = statickey.Parse(wrapKey); err != nil {
		return cfg, fmt.Errorf("control: profile: %v", err)
	}
	return cfg, nil
}

func secondsOrNever(v int) time.Duration {
	if v <= 0 {
		return 0
	}
	return time.Duration(v) * time.Second
}

// ClientConfigFromFiles builds a ClientConfig from the files a
// [[vpn.client]] uplink names: CA and client certificate/key PEM, and a
// tls-crypt key (empty: no wrapping). The caller resolves the remote.
func ClientConfigFromFiles(remote netip.AddrPort, caFile, certFile, keyFile, tlsCryptFile string) (ClientConfig, error) {
	cfg := ClientConfig{Remote: remote, Wrap: WrapNone}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return cfg, err
	}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(caPEM) {
		return cfg, fmt.Errorf("control: no certificate in %s", caFile)
	}
	if cfg.Certificate, err = tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		return cfg, err
	}
	if tlsCryptFile != "" {
		text, err := os.ReadFile(tlsCryptFile)
		if err != nil {
			return cfg, err
		}
		if cfg.WrapKey, err = statickey.Parse(text); err != nil {
			return cfg, fmt.Errorf("control: %s: %v", tlsCryptFile, err)
		}
		cfg.Wrap = WrapTLSCrypt
	}
	return cfg, nil
}
