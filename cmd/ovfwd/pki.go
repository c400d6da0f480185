package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

const pkiUsage = `usage: ovfwd pki init DIR
       ovfwd pki client DIR NAME -remote HOST:PORT [-remote …]   (an .ovpn profile)
       ovfwd pki site DIR NAME      (certificate and key files for another ovfwd's [[vpn.client]])
       ovfwd pki revoke DIR NAME [-cert FILE]   (add NAME's certificate to DIR/crl.pem; ovfwd or easy-rsa PKI)
       ovfwd pki tls-crypt-v2 DIR   (a tls-crypt-v2 server key; pki client then gives each profile its own key)
`

func pkiCmd(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, pkiUsage)
		return errUsage
	}
	switch args[0] {
	case "init":
		fs := newFlags("pki init", "DIR")
		pos, err := parse(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 1, 1); err != nil {
			return err
		}
		if old, now, err := pki.PrepareDir(pos[0]); err != nil {
			return err
		} else if old != now {
			fmt.Fprintf(os.Stderr, "%s was mode %#o, writable by others; changed it to %#o\n", pos[0], old, now)
		}
		if err := pki.Init(pos[0]); err != nil {
			return err
		}
		fmt.Printf("wrote CA, server certificate and tls-crypt key to %s\n", pos[0])
		return nil
	case "client":
		fs := newFlags("pki client", "DIR NAME -remote HOST:PORT [-remote HOST:PORT …]")
		var remotes stringList
		fs.Var(&remotes, "remote", "server address the client connects to (repeat for fallbacks)")
		pos, err := parse(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 2, 2); err != nil {
			return err
		}
		if len(remotes) == 0 {
			fmt.Fprintln(os.Stderr, "ovfwd pki client: -remote HOST:PORT is required")
			return errUsage
		}
		prof := pki.Profile{Name: pos[1], Remotes: remotes}
		// With a tls-crypt-v2 server key in DIR each client gets its own key.
		if text, err := os.ReadFile(filepath.Join(pos[0], pki.TLSCryptV2File)); err == nil {
			k, err := control.ParseTLSCryptV2ServerKey(text)
			if err != nil {
				return fmt.Errorf("%s: %w", pki.TLSCryptV2File, err)
			}
			if prof.TLSCryptV2, err = k.NewTLSCryptV2ClientKey(time.Now()); err != nil {
				return err
			}
		}
		path, err := pki.ClientProfile(pos[0], prof)
		if err != nil {
			return err
		}
		fmt.Println(path)
		return nil
	case "site":
		// A certificate and key as files, for the [[vpn.client]] uplink of
		// another ovfwd (a site-to-site peer) that connects to this CA's
		// server; pair it with a [[vpn.iroute]] on the server.
		fs := newFlags("pki site", "DIR NAME")
		pos, err := parse(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 2, 2); err != nil {
			return err
		}
		cert, key, err := pki.ClientFiles(pos[0], pos[1])
		if err != nil {
			return err
		}
		fmt.Printf("%s\n%s\n", cert, key)
		return nil
	case "tls-crypt-v2":
		fs := newFlags("pki tls-crypt-v2", "DIR")
		pos, err := parse(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 1, 1); err != nil {
			return err
		}
		path := filepath.Join(pos[0], pki.TLSCryptV2File)
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("%s already exists", path)
		}
		k, err := control.GenerateTLSCryptV2ServerKey()
		if err != nil {
			return err
		}
		text, _ := k.MarshalText()
		if err := os.WriteFile(path, text, 0o600); err != nil {
			return err
		}
		fmt.Printf("%s\n(set tls_crypt_v2 = %q in [vpn]; profiles made with pki client from now on carry their own keys)\n", path, path)
		return nil
	case "revoke":
		fs := newFlags("pki revoke", "DIR NAME [-cert FILE]")
		certFile := fs.String("cert", "", "revoke this certificate file instead of the one(s) found for NAME")
		pos, err := parse(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 2, 2); err != nil {
			return err
		}
		path, err := pki.Revoke(pos[0], pos[1], *certFile)
		if err != nil {
			return err
		}
		fmt.Printf("%s\n(a server with crl = %q applies it within a second; connected sessions of %s are closed)\n", path, path, pos[1])
		return nil
	case "-h", "-help", "--help":
		fmt.Print(pkiUsage)
		return nil
	}
	fmt.Fprintf(os.Stderr, "ovfwd pki: unknown subcommand %q (init, client, site, revoke or tls-crypt-v2)\n", args[0])
	return errUsage
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
