package control_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn/control"
)

// Clients that hold valid keys and misbehave (docs/hardening.md).

func writeScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "verify.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStreamFloodBounded: a client through TLS floods its control stream
// while its login runs (nothing reads the stream then). What the server
// holds for it must stay bounded; past the bound it stops acknowledging.
func TestStreamFloodBounded(t *testing.T) {
	dir := newPKI(t)
	e := startEchoServer(t, dir, "127.0.0.1:0", func(c *control.Config) {
		c.Auth = &control.UserPass{Command: []string{writeScript(t, "sleep 3\nexit 1\n")}, Timeout: 10 * time.Second}
	})
	cfg := clientProfile(t, dir, "flood", e.addr())
	cfg.Username, cfg.Password, cfg.NoReconnect = "flood", "x", true
	c, _, err := control.StartClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !waitFor(5*time.Second, c.TLSComplete) {
		t.Fatal("client never got through TLS")
	}
	go func() {
		chunk := bytes.Repeat([]byte("A"), 1000)
		for range 1000 { // 1 MB
			if c.WriteControlRaw(chunk) != nil {
				return
			}
		}
	}()
	most := 0
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		most = max(most, e.srv.MaxBuffered())
	}
	t.Logf("most buffered for the flooding session: %d bytes (bound %d); drops %v", most, control.MaxSessionBuffer, e.srv.Drops())
	if most > control.MaxSessionBuffer {
		t.Fatalf("the server buffered %d bytes of one session's stream, bound %d", most, control.MaxSessionBuffer)
	}
	if most < 16<<10 {
		t.Fatalf("only %d bytes ever buffered: the flood did not arrive, nothing was tested", most)
	}
	if e.srv.Drop(control.DropStreamFull) == 0 {
		t.Error("stream_full not counted")
	}
}

// TestSendControlFloodLogged: an established client's unknown control
// messages are counted, and logged a line per ten seconds at most.
func TestSendControlFloodLogged(t *testing.T) {
	e, c := dialEcho(t, "chatty")
	for i := range 500 {
		if err := c.SendControl(fmt.Sprintf("JUNK %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if !waitFor(10*time.Second, func() bool { return e.srv.Drop(control.DropIgnoredText) >= 500 }) {
		t.Fatalf("ignored_text = %d, want 500", e.srv.Drop(control.DropIgnoredText))
	}
	if n := e.log.count("ignoring"); n > 2 {
		t.Errorf("%d log lines for 500 unknown control messages, want at most 2", n)
	}
	ping(t, c, c.Pushed().Gateway4, 1)
}

// TestRenegotiationReauthorized: a renegotiation presents another valid
// certificate (another name), the same certificate revoked since, or a
// wrong password: each is refused and the session ends; an unchanged one
// passes and re-runs the login command.
func TestRenegotiationReauthorized(t *testing.T) {
	dir := newPKI(t)
	var revoked atomic.Pointer[string] // serial
	calls := filepath.Join(t.TempDir(), "calls")
	script := writeScript(t, fmt.Sprintf("echo x >> %s\n[ \"$(sed -n 2p \"$1\")\" = secret ] && exit 0\nexit 1\n", calls))
	e := startEchoServer(t, dir, "127.0.0.1:0", func(c *control.Config) {
		c.RenegSec = -1
		c.Auth = &control.UserPass{Command: []string{script}}
		c.Revoked = func(cert *x509.Certificate) bool {
			s := revoked.Load()
			return s != nil && *s == cert.SerialNumber.String()
		}
	})
	other := clientProfile(t, dir, "mallory", e.addr()).Certificate
	for _, tc := range []struct {
		name   string
		change func(c *control.Client, own tls.Certificate)
		ok     bool
	}{
		{"unchanged", func(*control.Client, tls.Certificate) {}, true},
		{"other-name", func(c *control.Client, _ tls.Certificate) { c.SetCredentials(other, "u", "secret") }, false},
		{"revoked", func(_ *control.Client, own tls.Certificate) {
			leaf, _ := x509.ParseCertificate(own.Certificate[0])
			s := leaf.SerialNumber.String()
			revoked.Store(&s)
		}, false},
		{"password", func(c *control.Client, own tls.Certificate) { c.SetCredentials(own, "u", "wrong") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			revoked.Store(nil)
			os.Remove(calls)
			cfg := clientProfile(t, dir, "reneg-"+tc.name, e.addr())
			cfg.Username, cfg.Password, cfg.NoReconnect = "u", "secret", true
			c := dial(t, cfg)
			peer := c.Pushed().PeerID
			before := e.srv.Drop(control.DropRenegRefused)
			tc.change(c, cfg.Certificate)
			if !c.Renegotiate() {
				t.Fatal("could not start a renegotiation")
			}
			if tc.ok {
				if !waitFor(10*time.Second, func() bool { return c.Stats().Renegs == 1 }) {
					t.Fatalf("renegotiation did not complete: %+v", c.Stats())
				}
				if b, _ := os.ReadFile(calls); strings.Count(string(b), "x") != 2 {
					t.Errorf("login command ran %d times, want 2 (first key and renegotiation)", strings.Count(string(b), "x"))
				}
				ping(t, c, c.Pushed().Gateway4, 1)
				return
			}
			gone := func() bool { _, ok := e.dp.Peer(peer); return !ok }
			if !waitFor(10*time.Second, gone) {
				t.Fatalf("session still up 10 s after a renegotiation that should be refused (client renegs %d)", c.Stats().Renegs)
			}
			if n := c.Stats().Renegs; n != 0 {
				t.Errorf("client completed %d renegotiations", n)
			}
			if e.srv.Drop(control.DropRenegRefused) != before+1 {
				t.Errorf("reneg_refused %d, want %d", e.srv.Drop(control.DropRenegRefused), before+1)
			}
		})
	}
}

// TestConcurrentBadLogins: wrong-password logins from one address at once
// run the command at most auth_fail_limit times: logins in flight count
// before they fail.
func TestConcurrentBadLogins(t *testing.T) {
	dir := newPKI(t)
	calls := filepath.Join(t.TempDir(), "calls")
	script := writeScript(t, fmt.Sprintf("echo x >> %s\nsleep 1\nexit 1\n", calls))
	e := startEchoServer(t, dir, "127.0.0.1:0", func(c *control.Config) {
		c.Auth = &control.UserPass{Command: []string{script}, Timeout: 10 * time.Second}
		c.AuthFailLimit, c.AuthFailWindow = 3, time.Minute
	})
	var wg sync.WaitGroup
	for i := range 10 {
		cfg := clientProfile(t, dir, fmt.Sprintf("bad%d", i), e.addr())
		cfg.Username, cfg.Password, cfg.NoReconnect = fmt.Sprintf("bad%d", i), "wrong", true
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if c, err := control.Dial(ctx, cfg); err == nil {
				c.Close()
				t.Errorf("a wrong password was admitted")
			}
		}()
	}
	wg.Wait()
	b, _ := os.ReadFile(calls)
	if n := strings.Count(string(b), "x"); n > 3 {
		t.Errorf("the login command ran %d times for 10 concurrent bad logins from one address, limit 3", n)
	}
	if e.srv.Drop(control.DropLoginLimited) < 7 {
		t.Errorf("login_limited = %d, want ≥ 7", e.srv.Drop(control.DropLoginLimited))
	}
}

// TestAuthFileControlChars: a password with CR, LF or NUL stays on its
// line of the credentials file, and a common name with a newline stays
// one environment value (openvpn replaces them with '_').
func TestAuthFileControlChars(t *testing.T) {
	script := writeScript(t, `[ "$(wc -l < "$1")" -eq 2 ] || exit 1
[ "$(sed -n 2p "$1")" = "pa_s_s_x" ] || exit 1
[ "$common_name" = "evil_name" ] || exit 1
exit 0
`)
	u := &control.UserPass{Command: []string{script}, Timeout: 5 * time.Second}
	err := u.Verify(context.Background(), control.AuthRequest{Username: "u", Password: "pa\ns\rs\x00x", CommonName: "evil\nname"})
	if err != nil {
		t.Fatalf("control characters reached the file or the environment: %v", err)
	}
}
